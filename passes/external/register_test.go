package external

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/passes"
	"github.com/tcc-dev/tcc/passes/external/example"
	"github.com/tcc-dev/tcc/passes/rewrite"
	"github.com/tcc-dev/tcc/sim/ref"
)

var registerOnce sync.Once

// registerExample registers the example's rules once per test binary, as
// the generated driver does.
func registerExample(t *testing.T) {
	t.Helper()
	var err error
	registerOnce.Do(func() { err = passes.RegisterExternal(example.Family, example.Rules()...) })
	if err != nil {
		t.Fatal(err)
	}
}

// chain is a graph computing mul_scalar(...mul_scalar(x, s0)..., sN) on a
// [1,32,64] fp32 input, with the first product also an output if shareFirst.
func chain(t *testing.T, shareFirst bool, scalars ...string) *ir.Graph {
	t.Helper()
	var sb strings.Builder
	sb.WriteString("graph chain mesh 1x1 {\n  input %0 \"x\" : [1,32,64] fp32 tile dram_interleaved\n  region layer 0 {\n")
	for i, s := range scalars {
		sb.WriteString("    %" + strconv.Itoa(i+1) + " = mul_scalar(%" + strconv.Itoa(i) + ") {value = " + s + "} : [1,32,64] fp32 tile dram_interleaved\n")
	}
	sb.WriteString("  }\n  output %" + strconv.Itoa(len(scalars)))
	if shareFirst {
		sb.WriteString(", %1")
	}
	sb.WriteString("\n}\n")
	g, err := ir.Parse(sb.String())
	if err != nil {
		t.Fatalf("parse:\n%s\n%v", sb.String(), err)
	}
	return g
}

// scalars lists the value of every mul_scalar in g, in program order.
func scalars(g *ir.Graph) []float64 {
	var out []float64
	for _, op := range g.Ops() {
		if op.Kind == ir.OpMulScalar {
			out = append(out, op.Float("value"))
		}
	}
	return out
}

func TestRegisteredExampleRuleFires(t *testing.T) {
	registerExample(t)
	if !slices.Contains(passes.Families(), "scalar") {
		t.Fatalf("Families() = %v, want it to include scalar", passes.Families())
	}
	var names []string
	for _, r := range passes.Rules() {
		names = append(names, r.Name)
	}
	if !slices.Contains(names, "FoldMulScalar") || !slices.Contains(names, "FuseRMSNorm") {
		t.Fatalf("Rules() = %v, want the built-in and the example rules", names)
	}

	tests := []struct {
		name    string
		share   bool
		scalars []string
		firings int
		want    []float64 // mul_scalar values after the pipeline
	}{
		{"two fold", false, []string{"2.0", "3.0"}, 1, []float64{6}},
		{"three fold", false, []string{"0.5", "4.0", "-2.0"}, 2, []float64{-4}},
		{"zero scalar folds", false, []string{"0.0", "5.0"}, 1, []float64{0}},
		{"inner product shared", true, []string{"2.0", "3.0"}, 0, []float64{2, 3}},
		{"infinite scalar", false, []string{"2.0", "+Inf"}, 0, []float64{2, math.Inf(1)}},
		{"product beyond float32", false, []string{"1e+30", "1e+30"}, 0, []float64{1e30, 1e30}},
		{"product underflows to zero", false, []string{"1e-30", "1e-300"}, 0, []float64{1e-30, 1e-300}},
		{"single op", false, []string{"2.0"}, 0, []float64{2}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := chain(t, tc.share, tc.scalars...)
			// Only the example's family: built-in families (eltwise chains)
			// would otherwise fuse the chains the example leaves alone.
			res, err := passes.Run(g, passes.Options{Rules: passes.FamilyRules("scalar")})
			if err != nil {
				t.Fatal(err)
			}
			if got := res.Rewrites.Total("FoldMulScalar"); got != tc.firings {
				t.Errorf("FoldMulScalar fired %d times, want %d", got, tc.firings)
			}
			if diff := cmp.Diff(tc.want, scalars(g)); diff != "" {
				t.Errorf("mul_scalar values (-want +got):\n%s", diff)
			}
		})
	}
}

// TestExampleFoldIsExactForPowersOfTwo evaluates a chain before and after
// fusion with the reference evaluator: with power-of-two scalars the fold
// must not change a single bit.
func TestExampleFoldIsExactForPowersOfTwo(t *testing.T) {
	registerExample(t)
	before := chain(t, false, "0.5", "4.0", "-2.0")
	after := chain(t, false, "0.5", "4.0", "-2.0")
	if _, err := passes.Run(after, passes.Options{}); err != nil {
		t.Fatal(err)
	}
	if n := len(scalars(after)); n != 1 {
		t.Fatalf("after fusion %d mul_scalar ops remain, want 1", n)
	}
	x := ref.NewTensor(ir.Shape{1, 32, 64})
	for i := range x.Data {
		x.Data[i] = float32(i%97)*0.37 - 17
	}
	eval := func(g *ir.Graph) []float32 {
		vals, err := ref.Eval(g, map[*ir.Value]ref.Tensor{g.Inputs[0]: x}, ref.ExactOptions())
		if err != nil {
			t.Fatal(err)
		}
		return vals[g.Outputs[0]].Data
	}
	want, got := eval(before), eval(after)
	for i := range want {
		if math.Float32bits(want[i]) != math.Float32bits(got[i]) {
			t.Fatalf("element %d: unfused %v, fused %v", i, want[i], got[i])
		}
	}
	if want[1] != (0.37-17)*-4 {
		t.Errorf("element 1 = %v, want %v", want[1], float32((0.37-17)*-4))
	}
}

func TestRegisterExternalErrors(t *testing.T) {
	registerExample(t)
	noBuild := example.FoldMulScalar()
	noBuild.Name, noBuild.Build = "NoBuild", nil
	clash := example.FoldMulScalar()
	clash.Name = "FuseRMSNorm"
	twice := example.FoldMulScalar()
	twice.Name = "Twice"
	tests := []struct {
		name   string
		family string
		rules  []*rewrite.Rule
		want   string
	}{
		{"family taken", "scalar", []*rewrite.Rule{twice}, "rule family scalar is already registered by another rule package"},
		{"built-in family", "norm", []*rewrite.Rule{twice}, "rule family norm is built in"},
		{"bad family name", "my rules", []*rewrite.Rule{twice}, `rule family name "my rules": ' ' is not`},
		{"no rules", "empty", nil, "rule family empty has no rules"},
		{"nil rule", "nils", []*rewrite.Rule{twice, nil}, "rule family nils: rule #2 is nil"},
		{"invalid rule", "invalid", []*rewrite.Rule{noBuild}, "rule family invalid, rule #1: rewrite: rule NoBuild has no Build function"},
		{"built-in rule name", "clash", []*rewrite.Rule{clash}, "rule name FuseRMSNorm is already used by family norm"},
		{"example rule name", "again", []*rewrite.Rule{example.FoldMulScalar()}, "rule name FoldMulScalar is already used by family scalar"},
		{"duplicate in call", "dup", []*rewrite.Rule{twice, twice}, "rule name Twice is already used by family dup"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := passes.Families()
			err := passes.RegisterExternal(tc.family, tc.rules...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("RegisterExternal(%q) error = %v, want %q", tc.family, err, tc.want)
			}
			if diff := cmp.Diff(before, passes.Families()); diff != "" {
				t.Errorf("a failed registration changed Families() (-before +after):\n%s", diff)
			}
		})
	}
}
