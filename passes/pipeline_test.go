package passes

import (
	"bytes"
	"errors"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/passes/rewrite"
)

// normGraph builds x -> decomposed RMSNorm (square form) -> silu, in layer 0.
func normGraph(t *testing.T) *ir.Graph {
	t.Helper()
	b := ir.NewBuilder("norm")
	x := b.Input("x", ir.T(ir.BF16, 1, 32, 64))
	w := b.Weight("model.layers.0.input_layernorm.weight", ir.T(ir.BF16, 64))
	b.Region("attention", 0)
	n := b.Mul(b.Mul(x, b.Rsqrt(b.AddScalar(b.Mean(b.Square(x)), 1e-6))), w)
	b.Output(b.SiLU(n))
	g, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func passNames(ts []PassTiming) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.Pass)
	}
	return out
}

func TestDefaultPipeline(t *testing.T) {
	if err := Default().Validate(); err != nil {
		t.Fatal(err)
	}
	g := normGraph(t)
	res, err := Run(g, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"verify", "fuse-blocks", "fuse-layout", "fuse", "fuse-boundaries", "pack-rows", "place", "verify"}, passNames(res.Timings)); diff != "" {
		t.Errorf("timings (-want +got):\n%s", diff)
	}
	for i, tm := range res.Timings {
		if tm.Index != i+1 || tm.Run < 0 || tm.Verify < 0 {
			t.Errorf("timing %d: %+v", i, tm)
		}
	}
	if res.Timings[1].Verify == 0 {
		t.Errorf("no verification time recorded after fuse")
	}
	if n := res.Rewrites.Total("FuseRMSNorm"); n != 1 {
		t.Errorf("FuseRMSNorm fired %d times, want 1", n)
	}
	var kinds []string
	for _, op := range g.Ops() {
		kinds = append(kinds, op.Name())
	}
	if diff := cmp.Diff([]string{"rms_norm", "silu"}, kinds); diff != "" {
		t.Errorf("ops after the pipeline (-want +got):\n%s", diff)
	}
	if res.Place.Results != 2 {
		t.Errorf("place visited %d results, want 2", res.Place.Results)
	}
	// fuse renumbers: inputs 0, 1, then rms_norm op 2 / result 3, silu 4 / 5.
	if got := g.Outputs[0].ID; got != 5 {
		t.Errorf("output ID %d after renumbering, want 5", got)
	}
}

func TestConstraintViolation(t *testing.T) {
	p := Default()
	p.Passes = []Pass{VerifyPass, FuseBlocksPass, FuseLayoutPass, PlacePass, FusePass, FuseBoundariesPass, PackRowsPass}
	err := p.Validate()
	if err == nil {
		t.Fatal("place before fuse was accepted")
	}
	for _, want := range []string{"place (#4) runs before fuse (#5)", "fuse must run before place", "interior values of a fused op"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if _, err := p.Run(normGraph(t), Options{}); err == nil {
		t.Error("Run accepted an invalid pipeline")
	}
}

func TestPipelineValidation(t *testing.T) {
	tests := []struct {
		name string
		p    Pipeline
		want string
	}{
		{"unknown pass in constraint", Pipeline{Passes: []Pass{VerifyPass}, Constraints: []Constraint{{"verify", "shard", "r"}}}, `unknown pass "shard"; passes: verify`},
		{"no reason", Pipeline{Passes: []Pass{VerifyPass, FusePass}, Constraints: []Constraint{{"verify", "fuse", ""}}}, "gives no reason"},
		{"no run", Pipeline{Passes: []Pass{{Name: "x"}}}, `pass #1 ("x") needs a name and a Run function`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.p.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
}

// corrupt swaps the first two ops of the first region, breaking SSA order.
var corrupt = Pass{Name: "corrupt", Doc: "test: break SSA order", Run: func(_ *Context, g *ir.Graph) error {
	ops := g.Regions[0].Ops
	ops[0], ops[1] = ops[1], ops[0]
	return nil
}}

func TestVerifyBetweenPasses(t *testing.T) {
	p := &Pipeline{Passes: []Pass{VerifyPass, corrupt, PlacePass}}
	res, err := p.Run(normGraph(t), Options{})
	if err == nil {
		t.Fatal("a corrupting pass went unnoticed")
	}
	for _, want := range []string{"verification after pass corrupt (#2) failed", "rule ssa-order"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if diff := cmp.Diff([]string{"verify", "corrupt"}, passNames(res.Timings)); diff != "" {
		t.Errorf("place must not run after the failure (-want +got):\n%s", diff)
	}
	if _, err := p.Run(normGraph(t), Options{SkipVerify: true}); err != nil {
		t.Errorf("with SkipVerify the corruption is not checked, got %v", err)
	}
}

func TestPassErrorsNameThePass(t *testing.T) {
	sentinel := errors.New("boom")
	failing := Pass{Name: "failing", Run: func(*Context, *ir.Graph) error { return sentinel }}
	panicking := Pass{Name: "panicking", Run: func(*Context, *ir.Graph) error { panic("bad index") }}
	_, err := (&Pipeline{Passes: []Pass{VerifyPass, failing}}).Run(normGraph(t), Options{})
	if !errors.Is(err, sentinel) || !strings.HasPrefix(err.Error(), "pass failing (#2): boom") {
		t.Errorf("got %v, want the wrapped sentinel naming pass failing (#2)", err)
	}
	_, err = (&Pipeline{Passes: []Pass{panicking}}).Run(normGraph(t), Options{})
	if err == nil || !strings.HasPrefix(err.Error(), "pass panicking (#1): panic: bad index") {
		t.Errorf("got %v, want the panic as an error naming the pass", err)
	}
}

func TestPrintAfter(t *testing.T) {
	g := normGraph(t)
	var buf bytes.Buffer
	res, err := Run(g, Options{PrintAfter: []string{"fuse", "place"}, PrintTo: &buf})
	if err != nil {
		t.Fatal(err)
	}
	if res.Place.Changed != 0 {
		t.Fatalf("place changed %d results; the expected text below assumes none", res.Place.Changed)
	}
	text := ir.Print(g)
	want := "// after fuse (#4)\n" + text + "// after place (#7)\n" + text
	if diff := cmp.Diff(want, buf.String()); diff != "" {
		t.Errorf("printed (-want +got):\n%s", diff)
	}
	if !strings.Contains(text, `rms_norm(%0, %1) {eps = 1e-06, offset = 0.0}`) {
		t.Errorf("printed graph lacks the fused norm:\n%s", text)
	}
}

func TestOptionErrors(t *testing.T) {
	tests := []struct {
		name string
		opts Options
		want string
	}{
		{"PrintAfter", Options{PrintAfter: []string{"fuse", "sched"}, PrintTo: &bytes.Buffer{}}, `unknown pass "sched" in PrintAfter; valid passes: verify, fuse-blocks, fuse-layout, fuse, fuse-boundaries, pack-rows, place`},
		{"Disable", Options{Disable: []string{"fusion"}}, `unknown pass "fusion" in Disable; valid passes: verify, fuse-blocks, fuse-layout, fuse, fuse-boundaries, pack-rows, place`},
		{"no writer", Options{PrintAfter: []string{"fuse"}}, "PrintTo is nil"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Run(normGraph(t), tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
}

func TestDisable(t *testing.T) {
	g := normGraph(t)
	res, err := Run(g, Options{Disable: []string{"fuse"}})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"verify", "fuse-blocks", "fuse-layout", "fuse-boundaries", "pack-rows", "place", "verify"}, passNames(res.Timings)); diff != "" {
		t.Errorf("timings (-want +got):\n%s", diff)
	}
	if res.Rewrites.Total("FuseRMSNorm")+res.Rewrites.Total("FuseRMSNormOffset") != 0 || g.NumOps() != 7 {
		t.Errorf("fuse ran although disabled: %d ops", g.NumOps())
	}
}

func TestOptionsRulesOverrideRegistry(t *testing.T) {
	g := normGraph(t)
	if FamilyRules("no-such-family") != nil {
		t.Error("FamilyRules of an unknown family is not nil")
	}
	if _, err := Run(g, Options{Rules: []*rewrite.Rule{}}); err != nil {
		t.Fatal(err)
	}
	if g.NumOps() != 7 {
		t.Errorf("an empty rule set still fused: %d ops", g.NumOps())
	}
	// nil Rules means every registered rule; an empty non-nil slice means none.
	g = normGraph(t)
	if res, err := Run(g, Options{Rules: FamilyRules("norm")}); err != nil || res.Rewrites.Total("FuseRMSNorm") != 1 {
		t.Errorf("norm rules: %v, %v", res.Rewrites, err)
	}
}

func TestRegistry(t *testing.T) {
	fams := Families()
	if !sort.StringsAreSorted(fams) || !slices.Contains(fams, "norm") {
		t.Errorf("families %v: want sorted and containing norm", fams)
	}
	stages := Default().Names()
	seen := map[string]string{}
	for _, f := range fams {
		if !slices.Contains(stages, StageOf(f)) {
			t.Errorf("family %s runs in %q, which is not a pass", f, StageOf(f))
		}
		for _, r := range FamilyRules(f) {
			if err := r.Validate(); err != nil {
				t.Error(err)
			}
			if other, dup := seen[r.Name]; dup {
				t.Errorf("rule %s is in families %s and %s", r.Name, other, f)
			}
			seen[r.Name] = f
		}
	}
	if len(Rules()) != len(seen) {
		t.Errorf("Rules() has %d rules, families have %d", len(Rules()), len(seen))
	}
	var norm []string
	for _, r := range FamilyRules("norm") {
		norm = append(norm, r.Name)
	}
	if diff := cmp.Diff([]string{"FuseRMSNormOffset", "FuseRMSNorm"}, norm); diff != "" {
		t.Errorf("norm rules (-want +got):\n%s", diff)
	}
	if a, b := Rules(), Rules(); a[0] == b[0] {
		t.Error("Rules must return fresh instances")
	}
}
