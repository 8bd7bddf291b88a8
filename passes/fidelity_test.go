package passes

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tcc-dev/tcc/ir"
)

func TestParseWeightFidelity(t *testing.T) {
	tests := []struct {
		in, want, err string
	}{
		{"exact", "exact", ""},
		{"", "exact", ""},
		{"bfp8_b=HiFi2,bfp4_b=LoFi", "bfp4_b=LoFi,bfp8_b=HiFi2", ""},
		{"bfp8_b", "", "format=fidelity"},
		{"nope=HiFi2", "", "format=fidelity"},
		{"bfp8_b=HiFi5", "", "unknown math fidelity"},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			p, err := ParseWeightFidelity(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || p.String() != tc.want {
				t.Errorf("ParseWeightFidelity = %v, %v; want %s", p, err, tc.want)
			}
		})
	}
}

// TestSetWeightFidelity: a matmul gets its weight format's fidelity; one
// whose format the policy does not name, one already set and one whose
// default is already lower keep theirs; a sibling matmul takes its most
// demanding weight's.
func TestSetWeightFidelity(t *testing.T) {
	b := ir.NewBuilder("fid")
	a := b.Input("a", ir.T(ir.BF16, 1, 64, 64))
	w8 := b.Weight("w8", ir.T(ir.BFP8B, 64, 64))
	w4 := b.Weight("w4", ir.T(ir.BFP4B, 64, 64))
	wb := b.Weight("wb", ir.T(ir.BF16, 64, 64))
	m8 := b.Matmul(a, w8)
	m4 := b.Matmul(a, w4)
	mb := b.Matmul(a, wb)
	set := b.Matmul(a, w8, ir.With(ir.FidelityAttr, "HiFi3"))
	m2 := b.Matmul2(a, w8, w4)
	b.Output(m8, m4, mb, set, m2[0], m2[1])
	g, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	n := SetWeightFidelity(g, WeightFidelity{ir.BFP8B: ir.HiFi2, ir.BFP4B: ir.HiFi3})
	var got []string
	for _, op := range g.Ops() {
		f, _ := ir.OpFidelity(op, ir.HiFi4)
		got = append(got, op.Kind.String()+":"+f.String())
	}
	// bfp4_b alone: its default is HiFi3 already (exact), so not lowered.
	want := []string{"matmul:HiFi2", "matmul:HiFi3", "matmul:HiFi4", "matmul:HiFi3", "matmul2:HiFi3"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("fidelities (-want +got):\n%s", diff)
	}
	if n != 2 {
		t.Errorf("SetWeightFidelity set %d ops, want 2 (the bfp8_b matmul and matmul2)", n)
	}
}
