package persist_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tcc-dev/tcc/codegen"
	"github.com/tcc-dev/tcc/codegen/persist"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/models/tinymlp"
	"github.com/tcc-dev/tcc/passes"
)

// TestPrintableWithoutEarlyBegins: the C++ printer has no device side for
// early begins, so Prepare refuses a program that has them, and
// BuildWithoutEarlyBegins gives the same phases with none, which Prepare
// accepts (it is what tcc build --persistent prints).
func TestPrintableWithoutEarlyBegins(t *testing.T) {
	g := tinymlp.BuildGraph(tinymlp.Sizes{Layers: 2, Hidden: 128, Intermediate: 256, Vocab: 512, Batch: 1})
	_, err := passes.Run(g, passes.Options{})
	require.NoError(t, err)
	b, err := codegen.Compile(g, target.Blackhole())
	require.NoError(t, err)

	early, _, err := persist.Build(b)
	require.NoError(t, err)
	require.NotEmpty(t, early.Persist.Early, "tiny-mlp's matmuls after its norms should begin early")
	err = persist.Prepare(early, b)
	if err == nil || !strings.Contains(err.Error(), "no device side for early begins") {
		t.Errorf("Prepare of a program with early begins: got %v, want the early-begin refusal", err)
	}

	serial, _, err := persist.BuildWithoutEarlyBegins(b)
	require.NoError(t, err)
	if n := len(serial.Persist.Early); n != 0 {
		t.Errorf("BuildWithoutEarlyBegins: %d early begins, want none", n)
	}
	if len(serial.Persist.Phases) != len(early.Persist.Phases) {
		t.Errorf("phases: %d without early begins, %d with", len(serial.Persist.Phases), len(early.Persist.Phases))
	}
	require.NoError(t, persist.Prepare(serial, b))
}
