package persist_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tcc-dev/tcc/codegen"
	"github.com/tcc-dev/tcc/codegen/persist"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/models/tinymlp"
	"github.com/tcc-dev/tcc/passes"
)

// TestPrepareEarlyBegins: Prepare accepts a program with early begins (the
// C++ printer has their device side: codegen/cpp's persist_early.go), and
// BuildWithoutEarlyBegins, kept as an option, gives the same phases with
// none, which Prepare accepts too.
func TestPrepareEarlyBegins(t *testing.T) {
	g := tinymlp.BuildGraph(tinymlp.Sizes{Layers: 2, Hidden: 128, Intermediate: 256, Vocab: 512, Batch: 1})
	_, err := passes.Run(g, passes.Options{})
	require.NoError(t, err)
	b, err := codegen.Compile(g, target.Blackhole())
	require.NoError(t, err)

	early, _, err := persist.Build(b)
	require.NoError(t, err)
	require.NotEmpty(t, early.Persist.Early, "tiny-mlp's matmuls after its norms should begin early")
	if err := persist.WithTables(early, b); err != nil {
		t.Errorf("WithTables of a program with early begins: %v", err)
	}

	serial, _, err := persist.BuildWithoutEarlyBegins(b)
	require.NoError(t, err)
	if n := len(serial.Persist.Early); n != 0 {
		t.Errorf("BuildWithoutEarlyBegins: %d early begins, want none", n)
	}
	if len(serial.Persist.Phases) != len(early.Persist.Phases) {
		t.Errorf("phases: %d without early begins, %d with", len(serial.Persist.Phases), len(early.Persist.Phases))
	}
	require.NoError(t, persist.WithTables(serial, b))
}

// TestEarlyLeavesCardL1: the early CBs Build places leave the L1 the
// card's tables and images buffers take (Prepare adds them): on a card
// with less L1, where the first plan's early rings reach into those
// buffers, Build plans again with them reserved, and the program keeps
// early begins and prepares; a phase whose early CBs reach them anyway
// is refused by Prepare with rule l1-budget naming it.
func TestEarlyLeavesCardL1(t *testing.T) {
	g := tinymlp.BuildGraph(tinymlp.Sizes{Layers: 2, Hidden: 128, Intermediate: 256, Vocab: 512, Batch: 1})
	_, err := passes.Run(g, passes.Options{})
	require.NoError(t, err)
	for _, cut := range []int{256, 384, 480} {
		t.Run(fmt.Sprintf("L1 less %d KiB", cut), func(t *testing.T) {
			tg := *target.Blackhole()
			tg.L1Size -= cut << 10
			b, err := codegen.Compile(g, &tg)
			require.NoError(t, err)
			p, _, err := persist.Build(b)
			require.NoError(t, err)
			if len(p.Persist.Early) == 0 {
				t.Errorf("no early begins left")
			}
			if err := persist.WithTables(p, b); err != nil {
				t.Errorf("WithTables: %v", err)
			}
		})
	}
	t.Run("early CBs over the images", func(t *testing.T) {
		b, err := codegen.Compile(g, target.Blackhole())
		require.NoError(t, err)
		p, _, err := persist.Build(b)
		require.NoError(t, err)
		require.NotEmpty(t, p.Persist.Early)
		e := p.Persist.Early[0]
		p.Persist.Phases[e.Phase].CBBase = uint32(b.Target.L1Size - 64<<10)
		err = persist.WithTables(p, b)
		want := fmt.Sprintf("phase %d (%s) begins early: its CBs end at", e.Phase, p.Persist.Phases[e.Phase].Name)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "[rule l1-budget]") {
			t.Errorf("WithTables: %v, want rule l1-budget containing %q", err, want)
		}
	})
}
