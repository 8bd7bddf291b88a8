package persist_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tcc-dev/tcc/codegen"
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/persist"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/models/tinymlp"
	"github.com/tcc-dev/tcc/passes"
)

// TestCardBuffersBeforePrepare: the card buffers Build reserves L1 for
// (computed on the program before Prepare, whose kernels lack the card
// arguments) are the ones Prepare declares: the tables page holds the
// kernels' argument vectors with persist_ctl and persist_tables included
// (kir.Tables.Args).
func TestCardBuffersBeforePrepare(t *testing.T) {
	tiny := func(t *testing.T) *codegen.Build {
		g := tinymlp.BuildGraph(tinymlp.Sizes{Layers: 2, Hidden: 128, Intermediate: 256, Vocab: 512, Batch: 1})
		_, err := passes.Run(g, passes.Options{})
		require.NoError(t, err)
		b, err := codegen.Compile(g, target.Blackhole())
		require.NoError(t, err)
		return b
	}
	for _, tc := range []struct {
		name  string
		build func(t *testing.T) *codegen.Build
	}{
		{"tiny-mlp", tiny},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.build(t)
			p, _, err := persist.Build(b)
			require.NoError(t, err)
			// Every worker kernel's common vector a multiple of 16 bytes
			// before Prepare adds persist_tables: a page sized without it
			// is a CtlStride short (a common argument of no phase's, read
			// by no code).
			for _, k := range p.Kernels {
				for i := 0; !k.OnEth() && len(k.ArgsOfKind(kir.CommonRuntimeArg))%4 != 0; i++ {
					k.CommonArg(fmt.Sprintf("test_pad_%d", i), kir.U32(0))
				}
			}
			tables, text, err := persist.CardPages(p, b)
			require.NoError(t, err)
			require.NoError(t, persist.Prepare(p, b))
			for _, c := range []struct {
				name string
				want int
			}{{kir.TablesBuffer, tables}, {kir.TextBuffer, text}} {
				got := p.Buffer(c.name)
				require.NotNil(t, got, "Prepare declares %s", c.name)
				if got.PageSize != c.want {
					t.Errorf("%s: %d bytes before Prepare, %d after", c.name, c.want, got.PageSize)
				}
			}
		})
	}
}
