// Command tcc compiles models written in Go into Tenstorrent Blackhole
// programs, runs them on the built-in simulator, and reports what it did.
//
//	tcc build tiny-mlp -o out/tiny-mlp       # kernels, program configs, report
//	tcc run tiny-mlp --backend sim --check   # run on the simulator, check PCC
//	tcc report ops qwen27b --mesh 1x2        # device programs per layer
//	tcc ir tiny-mlp --stage fused            # print the graph IR
//	tcc passes                               # list passes and fusion rules
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	_ "github.com/tcc-dev/tcc/models/tinymlp"
)

// exitError carries a specific exit code (for example a failed --check).
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }

func main() {
	if err := newRoot().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "tcc:", err)
		var ee *exitError
		if errors.As(err, &ee) {
			os.Exit(ee.code)
		}
		os.Exit(1)
	}
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:   "tcc",
		Short: "tcc compiles Go-written models into Tenstorrent Blackhole programs",
		Long: `tcc is a graph compiler for Tenstorrent Blackhole cards. A model written in Go
is sharded over a mesh of cards, fused so that a decode step launches few device
programs, and lowered to C++ reader/compute/writer kernels plus host program
configs for the 11x10 worker grid. Programs run on the built-in simulator by
default.

Start with:
  tcc run tiny-mlp --backend sim --check
  tcc report ops tiny-mlp --stage fused
  tcc build tiny-mlp -o out/tiny-mlp`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newBuildCmd(), newRunCmd(), newReportCmd(), newIRCmd(), newPassesCmd())
	return root
}
