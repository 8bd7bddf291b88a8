package codegen

import (
	"testing"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
)

// TestLowerKey: ops that differ only in their values' ids (the buffers
// they name) share a key; a difference in anything a lowering reads
// (attributes, types, placements, block layouts, the same value twice, an
// in-place result naming its operand's buffer) gives another key.
func TestLowerKey(t *testing.T) {
	id := 100
	val := func(kind ir.ValueKind, tt ir.TensorType) *ir.Value {
		id++
		return &ir.Value{ID: id, Kind: kind, Type: tt}
	}
	bf := ir.T(ir.BF16, 32, 64)
	add := func(a, b *ir.Value, attrs ir.Attrs) *ir.Op {
		id++
		return &ir.Op{ID: id, Kind: ir.OpAdd, Operands: []*ir.Value{a, b}, Results: []*ir.Value{val(ir.KindResult, bf)}, Attrs: attrs}
	}
	base := func() *ir.Op { return add(val(ir.KindResult, bf), val(ir.KindResult, bf), nil) }
	sharded := bf
	sharded.Mem = ir.MemoryConfig{Kind: ir.L1HeightSharded, Shard: &ir.ShardSpec{Grid: ir.CoreRange{X1: 1}, Shape: [2]int{32, 32}}}
	sharded2 := sharded
	sharded2.Mem.Shard = &ir.ShardSpec{Grid: ir.CoreRange{X1: 1}, Shape: [2]int{16, 64}}
	inPlace := base()
	twice := base()
	twice.Operands[1] = twice.Operands[0]
	blocked := base()
	tests := []struct {
		name string
		op   *ir.Op
		same bool
	}{
		{"other values", base(), true},
		{"other attribute", add(val(ir.KindResult, bf), val(ir.KindResult, bf), ir.Attrs{"fidelity": "LoFi"}), false},
		{"other shape", add(val(ir.KindResult, ir.T(ir.BF16, 64, 64)), val(ir.KindResult, bf), nil), false},
		{"other dtype", add(val(ir.KindResult, ir.T(ir.FP32, 32, 64)), val(ir.KindResult, bf), nil), false},
		{"other value kind", add(val(ir.KindInput, bf), val(ir.KindResult, bf), nil), false},
		{"sharded", add(val(ir.KindResult, sharded), val(ir.KindResult, bf), nil), false},
		{"same value twice", twice, false},
		{"in place", inPlace, false},
		{"blocks", blocked, false},
	}
	ctx := lower.NewContext(target.Blackhole())
	ctx.Alias = map[*ir.Value]*ir.Value{inPlace.Result(): inPlace.Operands[0]}
	ctx.Blocks = map[*ir.Value]*kir.BlockLayout{blocked.Operands[1]: {Kt: 1, Nt: 2, Period: 2, Dest: 2, KB: 1}}
	lm := newLowerMemo(newMemo(ctx.Target))
	key := func(op *ir.Op) string {
		k, _, ok := lm.lowerKey(op, ctx)
		if !ok {
			t.Fatalf("op %s has no key", op.Where())
		}
		return string(k)
	}
	want := key(base())
	if a, b := key(add(val(ir.KindResult, sharded), val(ir.KindResult, bf), nil)), key(add(val(ir.KindResult, sharded2), val(ir.KindResult, bf), nil)); a == b {
		t.Errorf("two shard shapes share the key %q", a)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := key(tc.op); (got == want) != tc.same {
				t.Errorf("key %q, base key %q: same = %v, want %v", got, want, got == want, tc.same)
			}
		})
	}
}
