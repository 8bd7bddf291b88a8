package cli

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/tcc-dev/tcc/codegen"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/models"
	"github.com/tcc-dev/tcc/sim/timing"
	"github.com/tcc-dev/tcc/sim/timing/fromcodegen"
)

func newPerfCmd() *cobra.Command {
	var format, trace, threads string
	var params bool
	cmd := &cobra.Command{
		Use:   "perf MODEL",
		Short: "Predict every program's device time from its kernel IR, per kind, per layer and per step",
		Long: `Compile MODEL and predict the device time of one step with the timing model
(sim/timing): every core's reader, compute, writer and ethernet kernels run
their statements as events (NoC reads in flight until a barrier, CB flow,
semaphores, ethernet handshakes, compute by instruction and fidelity), bounded
by DRAM banks, NoC ports and ethernet links, plus the fixed per-program cost
and the launch gap. Layers that differ only in addresses are simulated once.

  tcc perf qwen27b --mesh 1x2 --stage fused
  tcc perf qwen27b --mesh 1x2 --stage unfused --format json
  tcc perf qwen27b --mesh 1x2 --format csv > perf.csv      # joins with ops_perf_results
  tcc perf qwen27b --mesh 1x2 --trace step.json           # open in ui.perfetto.dev
  tcc perf qwen27b --mesh 1x2 --threads rms_norm          # where one program's time goes
  tcc perf --params                                       # the model's parameters

--format json prints the object other tools read: model, mesh, stage, batch, mode,
devices, step_us (slowest device), floor_us (bytes each device must stream /
430 GB/s), launch_us_total, kinds[] and programs[].`,
		Args: func(cmd *cobra.Command, args []string) error {
			if params {
				return cobra.NoArgs(cmd, args)
			}
			return cobra.ExactArgs(1)(cmd, args)
		},
	}
	mf := addModelFlags(cmd, "fused")
	cmd.Flags().StringVar(&format, "format", "table", "output format: table, json or csv")
	cmd.Flags().StringVar(&trace, "trace", "", "also write a Chrome/Perfetto trace-event JSON of one step to this file")
	cmd.Flags().StringVar(&threads, "threads", "", "instead of the table, print each kernel's latest thread (core, finish, waits) of the first program of this op")
	cmd.Flags().BoolVar(&params, "params", false, "print the timing model's parameters (fitted ones marked) and exit")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		out := cmd.OutOrStdout()
		if params {
			return writeParams(out, timing.Default())
		}
		if format != "table" && format != "json" && format != "csv" {
			return fmt.Errorf("unknown --format %q (want table, json or csv)", format)
		}
		if trace != "" {
			if err := checkWritable(trace); err != nil {
				return err
			}
		}
		m, g, _, err := mf.graphFor(args[0])
		if err != nil {
			return err
		}
		rep, err := perfReport(args[0], m, mf, g)
		if err != nil {
			return err
		}
		if trace != "" {
			tr, err := rep.Trace()
			if err != nil {
				return err
			}
			if err := codegen.WriteFileAtomic(trace, tr); err != nil {
				return err
			}
		}
		if threads != "" {
			return rep.WriteThreads(out, threads)
		}
		switch format {
		case "json":
			b, err := rep.JSON()
			if err != nil {
				return err
			}
			_, err = out.Write(b)
			return err
		case "csv":
			return rep.WriteCSV(out)
		}
		return rep.WriteTable(out, true)
	}
	return cmd
}

// perfReport compiles g and predicts its step.
func perfReport(name string, m models.Model, mf *modelFlags, g *ir.Graph) (*timing.Report, error) {
	b, err := codegen.Compile(g, target.Blackhole())
	if err != nil {
		return nil, err
	}
	return predictBuild(name, m, mf, b)
}

// predictBuild predicts b's step with the model's batch and mode.
func predictBuild(name string, m models.Model, mf *modelFlags, b *codegen.Build) (*timing.Report, error) {
	args, err := mf.args(m)
	if err != nil {
		return nil, err
	}
	meta := timing.Meta{Model: name, Stage: mf.stage, Mode: "decode", Batch: 1}
	if v, ok := args["mode"]; ok {
		meta.Mode = v
	}
	if v, ok := args["batch"]; ok {
		if n, err := strconv.Atoi(v); err == nil {
			meta.Batch = n
		}
	}
	return timing.Predict(fromcodegen.Build(b), timing.Default(), meta)
}

func writeParams(w io.Writer, p *timing.Params) error {
	tw := tabwriter.NewWriter(w, 0, 2, 2, ' ', 0)
	fmt.Fprintln(tw, "parameter\tvalue\tunit\tfitted\tsource")
	for _, r := range p.Table() {
		fitted := ""
		if r.Fitted {
			fitted = "fitted"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Name, r.Value, r.Unit, fitted, r.Source)
	}
	return tw.Flush()
}

// checkWritable fails early when path's directory does not exist or is not writable.
func checkWritable(path string) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, ".tcc-write-check-")
	if err != nil {
		return fmt.Errorf("cannot write %s: %v", path, err)
	}
	name := f.Name()
	f.Close()
	return os.Remove(name)
}
