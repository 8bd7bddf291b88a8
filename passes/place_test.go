package passes

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tcc-dev/tcc/ir"
)

func TestPlace(t *testing.T) {
	b := ir.NewBuilder("place")
	rowL1 := ir.TensorType{Shape: ir.Shape{1, 32, 64}, DType: ir.BF16, Layout: ir.RowMajorLayout, Mem: ir.L1, Dist: ir.Replicated}
	x := b.Input("x", rowL1)
	sharded := ir.T(ir.BF16, 1, 32, 64)
	sharded.Mem = ir.MemoryConfig{Kind: ir.L1HeightSharded, Shard: &ir.ShardSpec{Grid: ir.CoreRange{X0: 0, Y0: 0, X1: 0, Y1: 0}, Shape: [2]int{32, 64}}}
	st := b.State("s", sharded)
	b.Region("mlp", 0)
	s := b.SiLU(x)   // inherits row-major L1: becomes tile DRAM
	a := b.Argmax(s) // uint32 row-major L1: becomes DRAM, stays row-major
	m := b.Mean(s)   // marked placed: kept
	e := b.Exp(st)   // inherits the state's height sharding: becomes DRAM
	b.Output(a, m, e)
	g, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []*ir.Value{s, a, m} {
		if !v.Type.Mem.Equal(ir.L1) {
			t.Fatalf("setup: %s is %s, want inherited l1", v, v.Type.Mem)
		}
	}
	ctx := &Context{Result: &Result{}}
	ctx.MarkPlaced(m)
	if err := PlacePass.Run(ctx, g); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(PlaceStats{Results: 4, Changed: 3, Kept: 1}, ctx.Result.Place); diff != "" {
		t.Errorf("stats (-want +got):\n%s", diff)
	}
	want := map[*ir.Value]string{
		x:  "[1,32,64] bf16 row_major l1_interleaved",
		st: "[1,32,64] bf16 tile l1_height_sharded<(0,0)-(0,0) 32x64>",
		s:  "[1,32,64] bf16 tile dram_interleaved",
		a:  "[1,32,1] uint32 row_major dram_interleaved",
		m:  "[1,32,1] bf16 row_major l1_interleaved",
		e:  "[1,32,64] bf16 tile dram_interleaved",
	}
	for v, w := range want {
		if got := v.Type.String(); got != w {
			t.Errorf("%s: got %s, want %s", v, got, w)
		}
	}
	if err := ir.Verify(g); err != nil {
		t.Fatal(err)
	}
	// Idempotent: a second run changes nothing.
	if again := Place(g, ctx.Placed); again.Changed != 0 {
		t.Errorf("second Place changed %d results", again.Changed)
	}
}
