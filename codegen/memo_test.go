package codegen

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/kir/kirtest"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
)

// renamed is p with every buffer name replaced, as another layer's program.
func renamed(p *kir.Program, suffix string) *kir.Program {
	q := *p
	q.Buffers = append([]kir.Buffer(nil), p.Buffers...)
	for i := range q.Buffers {
		q.Buffers[i].Name += suffix
	}
	q.Kernels = nil
	for _, k := range p.Kernels {
		kk := *k
		kk.RuntimeValues = nil
		for _, ca := range k.RuntimeValues {
			vs := append([]kir.ArgValue(nil), ca.Values...)
			for j := range vs {
				if vs[j].Buffer != "" {
					vs[j].Buffer += suffix
				}
			}
			kk.RuntimeValues = append(kk.RuntimeValues, kir.CoreArgs{Core: ca.Core, Values: vs})
		}
		q.Kernels = append(q.Kernels, &kk)
	}
	return &q
}

func TestMemoSignature(t *testing.T) {
	m := newMemo(target.Blackhole())
	p := kirtest.EltwiseBinary(kir.EltAdd, ir.BF16, 4, []kir.Core{{X: 0, Y: 0}, {X: 1, Y: 0}})
	a, ok := m.signature(p)
	require.True(t, ok)
	b, ok := m.signature(renamed(p, "_layer7"))
	require.True(t, ok)
	assert.Equal(t, a, b, "programs that differ only in buffer names share a signature")

	big := renamed(p, "")
	big.CBs = append([]kir.CB(nil), p.CBs...)
	big.CBs[0].Pages = 100000 // far past L1
	c, ok := m.signature(big)
	require.True(t, ok)
	assert.NotEqual(t, a, c, "a CB size enters the signature")

	require.NoError(t, m.validate(p))
	require.NoError(t, m.validate(renamed(p, "_x")), "a known signature is valid")
	assert.Error(t, m.validate(big), "a new signature is validated: this one breaks the L1 budget")
}

// TestMemoSignaturePointees: a buffer's shard spec and block layout enter
// the signature by value, so the same program of another layer (its own,
// equal, block layout) shares the signature and a different layout does not.
func TestMemoSignaturePointees(t *testing.T) {
	m := newMemo(target.Blackhole())
	p := kirtest.EltwiseBinary(kir.EltAdd, ir.BF16, 4, []kir.Core{{X: 0, Y: 0}, {X: 1, Y: 0}})
	withBlocks := func(l kir.BlockLayout, shard *ir.ShardSpec) *kir.Program {
		q := renamed(p, "")
		q.Buffers[0].Blocks = &l
		if shard != nil {
			s := *shard
			q.Buffers[1].Mem.Shard = &s
		}
		return q
	}
	l := kir.BlockLayout{Kt: 4, Nt: 8, Period: 2, Dest: 2, KB: 4}
	sh := &ir.ShardSpec{Grid: ir.CoreRange{X0: 0, Y0: 0, X1: 1, Y1: 0}, Shape: [2]int{32, 64}}
	other := l
	other.KB = 2
	otherShard := *sh
	otherShard.Shape = [2]int{64, 64}
	tests := []struct {
		name string
		a, b *kir.Program
		same bool
	}{
		{"equal block layouts", withBlocks(l, nil), withBlocks(l, nil), true},
		{"equal shard specs", withBlocks(l, sh), withBlocks(l, sh), true},
		{"block layouts differ", withBlocks(l, nil), withBlocks(other, nil), false},
		{"shard specs differ", withBlocks(l, sh), withBlocks(l, &otherShard), false},
		{"block layout or none", withBlocks(l, nil), renamed(p, ""), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, ok := m.signature(tt.a)
			require.True(t, ok)
			b, ok := m.signature(tt.b)
			require.True(t, ok)
			assert.Equal(t, tt.same, a == b)
		})
	}
}
