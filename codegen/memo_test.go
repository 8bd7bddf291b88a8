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
