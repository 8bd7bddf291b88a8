package cli

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// TestFlagValueNames: pflag takes the first backquoted word of a flag's
// usage as the name of its value (--weights DIR); a backquoted command
// there (`tcc weights convert`) shows as --weights tcc weights convert.
// Every flag's value name is one word, and --rules only under the
// commands of rulesCommands.
func TestFlagValueNames(t *testing.T) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			if name, _ := pflag.UnquoteUsage(f); strings.ContainsAny(name, " \t") {
				t.Errorf("%s --%s: value shown as %q", c.CommandPath(), f.Name, name)
			}
		})
		hasRules := c.Flags().Lookup("rules") != nil
		path := strings.TrimPrefix(c.CommandPath(), "tcc ")
		want := false
		for _, r := range rulesCommands {
			want = want || r == path
		}
		if hasRules != want {
			t.Errorf("%s: --rules %v, want %v", c.CommandPath(), hasRules, want)
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(NewRoot())
}
