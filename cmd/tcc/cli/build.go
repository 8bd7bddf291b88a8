package cli

import (
	"fmt"
	"strings"
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

With --persistent the step is ONE persistent program per device: the merged
kernels (each core's phases between tcc_phase_begin / tcc_phase_end, phases
whose bodies print the same sharing one function) and programs.json with one
program per device whose "persistent" section lays out the control block, the
tables buffer (per-phase CB records) and each phase's CBs and argument slices.
tcc prints the merged kernels' estimated code per RISC (shared, and with every
phase in line) and refuses phases that cannot share a compute binary.

  tcc build tiny-mlp -o out/tiny-mlp
  tcc build tiny-mlp --layers 4 --hidden 256 -o out/tiny-mlp-4
  tcc build tiny-mlp --persistent -o out/tiny-mlp-persistent`,
		Args: cobra.ExactArgs(1),
	}
	mf := addModelFlags(cmd, "fused")
	mf.addSFPU()
	mf.addTopology()
	cmd.Flags().StringVarP(&out, "out", "o", "", "output directory (default out/MODEL)")
	var persistent bool
	cmd.Flags().BoolVar(&persistent, "persistent", false, "build the step as ONE persistent program per device (merged kernels, phases sharing code; programs.json holds one program per device with its persistent section)")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
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
		var files map[string][]byte
		if persistent {
			files, err = persistentFiles(cmd.OutOrStdout(), b, info)
		} else {
			files, err = b.FilesWith(info)
		}
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
		perf, err := predictBuildOpts(args[0], m, mf, b, -1, nil, persistent)
		if err != nil {
			return err
		}
		if files["perf.json"], err = perf.JSON(); err != nil {
			return err
		}
		if err := codegen.WriteDir(out, files); err != nil {
			return err
		}
		if persistent {
			srcs := 0
			for n := range files {
				if strings.HasSuffix(n, ".cpp") {
					srcs++
				}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: ONE persistent program per device of %d phases on mesh %s, %d kernel sources -> %s (%.2fs)\n",
				args[0], len(b.Programs), g.Mesh, srcs, out, time.Since(start).Seconds())
			return nil
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
