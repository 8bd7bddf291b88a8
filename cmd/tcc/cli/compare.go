package cli

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"

	"github.com/tcc-dev/tcc/passes/report"
)

// compareRow is one region's counts before and after the pipeline.
type compareRow struct {
	Index int    `json:"index"` // decoder layer index, -1 for other regions
	Kind  string `json:"kind"`
	// Unfused counts the graph's ops as the model writes it (one device
	// program each on the composed path); Fused the programs after the
	// pipeline.
	Unfused int            `json:"unfused"`
	Fused   int            `json:"fused"`
	Rules   map[string]int `json:"rules,omitempty"`
}

// comparison is tcc report ops --compare: unfused vs fused counts per
// layer and for the other regions, per device per step.
type comparison struct {
	Model        string       `json:"model"`
	TccVersion   string       `json:"tcc_version"`
	Mesh         string       `json:"mesh"`
	Mode         string       `json:"mode"`
	Batch        int          `json:"batch"`
	Config       string       `json:"config,omitempty"`
	TotalUnfused int          `json:"total_unfused"`
	TotalFused   int          `json:"total_fused"`
	Layers       []compareRow `json:"layers"`
	Other        []compareRow `json:"other"`
}

// compareReports joins an unfused and a fused report of the same model by
// layer index (other regions by position); they must have the same regions.
func compareReports(u, f *report.Report) (*comparison, error) {
	if len(u.Layers) != len(f.Layers) || len(u.Other) != len(f.Other) {
		return nil, fmt.Errorf("report ops --compare: the unfused graph has %d layers and %d other regions, the fused one %d and %d", len(u.Layers), len(u.Other), len(f.Layers), len(f.Other))
	}
	c := &comparison{Model: f.Model, TccVersion: f.TccVersion, Mesh: f.Mesh, Mode: f.Mode, Batch: f.Batch, Config: f.Config,
		TotalUnfused: u.TotalOps, TotalFused: f.TotalOps, Layers: []compareRow{}, Other: []compareRow{}}
	for i, l := range f.Layers {
		if ul := u.Layers[i]; ul.Index != l.Index || ul.Kind != l.Kind {
			return nil, fmt.Errorf("report ops --compare: layer %d is %s unfused but layer %d %s fused", ul.Index, ul.Kind, l.Index, l.Kind)
		}
		c.Layers = append(c.Layers, compareRow{Index: l.Index, Kind: l.Kind, Unfused: u.Layers[i].Ops, Fused: l.Ops, Rules: l.Rules})
	}
	for i, s := range f.Other {
		c.Other = append(c.Other, compareRow{Index: -1, Kind: s.Name, Unfused: u.Other[i].Ops, Fused: s.Ops})
	}
	return c, nil
}

func ratio(u, f int) string {
	if f == 0 {
		return "-"
	}
	return strconv.FormatFloat(float64(u)/float64(f), 'f', 1, 64) + "x"
}

// write renders the comparison as a table, JSON or CSV.
func (c *comparison) write(w io.Writer, format string) error {
	var buf bytes.Buffer
	switch format {
	case "json":
		b, err := json.MarshalIndent(c, "", "  ")
		if err != nil {
			return err
		}
		buf.Write(append(b, '\n'))
	case "csv":
		cw := csv.NewWriter(&buf)
		rows := [][]string{{"model", "mesh", "mode", "region", "index", "kind", "unfused", "fused"}}
		for _, r := range c.Layers {
			rows = append(rows, []string{c.Model, c.Mesh, c.Mode, "layer", strconv.Itoa(r.Index), r.Kind, strconv.Itoa(r.Unfused), strconv.Itoa(r.Fused)})
		}
		for _, r := range c.Other {
			rows = append(rows, []string{c.Model, c.Mesh, c.Mode, r.Kind, "-1", r.Kind, strconv.Itoa(r.Unfused), strconv.Itoa(r.Fused)})
		}
		rows = append(rows, []string{c.Model, c.Mesh, c.Mode, "total", "-1", "total", strconv.Itoa(c.TotalUnfused), strconv.Itoa(c.TotalFused)})
		if err := cw.WriteAll(rows); err != nil {
			return err
		}
	case "table":
		fmt.Fprintf(&buf, "model %s  mesh %s  mode %s  batch %d", c.Model, c.Mesh, c.Mode, c.Batch)
		if c.Config != "" {
			fmt.Fprintf(&buf, "  config %s", c.Config)
		}
		fmt.Fprintf(&buf, "  (programs per device per %s step: unfused ops vs fused programs)\n\n", c.Mode)
		tw := tabwriter.NewWriter(&buf, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "layer\tkind\tunfused\tfused\tsaved\tratio\t")
		for _, r := range c.Layers {
			fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%d\t%s\t\n", r.Index, r.Kind, r.Unfused, r.Fused, r.Unfused-r.Fused, ratio(r.Unfused, r.Fused))
		}
		for _, r := range c.Other {
			fmt.Fprintf(tw, "-\t%s\t%d\t%d\t%d\t%s\t\n", r.Kind, r.Unfused, r.Fused, r.Unfused-r.Fused, ratio(r.Unfused, r.Fused))
		}
		fmt.Fprintf(tw, "total\t\t%d\t%d\t%d\t%s\t\n", c.TotalUnfused, c.TotalFused, c.TotalUnfused-c.TotalFused, ratio(c.TotalUnfused, c.TotalFused))
		if err := tw.Flush(); err != nil {
			return err
		}
	default:
		return fmt.Errorf("unknown report format %q (want json, table or csv)", format)
	}
	_, err := w.Write(buf.Bytes())
	return err
}
