package report

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/passes"
)

// Layer is one decoder layer's counts.
type Layer struct {
	Index int            `json:"index"`
	Kind  string         `json:"kind"`
	Ops   int            `json:"ops"`
	ByOp  map[string]int `json:"by_op"`
	// Rules counts fusion-rule firings in this layer (fused stage only).
	Rules map[string]int `json:"rules,omitempty"`
}

// Section is a non-layer region (embedding, head) with its counts.
type Section struct {
	Name string         `json:"name"`
	Ops  int            `json:"ops"`
	ByOp map[string]int `json:"by_op"`
}

// Report is the op-count report of one graph. TotalOps counts every device
// program per device per decode step, embedding to sampling.
type Report struct {
	Model string `json:"model"`
	// TccVersion, Mode, Batch and Config describe the build when the
	// caller knows them (tcc report ops and tcc build set them; a report
	// without them is of a decode step).
	TccVersion string `json:"tcc_version,omitempty"`
	Mesh       string `json:"mesh"`
	Stage      string `json:"stage"`
	// Mode is the step counted: "decode" or "prefill".
	Mode  string `json:"mode,omitempty"`
	Batch int    `json:"batch,omitempty"`
	// Config is the model config the graph was built from: a path, or
	// "embedded" for the model's built-in one.
	Config   string    `json:"config,omitempty"`
	TotalOps int       `json:"total_ops"`
	Layers   []Layer   `json:"layers"`
	Other    []Section `json:"other"`
}

// Build counts g's ops. rules, if non-nil, gives rule firings per region
// index (layers only).
func Build(model, stage string, g *ir.Graph, rules map[int]map[string]int) *Report {
	r := &Report{Model: model, Mesh: g.Mesh.String(), Stage: stage, Layers: []Layer{}, Other: []Section{}}
	for _, reg := range g.Regions {
		by := map[string]int{}
		for _, op := range reg.Ops {
			by[op.Name()]++
		}
		r.TotalOps += len(reg.Ops)
		if reg.IsLayer() {
			l := Layer{Index: reg.Index, Kind: string(reg.Kind), Ops: len(reg.Ops), ByOp: by}
			if len(rules[reg.Index]) > 0 {
				l.Rules = rules[reg.Index]
			}
			r.Layers = append(r.Layers, l)
		} else {
			r.Other = append(r.Other, Section{Name: string(reg.Kind), Ops: len(reg.Ops), ByOp: by})
		}
	}
	return r
}

// JSON renders the report as indented JSON with a trailing newline; map keys
// are sorted, so output is deterministic.
func (r *Report) JSON() ([]byte, error) {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// KindTotals sums ops per layer kind: kind -> (layers, ops).
func (r *Report) KindTotals() map[string][2]int {
	t := map[string][2]int{}
	for _, l := range r.Layers {
		v := t[l.Kind]
		t[l.Kind] = [2]int{v[0] + 1, v[1] + l.Ops}
	}
	return t
}

func sortedKeys(m map[string]int) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func formatCounts(m map[string]int) string {
	var parts []string
	for _, k := range sortedKeys(m) {
		parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
	}
	return strings.Join(parts, " ")
}

// WriteTable writes a readable table: one row per layer (ops, by op, rules),
// the other regions, totals per kind and the total per step per device.
func (r *Report) WriteTable(w io.Writer) error {
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "model %s  mesh %s  stage %s  mode %s", r.Model, r.Mesh, r.Stage, r.step())
	if r.Batch > 0 {
		fmt.Fprintf(&buf, "  batch %d", r.Batch)
	}
	if r.Config != "" {
		fmt.Fprintf(&buf, "  config %s", r.Config)
	}
	fmt.Fprintf(&buf, "  (programs per device per %s step)\n\n", r.step())
	tw := tabwriter.NewWriter(&buf, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "layer\tkind\tops\tby op\trules fired")
	for _, l := range r.Layers {
		fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%s\n", l.Index, l.Kind, l.Ops, formatCounts(l.ByOp), formatCounts(l.Rules))
	}
	for _, s := range r.Other {
		fmt.Fprintf(tw, "-\t%s\t%d\t%s\t\n", s.Name, s.Ops, formatCounts(s.ByOp))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(&buf)
	kt := r.KindTotals()
	kinds := make([]string, 0, len(kt))
	for k := range kt {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		v := kt[k]
		fmt.Fprintf(&buf, "%-10s %3d layers  %6d ops  (%.1f per layer)\n", k, v[0], v[1], float64(v[1])/float64(v[0]))
	}
	fmt.Fprintf(&buf, "total      %d ops per device per %s step\n", r.TotalOps, r.step())
	_, err := w.Write(buf.Bytes())
	return err
}

// step is the step the counts are of: Mode, or "decode" when unset.
func (r *Report) step() string {
	if r.Mode == "" {
		return "decode"
	}
	return r.Mode
}

// WriteCSV writes one row per (region, op name): region, index, kind, op, count.
func (r *Report) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	rows := [][]string{{"model", "mesh", "stage", "region", "index", "kind", "op", "count"}}
	for _, l := range r.Layers {
		for _, k := range sortedKeys(l.ByOp) {
			rows = append(rows, []string{r.Model, r.Mesh, r.Stage, "layer", strconv.Itoa(l.Index), l.Kind, k, strconv.Itoa(l.ByOp[k])})
		}
	}
	for _, s := range r.Other {
		for _, k := range sortedKeys(s.ByOp) {
			rows = append(rows, []string{r.Model, r.Mesh, r.Stage, s.Name, "-1", s.Name, k, strconv.Itoa(s.ByOp[k])})
		}
	}
	if err := cw.WriteAll(rows); err != nil {
		return err
	}
	cw.Flush()
	return cw.Error()
}

// Write renders the report in format "json", "table" or "csv".
func (r *Report) Write(w io.Writer, format string) error {
	switch format {
	case "json":
		b, err := r.JSON()
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	case "table":
		return r.WriteTable(w)
	case "csv":
		return r.WriteCSV(w)
	}
	return fmt.Errorf("unknown report format %q (want json, table or csv)", format)
}

// FromPipeline is Build with the rule firings of a pipeline run (res may be
// nil, for an unfused graph): per decoder layer, the rules that fired.
func FromPipeline(model, stage string, g *ir.Graph, res *passes.Result) *Report {
	var rules map[int]map[string]int
	if res != nil && res.Rewrites != nil {
		rules = map[int]map[string]int{}
		for _, f := range res.Rewrites.Firings() {
			if f.Region.IsLayer() && f.Count > 0 {
				if rules[f.Region.Index] == nil {
					rules[f.Region.Index] = map[string]int{}
				}
				rules[f.Region.Index][f.Rule] += f.Count
			}
		}
	}
	return Build(model, stage, g, rules)
}
