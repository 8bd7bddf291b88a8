package cli

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tcc-dev/tcc/codegen"
	"github.com/tcc-dev/tcc/kernels_gen/gen"
)

func newGenGoCmd() *cobra.Command {
	var meshes []string
	var out, pkg string
	cmd := &cobra.Command{
		Use:    "gen-go MODEL",
		Hidden: true, // maintenance: go generate ./kernels_gen/... runs it
		Short:  "Write the kernels_gen Go package of a model (kernels, typed program configs, reports)",
		Long: `Compile MODEL (fused, default parameters) for each mesh and write one Go file
declaring a gogen.Table: every kernel source once, one typed program config per
distinct program signature, and per mesh the program list and op-count report.
kernels_gen/<model>/doc.go runs it through go generate:

  go generate ./kernels_gen/...
  tcc gen-go qwen27b --meshes 1x1,1x2 -o kernels_gen/qwen27b/table_gen.go`,
		Args: cobra.ExactArgs(1),
	}
	cmd.Flags().StringSliceVar(&meshes, "meshes", []string{"1x1"}, "meshes to compile for")
	cmd.Flags().StringVarP(&out, "out", "o", "", "output Go file (required)")
	cmd.Flags().StringVar(&pkg, "package", "", "Go package name (default: the output directory's name)")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if err := notStdout(out, "a Go file through a temporary file and a rename"); err != nil {
			return err
		}
		if out == "" {
			return fmt.Errorf("gen-go: -o FILE is required")
		}
		if pkg == "" {
			abs, err := filepath.Abs(out)
			if err != nil {
				return err
			}
			pkg = filepath.Base(filepath.Dir(abs))
		}
		src, err := gen.Source(pkg, args[0], nil, meshes)
		if err != nil {
			return err
		}
		if err := codegen.WriteFileAtomic(out, src); err != nil {
			return err
		}
		fmt.Fprintf(cmd.OutOrStdout(), "%s: meshes %s -> %s (%d bytes)\n", args[0], strings.Join(meshes, ","), out, len(src))
		return nil
	}
	return cmd
}
