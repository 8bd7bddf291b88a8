// Package cli is the tcc command line: the cobra command tree behind
// cmd/tcc. It is a package (not main) so that a driver binary built with
// out-of-tree fusion rules (passes/external) runs the same commands.
package cli

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/tcc-dev/tcc/codegen"
	"github.com/tcc-dev/tcc/codegen/target"

	"github.com/tcc-dev/tcc/passes/external"

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
	// --rules links out-of-tree rule packages: build (or reuse) a tcc
	// driver with them and run the same command through it.
	if flags, _, err := external.SplitFlags(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "tcc:", err)
		return 1
	} else if len(flags.Rules) > 0 {
		err := external.Reexec(flags, os.Args[1:])
		var ee *external.ExitError
		switch {
		case errors.As(err, &ee):
			return ee.Code // the driver already printed its error
		case err != nil:
			fmt.Fprintln(os.Stderr, "tcc:", err)
			return 1
		}
		return 0
	}
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
		Version:       codegen.Version + " (targets " + target.TTMetalRelease + ")",
	}
	root.PersistentFlags().StringSlice("rules", nil, "Go packages of extra fusion rules to link in (each declares func Rules() []*rewrite.Rule; see passes/external/example). A rule package is code that runs with your privileges: load only what you trust")
	root.PersistentFlags().Duration("rules-timeout", external.DefaultTimeout, "with --rules: kill the rule driver (and fail) if the command runs longer than this (0 = no limit); it is also stopped when tcc is interrupted or killed")
	root.AddCommand(newBuildCmd(), newRunCmd(), newReportCmd(), newIRCmd(), newPassesCmd(), newGenGoCmd(), newPerfCmd(), newWeightsCmd(), newDevicesCmd(), newCheckCmd())
	addCompletions(root)
	return root
}

// notStdout refuses "-" as an output path: the command writes what (a
// directory or a file replaced atomically), which a stream cannot hold.
func notStdout(path, what string) error {
	if path == "-" {
		return fmt.Errorf("-o -: this command writes %s, not a stream; give a path", what)
	}
	return nil
}
