package cli

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/tcc-dev/tcc/codegen"
	"github.com/tcc-dev/tcc/codegen/target"
)

// Version is tcc's version as the go command stamped it into the binary
// (runtime/debug.ReadBuildInfo): the module version, a tag or a
// pseudo-version such as v0.0.0-20260301120000-0123456789ab for a binary
// built by `go install ./cmd/tcc` from a clone, "+dirty" when the work
// tree had changes. "(devel)" when the build recorded none (go run, go
// test, -buildvcs=false).
func Version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}

// vcsInfo is the commit the binary was built from, when the go command
// recorded it (vcs.revision, vcs.modified): "0123456789ab" or
// "0123456789ab, modified"; "" without.
func vcsInfo() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if rev == "" {
		return ""
	}
	rev = rev[:min(12, len(rev))]
	if modified == "true" {
		rev += ", modified"
	}
	return rev
}

// versionLine is the first line of tcc version and all of tcc --version.
func versionLine() string {
	return fmt.Sprintf("tcc version %s; targets %s", Version(), target.TTMetalRelease)
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print tcc's version, the tt-metal release it targets and what its builds record",
		Long: `Print tcc's version (from the binary's build information: a module version or
pseudo-version for a binary built with go install, "(devel)" for go run and
go test), the tt-metal release whose kernel API the kernels use, the commit
the binary was built from when recorded, the Go toolchain, and the versions
its outputs record (programs.json schema and tcc_version).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			w := cmd.OutOrStdout()
			fmt.Fprintln(w, versionLine())
			if v := vcsInfo(); v != "" {
				fmt.Fprintf(w, "commit:  %s\n", v)
			}
			fmt.Fprintf(w, "go:      %s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
			fmt.Fprintf(w, "outputs: programs.json schema %d, tcc_version %s\n", codegen.SchemaVersion, codegen.Version)
			return nil
		},
	}
}

// wrappedUsage is cobra's usage template with the flag lists wrapped to
// helpWidth, so that a long flag description wraps under its own column
// instead of running on for 300 characters.
func wrappedUsage(tmpl string) string {
	cobra.AddTemplateFunc("wrappedFlagUsages", func(fs *pflag.FlagSet) string { return fs.FlagUsagesWrapped(helpWidth()) })
	tmpl = strings.ReplaceAll(tmpl, ".LocalFlags.FlagUsages", "wrappedFlagUsages .LocalFlags")
	return strings.ReplaceAll(tmpl, ".InheritedFlags.FlagUsages", "wrappedFlagUsages .InheritedFlags")
}
