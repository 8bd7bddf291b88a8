package qwen27b

import (
	"strings"
	"testing"

	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/models"
)

// TestStepInputsBounded: inputs for a step past the KV cache are an error
// naming the position and the cache length.
func TestStepInputsBounded(t *testing.T) {
	m := Model{}
	args, err := models.DefaultArgs(m, map[string]string{"config": "testdata/small.json", "max-seq": "32"})
	if err != nil {
		t.Fatal(err)
	}
	g, err := m.Build(args, ir.Mesh{Rows: 1, Cols: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.StepInputs(args, g, [][]int{{1}}, 31); err != nil {
		t.Fatalf("position 31 of 32: %v", err)
	}
	_, err = m.StepInputs(args, g, [][]int{{1}}, 32)
	if err == nil || !strings.Contains(err.Error(), "position 32") || !strings.Contains(err.Error(), "--max-seq 32") {
		t.Errorf("position 32 of a 32-token cache: err = %v", err)
	}
}
