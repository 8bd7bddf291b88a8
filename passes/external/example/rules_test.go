package example

import (
	"flag"
	"testing"

	"github.com/tcc-dev/tcc/passes/rewrite"
	"github.com/tcc-dev/tcc/passes/rulestest"
)

var update = flag.Bool("update", false, "rewrite the output sections of testdata/*.txt")

// TestRuleData is what an out-of-tree rule package's test looks like:
// expect= cases in testdata/*.txt (families=scalar: only this package's
// rules, so the cases also hold under `tcc check` with every rule), the result against the output section,
// and every fused op checked against its decomposition.
func TestRuleData(t *testing.T) {
	rulestest.Run(t, "testdata/*.txt", Rules(), rulestest.Options{Update: *update, Families: func(f string) []*rewrite.Rule {
		if f == Family {
			return Rules()
		}
		return nil
	}})
}
