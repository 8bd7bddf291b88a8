// Package cli is the tcc command line: the cobra command tree behind
// cmd/tcc. It is a package (not main) so that a driver binary built with
// out-of-tree fusion rules (passes/external) runs the same commands.
package cli

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

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
		if err := rulesApply(os.Args[1:]); err != nil {
			fmt.Fprintln(os.Stderr, "tcc:", err)
			return 1
		}
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
		Version:       versionLine(),
	}
	root.SetVersionTemplate("{{.Version}}\n")
	root.SetFlagErrorFunc(flagError)
	root.SetUsageTemplate(wrappedUsage(root.UsageTemplate()))
	root.AddCommand(newBuildCmd(), newRunCmd(), newReportCmd(), newIRCmd(), newPassesCmd(), newGenGoCmd(), newPerfCmd(), newWeightsCmd(), newDevicesCmd(), newCheckCmd(), newVersionCmd())
	addRulesFlags(root)
	addCompletions(root)
	return root
}

// rulesCommands are the commands that run the pass pipeline, so that
// fusion rules linked in with --rules change what they do: only they
// take --rules and --rules-timeout.
var rulesCommands = []string{"build", "run", "report ops", "ir", "passes", "perf", "check", "weights convert", "gen-go"}

// addRulesFlags gives the commands of rulesCommands --rules and
// --rules-timeout. Main acts on both before cobra parses anything (they
// choose the binary that runs the command); cobra sees them only for
// --help and completion.
func addRulesFlags(root *cobra.Command) {
	for _, path := range rulesCommands {
		c, _, err := root.Find(strings.Fields(path))
		if err != nil || c == root {
			panic("rulesCommands: no command " + path)
		}
		c.Flags().StringSlice("rules", nil, "Go packages of extra fusion rules to link in (each declares func Rules() []*rewrite.Rule; see passes/external/example). A rule package is code that runs with your privileges: load only what you trust")
		c.Flags().Duration("rules-timeout", external.DefaultTimeout, "with --rules: kill the rule driver (and fail) if the command runs longer than this (0 = no limit); it is also stopped when tcc is interrupted or killed")
	}
}

// rulesApply refuses --rules on a command that runs no pass (tcc devices,
// tcc weights inspect, ...), where the rules could change nothing.
func rulesApply(args []string) error {
	_, rest, err := external.SplitFlags(args)
	if err != nil {
		return err
	}
	root := NewRoot()
	c, _, err := root.Find(rest)
	if err != nil || c == root || c.Flags().Lookup("rules") != nil {
		return nil // cobra reports a bad command; no command: tcc --rules P alone
	}
	return fmt.Errorf("--rules: %s runs no pass, so fusion rules change nothing; --rules applies to tcc %s", c.CommandPath(), strings.Join(rulesCommands[:len(rulesCommands)-1], ", tcc "))
}

// notStdout refuses "-" as an output path: the command writes what (a
// directory or a file replaced atomically), which a stream cannot hold.
func notStdout(path, what string) error {
	if path == "-" {
		return fmt.Errorf("-o -: this command writes %s, not a stream; give a path", what)
	}
	return nil
}
