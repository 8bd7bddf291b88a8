package cli

import "github.com/spf13/cobra"

func newBuildCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "build MODEL", Short: "Compile a model into kernels, program configs and a report", Args: cobra.ExactArgs(1)}
	return cmd
}
