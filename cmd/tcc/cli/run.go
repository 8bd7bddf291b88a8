package cli

import "github.com/spf13/cobra"

func newRunCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "run MODEL", Short: "Run a model's programs on a backend", Args: cobra.ExactArgs(1)}
	return cmd
}
