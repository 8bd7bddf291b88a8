package cli

import (
	"strings"

	"github.com/spf13/cobra"

	"github.com/tcc-dev/tcc/models"
	"github.com/tcc-dev/tcc/passes"
	"github.com/tcc-dev/tcc/runtime"
)

// addCompletions makes the shell completion (tcc completion bash|zsh|fish|
// powershell) complete model names for every command that takes MODEL,
// and the values of --stage, --format, --disable, --print-after, --mesh,
// --mode, --dtype-policy, --kv-dtype and --backend wherever a command has them.
func addCompletions(root *cobra.Command) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if strings.HasSuffix(c.Use, " MODEL") {
			c.ValidArgsFunction = func(_ *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
				if len(args) > 0 {
					return nil, cobra.ShellCompDirectiveNoFileComp
				}
				return models.Names(), cobra.ShellCompDirectiveNoFileComp
			}
		}
		fixed := map[string][]string{
			"stage":        {"unfused", "fused"},
			"mesh":         {"1x1", "1x2", "1x4", "1x8"},
			"mode":         {"decode", "prefill"},
			"dtype-policy": {"fast", "accurate"},
			"kv-dtype":     {"bf16", "bfp8_b"},
			"backend":      runtime.Backends,
			"format":       formatsOf(c),
		}
		for name, vals := range fixed {
			if c.Flags().Lookup(name) != nil && len(vals) > 0 {
				_ = c.RegisterFlagCompletionFunc(name, cobra.FixedCompletions(vals, cobra.ShellCompDirectiveNoFileComp))
			}
		}
		if c.Flags().Lookup("disable") != nil {
			_ = c.RegisterFlagCompletionFunc("disable", completeList(func() []string {
				var names []string
				for _, n := range disableNames() {
					names = append(names, n.name)
				}
				return names
			}))
		}
		if c.Flags().Lookup("print-after") != nil {
			_ = c.RegisterFlagCompletionFunc("print-after", completeList(func() []string { return passes.Default().Names() }))
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// formatsOf lists the --format values command c accepts.
func formatsOf(c *cobra.Command) []string {
	switch c.Name() {
	case "ops", "perf":
		return []string{"table", "json", "csv"}
	case "ir":
		return irFormats
	case "devices":
		return []string{"table", "json"}
	}
	return nil
}

// completeList completes one element of a comma-separated list flag: the
// names not given yet, after the elements already typed.
func completeList(names func() []string) cobra.CompletionFunc {
	return func(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		prefix, partial := "", toComplete
		given := map[string]bool{}
		if i := strings.LastIndex(toComplete, ","); i >= 0 {
			prefix, partial = toComplete[:i+1], toComplete[i+1:]
			for _, g := range strings.Split(toComplete[:i], ",") {
				given[g] = true
			}
		}
		var out []cobra.Completion
		for _, n := range names() {
			if !given[n] && strings.HasPrefix(n, partial) {
				given[n] = true // once, even if listed twice (verify)
				out = append(out, prefix+n)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
	}
}
