// Package cli is the tcc command line: the cobra command tree behind
// cmd/tcc. It is a package (not main) so that a driver binary built with
// out-of-tree fusion rules (passes/external) runs the same commands.
package cli

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	_ "github.com/tcc-dev/tcc/models/qwen27b"
	_ "github.com/tcc-dev/tcc/models/tinymlp"
)

// exitError carries a specific exit code (for example a failed --check).
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }

// Main runs the CLI with os.Args and returns the process exit code: 0 on
// success, 1 on an error (printed to stderr as "tcc: ..."), or the code a
// command chose (2 for a failed --check).
func Main() int {
	root := NewRoot()
	if err := root.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "tcc:", err)
		var ee *exitError
		if errors.As(err, &ee) {
			return ee.code
		}
		return 1
	}
	return 0
}

// NewRoot returns the root command with every subcommand.
func NewRoot() *cobra.Command {
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
