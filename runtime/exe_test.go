package runtime

import (
	"testing"

	"github.com/tcc-dev/tcc/codegen"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/sim/ref"
)

// TestSharedBufferValues: a value held in a shared buffer sized for a
// larger one (codegen's liveness reuse) is uploaded and downloaded in its
// own shape and layout, and reads what the programs wrote.
func TestSharedBufferValues(t *testing.T) {
	b := ir.NewBuilder("shared")
	x := b.Input("x", ir.T(ir.BF16, 1, 1, 64, 64))
	y := b.Input("y", ir.T(ir.BF16, 1, 1, 32, 32))
	big := b.Exp(x)        // 4 tiles
	small := b.Exp(y)      // 1 tile
	big2 := b.Exp(big)     // big's buffer is free after this op
	small2 := b.Exp(small) // so this 1-tile value takes it
	b.Output(b.Exp(big2), b.Exp(small2))
	g, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	bd, err := codegen.Compile(g, target.Blackhole())
	if err != nil {
		t.Fatal(err)
	}
	s := bd.BufferOf(small2)
	if s == nil || s != bd.BufferOf(big) || s.Pages != 4 {
		t.Fatalf("small2 is in %+v, want big's 4-page shared buffer", s)
	}
	m, err := Open("sim", g.Mesh)
	if err != nil {
		t.Fatal(err)
	}
	e, err := Load(m, bd)
	if err != nil {
		t.Fatal(err)
	}
	env := map[*ir.Value]ref.Tensor{}
	for _, in := range []*ir.Value{x, y} {
		data := make([]float32, in.Type.Shape.Numel())
		for i := range data {
			data[i] = float32(i%7) / 8
		}
		env[in] = ref.Tensor{Shape: in.Type.Shape, Data: data}
		if err := e.Upload(in, data); err != nil {
			t.Fatal(err)
		}
	}
	// Programs 0..3 write big, small, big2 and small2 (over big).
	for i := 0; i < 4; i++ {
		if err := e.RunProgram(i); err != nil {
			t.Fatal(err)
		}
	}
	want, err := ref.Eval(g, env, ref.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	got, err := e.Download(small2)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want[small2].Data) {
		t.Fatalf("downloaded %d values of small2, want %d", len(got), len(want[small2].Data))
	}
	for i := range got {
		if got[i] != want[small2].Data[i] {
			t.Fatalf("small2[%d] = %v, want %v", i, got[i], want[small2].Data[i])
		}
	}
	// Upload in small2's own layout, read back.
	data := make([]float32, 32*32)
	for i := range data {
		data[i] = float32(i % 5)
	}
	if err := e.Upload(small2, data); err != nil {
		t.Fatal(err)
	}
	if got, err = e.Download(small2); err != nil || got[31*32+3] != data[31*32+3] {
		t.Errorf("round trip through the shared buffer: %v, %v", got[31*32+3], err)
	}
}
