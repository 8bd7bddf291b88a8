package ir

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestLayoutChainRoundTrip(t *testing.T) {
	s := "slice:0,0,128:1,64,384|reshape:1,64,2,128|repeat_interleave:2:2|transpose:1:2"
	steps, err := ParseLayoutChain(s)
	if err != nil {
		t.Fatal(err)
	}
	want := []LayoutStep{
		{Op: OpSlice, Attrs: Attrs{"begin": []int{0, 0, 128}, "end": []int{1, 64, 384}}},
		{Op: OpReshape, Attrs: Attrs{"shape": []int{1, 64, 2, 128}}},
		{Op: OpRepeatInterleave, Attrs: Attrs{"repeats": 2, "axis": 2}},
		{Op: OpTranspose, Attrs: Attrs{"dim0": 1, "dim1": 2}},
	}
	if diff := cmp.Diff(want, steps); diff != "" {
		t.Errorf("ParseLayoutChain (-want +got):\n%s", diff)
	}
	if got := FormatLayoutChain(steps); got != s {
		t.Errorf("FormatLayoutChain = %q, want %q", got, s)
	}
	types, err := LayoutChainTypes(T(BF16, 1, 64, 384), steps)
	if err != nil {
		t.Fatal(err)
	}
	if got := types[len(types)-1].Shape; !got.Equal(Shape{1, 4, 64, 128}) {
		t.Errorf("result shape %s, want [1,4,64,128]", got)
	}
}

func TestLayoutChainErrors(t *testing.T) {
	tests := []struct {
		name, steps, err string
	}{
		{"one step", "transpose:1:2", "layout-chain-length"},
		{"unknown op", "exp|transpose:1:2", "layout-chain-op"},
		{"missing attr", "reshape|transpose:1:2", "layout-chain-attrs"},
		{"bad int", "reshape:1,x|transpose:1:2", "layout-chain-attrs"},
		{"list for an int", "repeat_interleave:2,3:1|transpose:1:2", "is one int"},
		{"bad shape", "reshape:7,7|transpose:0:1", "reshape"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := shapeLayoutChain([]TensorType{T(BF16, 1, 64, 384)}, Attrs{"steps": tc.steps})
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("err = %v, want one containing %q", err, tc.err)
			}
		})
	}
}
