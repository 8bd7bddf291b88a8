package cli

import (
	"fmt"
	"io"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/tcc-dev/tcc/codegen"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/models"
	"github.com/tcc-dev/tcc/passes"
	"github.com/tcc-dev/tcc/passes/report"
)

func newReportCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "report",
		Short: "Reports about a model's compiled form",
		Args:  cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return fmt.Errorf("unknown report %q (known: ops; see tcc report --help)", args[0])
			}
			return cmd.Help()
		},
	}
	var format string
	var compare, collapse bool
	ops := &cobra.Command{
		Use:   "ops MODEL",
		Short: "Count device programs per decoder layer (per device, per decode step)",
		Long: `Count the device programs one decode step launches on each device, per decoder
layer and by op. After the pipeline every graph op is one device program.

  tcc report ops qwen27b --mesh 1x2 --stage unfused --format json
  tcc report ops tiny-mlp --stage fused          # table with the rules that fired
  tcc report ops qwen27b --mesh 1x2 --compare    # unfused vs fused per layer

--format json prints the contract other tools read: model, tcc_version, mesh,
stage, mode (decode or prefill: the step counted), batch, config (a path, or
"embedded"; models with a config), total_ops and layers[] with index, kind,
ops and by_op.`,
		Args: cobra.ExactArgs(1),
	}
	mf := addModelFlags(ops, "unfused")
	ops.Flags().StringVar(&format, "format", "table", "output format: table, json or csv")
	ops.Flags().BoolVar(&compare, "compare", false, "count the graph unfused and fused and print both per layer side by side (with --disable, the fused side without those rules or passes)")
	addCollapseFlag(ops, &collapse)
	ops.RunE = func(cmd *cobra.Command, args []string) error {
		if compare {
			if mf.flags.Changed("stage") {
				return fmt.Errorf("--compare counts both stages; drop --stage %s", mf.stage)
			}
			return compareOps(cmd.OutOrStdout(), args[0], mf, format)
		}
		m, g, res, err := mf.graphFor(args[0])
		if err != nil {
			return err
		}
		rep, err := opReport(args[0], m, mf, g, res)
		if err != nil {
			return err
		}
		if format == "table" && collapseOn(cmd, collapse) {
			return writeOpsCollapsed(cmd.OutOrStdout(), rep)
		}
		return rep.Write(cmd.OutOrStdout(), format)
	}
	cmd.AddCommand(ops)
	return cmd
}

// opReport builds the op-count report, with rule firings when res has
// them, and what it was built from: tcc's version, the stage, the step
// (mode), the batch and the model config.
func opReport(name string, m models.Model, mf *modelFlags, g *ir.Graph, res *passes.Result) (*report.Report, error) {
	r := report.FromPipeline(name, mf.stage, g, res)
	args, err := mf.args(m)
	if err != nil {
		return nil, err
	}
	r.TccVersion, r.Mode, r.Batch = codegen.Version, "decode", 1
	if v, ok := args["mode"]; ok {
		r.Mode = v
	}
	if v, ok := args["batch"]; ok {
		if r.Batch, err = strconv.Atoi(v); err != nil {
			return nil, fmt.Errorf("--batch %q: not an integer", v)
		}
	}
	if v, ok := args["config"]; ok {
		r.Config = v
		if v == "" {
			r.Config = "embedded"
		}
	}
	return r, nil
}

// compareOps prints the unfused and fused counts of one model side by side.
func compareOps(w io.Writer, name string, mf *modelFlags, format string) error {
	mf.stage = "fused"
	m, fg, res, err := mf.graphFor(name)
	if err != nil {
		return err
	}
	fr, err := opReport(name, m, mf, fg, res)
	if err != nil {
		return err
	}
	args, err := mf.args(m)
	if err != nil {
		return err
	}
	ug, err := m.Build(args, fg.Mesh)
	if err != nil {
		return err
	}
	c, err := compareReports(report.FromPipeline(name, "unfused", ug, nil), fr)
	if err != nil {
		return err
	}
	return c.write(w, format)
}
