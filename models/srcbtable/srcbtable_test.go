package srcbtable

import (
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/models"
	"github.com/tcc-dev/tcc/models/qwen27b"
	"github.com/tcc-dev/tcc/passes"
)

const smallConfig = "../qwen27b/testdata/small.json"

// fusedSmall is qwen27b's small config at mesh 1x2 for set, after the
// default pipeline.
func fusedSmall(t *testing.T, set map[string]string) (models.Model, models.Args, *ir.Graph) {
	t.Helper()
	m := qwen27b.Model{}
	set["config"] = smallConfig
	args, err := models.DefaultArgs(m, set)
	require.NoError(t, err)
	g, err := m.Build(args, ir.Mesh{Rows: 1, Cols: 2})
	require.NoError(t, err)
	_, err = passes.Run(g, passes.Options{})
	require.NoError(t, err)
	return m, args, g
}

// TestSharingArgs: a model with modes takes its table from its decode
// step, keeping args' other parameters.
func TestSharingArgs(t *testing.T) {
	args := models.Args{"mode": "prefill", "seq": "700", "max-seq": "1024", "batch": "1"}
	got := SharingArgs(qwen27b.Model{}, args)
	want := []models.Args{{"mode": "decode", "seq": "700", "max-seq": "1024", "batch": "1"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("steps (-want +got):\n%s", diff)
	}
	if args["mode"] != "prefill" {
		t.Errorf("SharingArgs changed args: mode %s", args["mode"])
	}
}

// TestTableFromDecode: the table excludes lm_head, which decode reads in
// its head's norm prologue, though a 64-token prefill multiplies it as a
// plain matmul's weight; the 1-token prefill (a prompt's remainder)
// reads it as decode does, so a table from the 64-token graph alone would
// break it.
func TestTableFromDecode(t *testing.T) {
	m, args, g := fusedSmall(t, map[string]string{"mode": "prefill", "seq": "64"})
	names, err := Names(m, args, g.Mesh, passes.Options{})
	require.NoError(t, err)
	alone := passes.WeightNamesOnSrcB(g)
	if !slices.Contains(alone, "lm_head.weight") || slices.Contains(names, "lm_head.weight") {
		t.Errorf("lm_head: in the 64-token graph's own table %v, in the model's %v; want true, false", slices.Contains(alone, "lm_head.weight"), slices.Contains(names, "lm_head.weight"))
	}
	_, args1, g1 := fusedSmall(t, map[string]string{"mode": "prefill", "seq": "1"})
	if err := Store(g1, alone, StepName(args1)); err == nil || !strings.Contains(err.Error(), "lm_head.weight") {
		t.Errorf("the 64-token graph's table on the 1-token step: %v, want lm_head refused", err)
	}
	require.NoError(t, Store(g1, names, StepName(args1)))
}

// TestStoreMarksTheTable: Store marks exactly the table's weights of a
// 700-token prefill graph (a shape the table is not computed from).
func TestStoreMarksTheTable(t *testing.T) {
	m, args, g := fusedSmall(t, map[string]string{"mode": "prefill", "seq": "700", "max-seq": "1024"})
	names, err := Names(m, args, g.Mesh, passes.Options{})
	require.NoError(t, err)
	require.NoError(t, Store(g, names, StepName(args)))
	var marked []string
	for _, w := range g.Weights {
		if w.Type.TilesTransposed {
			marked = append(marked, w.Name)
		}
	}
	sort.Strings(marked)
	if diff := cmp.Diff(names, marked); diff != "" {
		t.Errorf("marked weights (-table +marked):\n%s", diff)
	}
	if len(names) == 0 {
		t.Error("empty table")
	}
}

// TestStoreRefusesOtherReaders: a graph that reads a weight of the table
// other than as a matmul's weight (here a norm's) is refused, naming the
// weight, the step and the op, not built in a layout the other steps'
// copy does not have.
func TestStoreRefusesOtherReaders(t *testing.T) {
	_, args, g := fusedSmall(t, map[string]string{})
	const norm = "model.language_model.layers.0.input_layernorm.weight"
	err := Store(g, []string{norm}, StepName(args))
	if err == nil {
		t.Fatal("a norm weight in the table was accepted")
	}
	for _, want := range []string{norm, "decode step", "op rms_norm", "layer 0", "--weights-on-srcb=false"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
}
