package cli

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/tcc-dev/tcc/codegen"
	"github.com/tcc-dev/tcc/codegen/hostcfg"
	"github.com/tcc-dev/tcc/models"
)

func newBuildCmd() *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "build MODEL",
		Short: "Compile a model into C++ kernels, host program configs and an op report",
		Long: `Compile MODEL through the pass pipeline (fused by default) and write:

  DIR/kernels/*.cpp   tt-metal reader, compute and writer kernels, one file per
                      distinct kernel source
  DIR/programs.json   host program configs: one entry per program per device in
                      execution order (kernels, core ranges, CBs, semaphores,
                      compile-time and runtime args, buffers)
  DIR/report.json     the op-count report (as tcc report ops --format json)
  DIR/perf.json       the predicted device time of one step (as tcc perf --format json,
                      at its default position: the last of --max-seq)

The directory holds either the previous build or the complete new one at every
moment (written beside it, fsynced, swapped in one step); a symlinked -o is
written through to its target. tcc replaces only a directory it wrote (its
.tcc-build marker lists the files) and refuses, naming them, when it holds
other files. One build at a time writes a directory (another gets "another
build is writing DIR"); temporaries of a killed build are removed by the next;
"/", system directories (/usr, /etc, ...) and the home directory are refused.
Two builds of the same model and flags are byte-identical. A model whose buffers
(weights, KV caches, state, activations) do not fit one device's DRAM is refused
before it is compiled (rule dram-capacity), with the numbers and what fits.

  tcc build tiny-mlp -o out/tiny-mlp
  tcc build tiny-mlp --layers 4 --hidden 256 -o out/tiny-mlp-4`,
		Args: cobra.ExactArgs(1),
	}
	mf := addModelFlags(cmd, "fused")
	mf.addSFPU()
	cmd.Flags().StringVarP(&out, "out", "o", "", "output directory (default out/MODEL)")
	var persistent bool
	cmd.Flags().BoolVar(&persistent, "persistent", false, "build the step as one persistent program (not available yet: see the error)")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if persistent {
			return errors.New("--persistent: tcc cannot print persistent programs yet: the C++ printer has no device implementation of tcc_phase_begin / tcc_phase_end (per-phase CB tables in L1 installed with setup_local_cb_read_write_interfaces, rta_l1_base / crta_l1_base moved to each phase's argument tables, compute re-initialised per phase); tcc run --persistent and tcc perf --persistent run the persistent program on the built-in simulator and the timing model")
		}
		if err := notStdout(out, "a build directory"); err != nil {
			return err
		}
		if out == "" {
			out = "out/" + args[0]
		}
		if err := codegen.CheckOutputDir(out); err != nil {
			return err
		}
		start := time.Now()
		m, g, res, err := mf.graphFor(args[0])
		if err != nil {
			return err
		}
		if _, err := checkDeviceMemory(args[0], m, mf, g); err != nil {
			return err
		}
		t, err := mf.target()
		if err != nil {
			return err
		}
		b, err := codegen.Compile(g, t)
		if err != nil {
			return err
		}
		info, err := hostInfo(m, mf)
		if err != nil {
			return err
		}
		files, err := b.FilesWith(info)
		if err != nil {
			return err
		}
		r, err := opReport(args[0], m, mf, g, res)
		if err != nil {
			return err
		}
		rep, err := r.JSON()
		if err != nil {
			return err
		}
		files["report.json"] = rep
		perf, err := predictBuild(args[0], m, mf, b, -1, nil)
		if err != nil {
			return err
		}
		if files["perf.json"], err = perf.JSON(); err != nil {
			return err
		}
		if err := codegen.WriteDir(out, files); err != nil {
			return err
		}
		fmt.Fprintf(cmd.OutOrStdout(), "%s: %d programs per device on mesh %s, %d kernel sources -> %s (%.2fs)\n",
			args[0], len(b.Programs), g.Mesh, len(files)-3, out, time.Since(start).Seconds())
		return nil
	}
	return cmd
}

// hostInfo is the model's description of its inputs and weights for the
// programs.json manifest, or nil when the model gives none.
func hostInfo(m models.Model, mf *modelFlags) (hostcfg.HostInfo, error) {
	hp, ok := m.(interface {
		HostInfo(models.Args) (hostcfg.HostInfo, error)
	})
	if !ok {
		return nil, nil
	}
	args, err := mf.args(m)
	if err != nil {
		return nil, err
	}
	return hp.HostInfo(args)
}
