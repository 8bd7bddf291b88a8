package persist_test

import (
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
