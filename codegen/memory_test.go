package codegen_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tcc-dev/tcc/codegen"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/models"
	"github.com/tcc-dev/tcc/models/qwen27b"
	"github.com/tcc-dev/tcc/passes"
)

// qwenGraph builds the fused qwen27b graph with flags on mesh.
func qwenGraph(t *testing.T, flags map[string]string, mesh ir.Mesh) *ir.Graph {
	t.Helper()
	m := qwen27b.Model{}
	args, err := models.DefaultArgs(m, flags)
	if err != nil {
		t.Fatal(err)
	}
	g, err := m.Build(args, mesh)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := passes.Run(g, passes.Options{}); err != nil {
		t.Fatal(err)
	}
	return g
}

var mesh1x2 = ir.Mesh{Rows: 1, Cols: 2}

// TestGraphMemoryIsTheBuilds: the memory counted from the graph before
// lowering is what the build allocates, by kind; the KV caches are the
// attention layers' K and V states ([B, kv heads per device, max-seq, D]
// bf16), the position input is found by the op table's operand name.
func TestGraphMemoryIsTheBuilds(t *testing.T) {
	small := filepath.Join("..", "models", "qwen27b", "testdata", "small.json")
	g := qwenGraph(t, map[string]string{"config": small}, mesh1x2)
	bh := target.Blackhole()
	u, err := codegen.CheckMemory(g, bh)
	if err != nil {
		t.Fatal(err)
	}
	b, err := codegen.Compile(g, bh)
	if err != nil {
		t.Fatal(err)
	}
	if got := b.Memory(); got != u {
		t.Errorf("build memory %+v, graph memory %+v", got, u)
	}
	// 2 attention layers x K and V, each [1, 2, 128, 64] bf16: 16 tiles, 2 per bank.
	if want := int64(2 * 2 * 8 * 2 * 2048); u.KV != want {
		t.Errorf("KV %d bytes, want %d", u.KV, want)
	}
	if len(codegen.KVCaches(g)) != 4 {
		t.Errorf("%d KV caches, want 4", len(codegen.KVCaches(g)))
	}
	if u.Weights <= 0 || u.State <= 0 || u.Other <= 0 || u.Total != u.Weights+u.KV+u.State+u.Other || u.Capacity != bh.DRAMBytes() || !u.Fits() {
		t.Errorf("memory %+v", u)
	}
	pos := codegen.PositionInputs(g)
	if len(pos) != 1 || pos[0].Type.DType != ir.UInt32 || !pos[0].Type.Shape.Equal(ir.Shape{1}) {
		t.Errorf("position inputs %v, want the one [1] uint32 input", pos)
	}
}

// TestDRAMCapacityRefused: the full 27B at --max-seq 262144 --batch 32 on
// 1x2 needs 256 GiB of KV cache per device; Compile refuses it before
// lowering anything (no l1-budget error of a program), with the numbers
// per device. At B=1 it fits, with the KV caches counted (16 attention
// layers x K and V x 2 kv heads per device x 262,144 x 256 bf16 = 8 GiB).
func TestDRAMCapacityRefused(t *testing.T) {
	bh := target.Blackhole()
	g := qwenGraph(t, map[string]string{"max-seq": "262144", "batch": "32"}, mesh1x2)
	_, err := codegen.Compile(g, bh)
	var de *codegen.DRAMError
	if !errors.As(err, &de) {
		t.Fatalf("Compile: %v, want a *DRAMError", err)
	}
	msg := err.Error()
	for _, want := range []string{"rule dram-capacity", "KV caches 256.00 GiB", "of 31.88 GiB", "over by", "weights "} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not say %q", msg, want)
		}
	}
	if de.Use.Fits() || de.Use.KV != 256<<30 {
		t.Errorf("use %+v", de.Use)
	}

	g = qwenGraph(t, map[string]string{"max-seq": "262144"}, mesh1x2)
	u, err := codegen.CheckMemory(g, bh)
	if err != nil {
		t.Fatal(err)
	}
	if u.KV != 8<<30 || !u.Fits() {
		t.Errorf("B=1 at 262144: %s", u)
	}
	t.Logf("B=32 at 262144: %s", de.Use)
	t.Logf("B=1 at 262144: %s", u)
}
