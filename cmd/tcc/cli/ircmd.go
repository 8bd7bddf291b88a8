package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/passes"
)

func newIRCmd() *cobra.Command {
	var layer int
	var printAfter []string
	var format string
	cmd := &cobra.Command{
		Use:   "ir MODEL",
		Short: "Print a model's graph IR (whole graph or one layer)",
		Long: `Print the graph IR of a model as text (the same format ir.Parse reads).

  tcc ir tiny-mlp                         # as the model is written (unfused)
  tcc ir tiny-mlp --stage fused --layer 0 # one decoder layer after fusion
  tcc ir tiny-mlp --print-after fuse --layer 1
                                          # layer 1 after each named pass
  tcc ir qwen27b --stage fused --layer 3 --format dot | dot -Tsvg > layer3.svg
  tcc ir tiny-mlp --stage fused --layer 0 --format mermaid

--format dot (Graphviz) and mermaid draw one layer (--layer N): its ops as
boxes, fused ops filled and labelled with the rule that created them and how
many ops they replace, the weights, state, inputs and other layers' results it
reads, and the results read after it; edges carry shape and dtype.`,
		Args: cobra.ExactArgs(1),
	}
	mf := addModelFlags(cmd, "unfused")
	cmd.Flags().IntVar(&layer, "layer", -1, "print only this decoder layer's region")
	cmd.Flags().StringSliceVar(&printAfter, "print-after", nil, "run the pipeline and dump the graph (or --layer) after these passes")
	cmd.Flags().StringVar(&format, "format", "text", "output format: text (the IR, as ir.Parse reads it), dot (Graphviz) or mermaid; dot and mermaid draw one --layer")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		out := cmd.OutOrStdout()
		if layer < -1 {
			return fmt.Errorf("--layer %d: a layer index is 0 or more (-1, the default, prints the whole graph)", layer)
		}
		if !contains(irFormats, format) {
			return fmt.Errorf("unknown --format %q (want %s)", format, strings.Join(irFormats, ", "))
		}
		if format != "text" {
			if layer < 0 {
				return fmt.Errorf("--format %s draws one decoder layer: give --layer N", format)
			}
			if len(printAfter) > 0 {
				return fmt.Errorf("--format %s draws the --stage graph; --print-after prints text only", format)
			}
			_, g, _, err := mf.graphFor(args[0])
			if err != nil {
				return err
			}
			r, err := layerRegion(g, layer)
			if err != nil {
				return err
			}
			return drawLayer(out, g, r, mf.stage, format)
		}
		if len(printAfter) > 0 {
			mf.stage, mf.passesLater = "unfused", true
		}
		_, g, _, err := mf.graphFor(args[0])
		if err != nil {
			return err
		}
		if len(printAfter) > 0 {
			opts, err := pipelineOptions(mf.disable)
			if err != nil {
				return err
			}
			for _, p := range printAfter {
				if !contains(passes.Default().Names(), p) {
					return fmt.Errorf("--print-after %q: unknown pass (passes: %v)", p, passes.Default().Names())
				}
			}
			// Run pass by pass so one layer can be dumped after each named pass.
			pl := passes.Default()
			for i := range pl.Passes {
				sub := &passes.Pipeline{Passes: pl.Passes[i : i+1]}
				if _, err := sub.Run(g, opts); err != nil {
					return err
				}
				if contains(printAfter, pl.Passes[i].Name) {
					fmt.Fprintf(out, "// after %s (#%d)\n", pl.Passes[i].Name, i+1)
					if err := printGraph(out, g, layer); err != nil {
						return err
					}
				}
			}
			return nil
		}
		return printGraph(out, g, layer)
	}
	return cmd
}

func printGraph(out io.Writer, g *ir.Graph, layer int) error {
	if layer < 0 {
		_, err := fmt.Fprint(out, ir.Print(g))
		return err
	}
	r, err := layerRegion(g, layer)
	if err != nil {
		return err
	}
	_, err = fmt.Fprint(out, ir.PrintRegion(g, r))
	return err
}

// layerRegion is decoder layer i of g, or an error saying how many it has.
func layerRegion(g *ir.Graph, i int) (*ir.Region, error) {
	for _, r := range g.Layers() {
		if r.Index == i {
			return r, nil
		}
	}
	return nil, fmt.Errorf("--layer %d: the graph has %d decoder layers", i, len(g.Layers()))
}

func newPassesCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "passes",
		Short: "List the pipeline's passes, their ordering constraints and the fusion rules",
		Long: `List the default pipeline's passes in order, the ordering constraints between
them with their reasons, and every fusion rule with its "before => after"
summary. Any rule or pass can be turned off with --disable NAME on build, run,
report and ir.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			pl := passes.Default()
			fmt.Fprintln(out, "passes (in order):")
			for i, p := range pl.Passes {
				fmt.Fprintf(out, "  %2d. %-8s %s\n", i+1, p.Name, p.Doc)
			}
			fmt.Fprintln(out, "\nordering constraints:")
			for _, c := range pl.Constraints {
				fmt.Fprintf(out, "  %s before %s: %s\n", c.Before, c.After, c.Reason)
			}
			fmt.Fprintln(out, "\nfusion rules (by family):")
			for _, fam := range passes.Families() {
				fmt.Fprintf(out, "  %s:\n", fam)
				for _, r := range passes.FamilyRules(fam) {
					fmt.Fprintf(out, "    %-22s %s\n", r.Name, r.Summary())
				}
			}
			return nil
		},
	}
}
