package report

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tcc-dev/tcc/ir"
)

func sample(t *testing.T) *ir.Graph {
	b := ir.NewBuilder("m")
	x := b.Input("x", ir.T(ir.BF16, 32, 64))
	w := b.Weight("w", ir.T(ir.BFP8B, 64, 64))
	b.Region("embed", -1)
	h := b.SiLU(x)
	b.Region("gdn", 0)
	h = b.Add(h, b.Matmul(h, w))
	b.Region("attention", 1)
	h = b.Exp(b.Exp(h))
	b.Region("head", -1)
	b.Output(b.Argmax(h))
	g, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	g.Mesh = ir.Mesh{Rows: 1, Cols: 2}
	return g
}

func TestJSONContract(t *testing.T) {
	r := Build("m", "unfused", sample(t), map[int]map[string]int{0: {"FuseX": 2}})
	b, err := r.JSON()
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"model": "m", "mesh": "1x2", "stage": "unfused", "total_ops": 6.0,
		"layers": []any{
			map[string]any{"index": 0.0, "kind": "gdn", "ops": 2.0, "by_op": map[string]any{"add": 1.0, "matmul": 1.0}, "rules": map[string]any{"FuseX": 2.0}},
			map[string]any{"index": 1.0, "kind": "attention", "ops": 2.0, "by_op": map[string]any{"exp": 2.0}},
		},
		"other": []any{
			map[string]any{"name": "embed", "ops": 1.0, "by_op": map[string]any{"silu": 1.0}},
			map[string]any{"name": "head", "ops": 1.0, "by_op": map[string]any{"argmax": 1.0}},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("report JSON (-want +got):\n%s", diff)
	}
	b2, _ := Build("m", "unfused", sample(t), map[int]map[string]int{0: {"FuseX": 2}}).JSON()
	if !bytes.Equal(b, b2) {
		t.Error("JSON not deterministic")
	}
}

func TestTableAndCSV(t *testing.T) {
	r := Build("m", "fused", sample(t), map[int]map[string]int{0: {"FuseX": 2}})
	var tb bytes.Buffer
	if err := r.Write(&tb, "table"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"FuseX=2", "add=1 matmul=1", "total      6 ops", "attention    1 layers"} {
		if !strings.Contains(tb.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, tb.String())
		}
	}
	var cb bytes.Buffer
	if err := r.Write(&cb, "csv"); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(cb.String()), "\n")
	if len(lines) != 1+3+2 || lines[1] != "m,1x2,fused,layer,0,gdn,add,1" {
		t.Errorf("csv:\n%s", cb.String())
	}
	if err := r.Write(&cb, "xml"); err == nil || !strings.Contains(err.Error(), "xml") {
		t.Errorf("bad format error: %v", err)
	}
}

// TestTableSaysStep: the table header and total name the step counted.
func TestTableSaysStep(t *testing.T) {
	r := &Report{Model: "m", Mesh: "1x1", Stage: "fused", Mode: "prefill", Batch: 2, Config: "c.json"}
	var b strings.Builder
	if err := r.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(b.String(), "model m  mesh 1x1  stage fused  mode prefill  batch 2  config c.json  (programs per device per prefill step)\n") ||
		!strings.Contains(b.String(), "ops per device per prefill step") {
		t.Errorf("table:\n%s", b.String())
	}
	b.Reset()
	r = &Report{Model: "m", Mesh: "1x1", Stage: "fused"}
	if err := r.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(b.String(), "model m  mesh 1x1  stage fused  mode decode  (programs per device per decode step)\n") {
		t.Errorf("table:\n%s", b.String())
	}
}
