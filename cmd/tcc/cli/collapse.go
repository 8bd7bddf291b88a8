package cli

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/tcc-dev/tcc/passes/report"
	"github.com/tcc-dev/tcc/sim/timing"
)

// addCollapseFlag gives cmd --collapse: group the layers whose table rows
// are identical into one row (default: on when stdout is a terminal).
func addCollapseFlag(cmd *cobra.Command, collapse *bool) {
	cmd.Flags().BoolVar(collapse, "collapse", false, "group layers whose rows are identical into one row (default: on when stdout is a terminal; --collapse=false lists every layer)")
}

// collapseOn is --collapse as given, else whether stdout is a terminal.
func collapseOn(cmd *cobra.Command, collapse bool) bool {
	if cmd.Flags().Changed("collapse") {
		return collapse
	}
	return isTerminal(cmd.OutOrStdout())
}

// writeOpsCollapsed writes r as report.Report.WriteTable does, with the
// layers whose counts and rule firings are identical grouped into one row
// (timing.LayerSet names them) and the rules fired listed per group
// below the table, so that no row runs on for hundreds of characters.
func writeOpsCollapsed(w io.Writer, r *report.Report) error {
	step := r.Mode
	if step == "" {
		step = "decode"
	}
	fmt.Fprintf(w, "model %s  mesh %s  stage %s  mode %s", r.Model, r.Mesh, r.Stage, step)
	if r.Batch > 0 {
		fmt.Fprintf(w, "  batch %d", r.Batch)
	}
	if r.Config != "" {
		fmt.Fprintf(w, "  config %s", r.Config)
	}
	fmt.Fprintf(w, "  (programs per device per %s step; identical layers grouped)\n\n", step)
	type group struct {
		idx []int
		l   report.Layer
	}
	var groups []*group
	at := map[string]*group{}
	for _, l := range r.Layers {
		key := l.Kind + "\x00" + counts(l.ByOp) + "\x00" + counts(l.Rules)
		if g, ok := at[key]; ok {
			g.idx = append(g.idx, l.Index)
			continue
		}
		g := &group{idx: []int{l.Index}, l: l}
		at[key] = g
		groups = append(groups, g)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "layers\tkind\tops each\tby op")
	for _, g := range groups {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", timing.LayerSet(g.idx), g.l.Kind, g.l.Ops, counts(g.l.ByOp))
	}
	for _, s := range r.Other {
		fmt.Fprintf(tw, "-\t%s\t%d\t%s\n", s.Name, s.Ops, counts(s.ByOp))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	var fired []string
	for _, g := range groups {
		if len(g.l.Rules) > 0 {
			fired = append(fired, fmt.Sprintf("  %s (%s): %s", timing.LayerSet(g.idx), g.l.Kind, counts(g.l.Rules)))
		}
	}
	if len(fired) > 0 {
		fmt.Fprintf(w, "\nrules fired per layer:\n%s\n", strings.Join(fired, "\n"))
	}
	fmt.Fprintln(w)
	kt := r.KindTotals()
	kinds := make([]string, 0, len(kt))
	for k := range kt {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		v := kt[k]
		fmt.Fprintf(w, "%-10s %3d layers  %6d ops  (%.1f per layer)\n", k, v[0], v[1], float64(v[1])/float64(v[0]))
	}
	fmt.Fprintf(w, "total      %d ops per device per %s step\n", r.TotalOps, step)
	return nil
}

// counts formats m as "a=1 b=2", keys sorted.
func counts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%d", k, m[k])
	}
	return strings.Join(parts, " ")
}
