package cli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tcc-dev/tcc/passes"
	"github.com/tcc-dev/tcc/passes/rulestest"
)

func newCheckCmd() *cobra.Command {
	var update bool
	cmd := &cobra.Command{
		Use:   "check CASES...",
		Short: "Run fusion-rule test data (expect= cases) against every rule, built-in and --rules",
		Long: `Run rule test-data cases, each a txtar file with expect=Rule[*N] /
expect-not=Rule / families=f1,f2 directives, an input graph and the expected
output graph (see passes/rulestest). Every registered rule runs: tcc's own
and those of --rules packages, so an out-of-tree rule package checks its cases
with

  tcc check --rules ./path/to/pkg ./path/to/pkg/testdata/*.txt

Each case reports ok or its problems: a firing count that does not hold, a
result that does not verify or round-trip, a fused op whose decomposition
computes something else, an output that differs from the case's. --update
rewrites the output sections with what the rules produce (review the diff).
CASES are glob patterns (quote them to let tcc expand them) or files.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			out := cmd.OutOrStdout()
			failed, total := 0, 0
			for _, pat := range args {
				res, err := rulestest.Check(pat, passes.Rules(), rulestest.Options{Update: update, Families: passes.FamilyRules})
				if err != nil {
					return err
				}
				for _, r := range res {
					total++
					if len(r.Problems) == 0 {
						fmt.Fprintf(out, "ok    %s\n", r.Case)
						continue
					}
					failed++
					fmt.Fprintf(out, "FAIL  %s\n", r.Case)
					for _, p := range r.Problems {
						fmt.Fprintf(out, "      %s\n", strings.ReplaceAll(p, "\n", "\n      "))
					}
				}
			}
			if failed > 0 {
				return fmt.Errorf("%d of %d rule cases failed", failed, total)
			}
			if total == 0 {
				return errors.New("no rule cases")
			}
			fmt.Fprintf(out, "%d rule cases passed\n", total)
			return nil
		},
	}
	cmd.Flags().BoolVar(&update, "update", false, "rewrite each case's output section with the rules' result")
	return cmd
}
