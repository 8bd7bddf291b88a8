package rewrite

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tcc-dev/tcc/ir"
)

func TestMain(m *testing.M) {
	checkIndex = true
	os.Exit(m.Run())
}

// expr prints the expression tree computing v: inputs, weights and state by
// name, ops as name(operands){attrs}.
func expr(v *ir.Value) string {
	if v.Def == nil {
		return v.Name
	}
	var parts []string
	for _, o := range v.Def.Operands {
		parts = append(parts, expr(o))
	}
	s := v.Def.Name() + "(" + strings.Join(parts, ", ") + ")"
	if len(v.Def.Attrs) > 0 {
		var as []string
		for _, k := range v.Def.Attrs.Keys() {
			as = append(as, fmt.Sprintf("%s=%v", k, v.Def.Attrs[k]))
		}
		s += "{" + strings.Join(as, ",") + "}"
	}
	return s
}

func outputs(g *ir.Graph) []string {
	var out []string
	for _, v := range g.Outputs {
		out = append(out, expr(v))
	}
	return out
}

func opNames(r *ir.Region) []string {
	var out []string
	for _, op := range r.Ops {
		out = append(out, op.Name())
	}
	return out
}

func mustEngine(t *testing.T, rules ...*Rule) *Engine {
	t.Helper()
	e, err := NewEngine(rules...)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func build(t *testing.T, f func(b *ir.Builder)) *ir.Graph {
	t.Helper()
	b := ir.NewBuilder("t")
	f(b)
	g, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// mulExp: mul($x, exp($y)) => sub($x, $y); meaningless, but the operand
// order of the replacement shows which way the commutative match bound.
func mulExp() *Rule {
	return &Rule{
		Name:    "MulExp",
		Rewrite: "mul(x, exp(y)) => sub(x, y)",
		Pattern: Op(ir.OpMul, Var("x"), Op(ir.OpExp, Var("y"))),
		Build: func(b *Builder, m *Match) ([]*ir.Value, error) {
			v, err := b.Emit1(ir.OpSub, []*ir.Value{m.Value("x"), m.Value("y")}, nil)
			return []*ir.Value{v}, err
		},
	}
}

// mulSelf: mul($x, $x) => square($x).
func mulSelf() *Rule {
	return &Rule{
		Name:    "MulSelf",
		Rewrite: "mul(x, x) => square(x)",
		Pattern: Op(ir.OpMul, Var("x"), Var("x")),
		Build: func(b *Builder, m *Match) ([]*ir.Value, error) {
			v, err := b.Emit1(ir.OpSquare, []*ir.Value{m.Value("x")}, nil)
			return []*ir.Value{v}, err
		},
	}
}

// addZero: add_scalar(x, 0) => x, with the value checked by a side condition.
func addZero() *Rule {
	return &Rule{
		Name:    "AddZero",
		Rewrite: "add_scalar(x, 0) => x",
		Pattern: Op(ir.OpAddScalar, Var("x")).As("add"),
		Where:   func(m *Match) bool { return m.Op("add").Float("value") == 0 },
		Build: func(b *Builder, m *Match) ([]*ir.Value, error) {
			return []*ir.Value{m.Value("x")}, nil
		},
	}
}

func TestCommutativeMatchBothWays(t *testing.T) {
	for _, expOnLeft := range []bool{false, true} {
		t.Run(fmt.Sprintf("expOnLeft=%v", expOnLeft), func(t *testing.T) {
			g := build(t, func(b *ir.Builder) {
				x := b.Input("x", ir.T(ir.BF16, 32, 64))
				y := b.Input("y", ir.T(ir.BF16, 32, 64))
				b.Region("mlp", 0)
				e := b.Exp(y)
				if expOnLeft {
					b.Output(b.Mul(e, x))
				} else {
					b.Output(b.Mul(x, e))
				}
			})
			st, err := mustEngine(t, mulExp()).Run(g)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]string{"sub(x, y)"}, outputs(g)); diff != "" {
				t.Errorf("outputs (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]string{"sub"}, opNames(g.Regions[0])); diff != "" {
				t.Errorf("ops (-want +got):\n%s", diff)
			}
			if got := st.Count("MulExp", g.Regions[0]); got != 1 {
				t.Errorf("MulExp fired %d times, want 1", got)
			}
			if err := ir.Verify(g); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestNonCommutativeOpIsNotSwapped(t *testing.T) {
	// sub(exp(y), x) must not match sub($x, exp($y)).
	r := mulExp()
	r.Pattern = Op(ir.OpSub, Var("x"), Op(ir.OpExp, Var("y")))
	g := build(t, func(b *ir.Builder) {
		x := b.Input("x", ir.T(ir.BF16, 32, 64))
		y := b.Input("y", ir.T(ir.BF16, 32, 64))
		b.Region("mlp", 0)
		b.Output(b.Sub(b.Exp(y), x))
	})
	st, err := mustEngine(t, r).Run(g)
	if err != nil {
		t.Fatal(err)
	}
	if n := st.Total("MulExp"); n != 0 {
		t.Errorf("rule fired %d times on a swapped non-commutative op", n)
	}
}

func TestRepeatedVariable(t *testing.T) {
	tests := []struct {
		name  string
		same  bool
		want  string
		fired int
	}{
		{"same value", true, "square(a)", 1},
		{"different values", false, "mul(a, b)", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := build(t, func(b *ir.Builder) {
				a := b.Input("a", ir.T(ir.BF16, 32, 64))
				c := b.Input("b", ir.T(ir.BF16, 32, 64))
				b.Region("mlp", 0)
				if tc.same {
					c = a
				}
				b.Output(b.Mul(a, c))
			})
			st, err := mustEngine(t, mulSelf()).Run(g)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]string{tc.want}, outputs(g)); diff != "" {
				t.Errorf("outputs (-want +got):\n%s", diff)
			}
			if got := st.Total("MulSelf"); got != tc.fired {
				t.Errorf("fired %d, want %d", got, tc.fired)
			}
		})
	}
}

func TestSideCondition(t *testing.T) {
	g := build(t, func(b *ir.Builder) {
		x := b.Input("x", ir.T(ir.BF16, 32, 64))
		b.Region("mlp", 0)
		b.Output(b.AddScalar(x, 0), b.AddScalar(x, 1))
	})
	st, err := mustEngine(t, addZero()).Run(g)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"x", "add_scalar(x){value=1}"}, outputs(g)); diff != "" {
		t.Errorf("outputs (-want +got):\n%s", diff)
	}
	if got := st.Total("AddZero"); got != 1 {
		t.Errorf("fired %d, want 1 (the side condition must reject value=1)", got)
	}
}

func TestSideConditionRetriesOtherOrder(t *testing.T) {
	// mul(exp(a), exp(b)): both orders match structurally; a side condition
	// accepting only y == b must make the matcher try the second order.
	r := mulExp()
	r.Where = func(m *Match) bool { return m.Value("y").Name == "b" }
	g := build(t, func(b *ir.Builder) {
		a := b.Input("a", ir.T(ir.BF16, 32, 64))
		c := b.Input("b", ir.T(ir.BF16, 32, 64))
		b.Region("mlp", 0)
		b.Output(b.Mul(b.Exp(a), b.Exp(c)))
	})
	if _, err := mustEngine(t, r).Run(g); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"sub(exp(a), b)"}, outputs(g)); diff != "" {
		t.Errorf("outputs (-want +got):\n%s", diff)
	}
}

func TestInteriorUseBlocksMatch(t *testing.T) {
	tests := []struct {
		name   string
		allow  bool
		output bool // the interior value is a graph output rather than read by another op
		want   []string
		ops    []string
	}{
		{"read by another op", false, false, []string{"mul(x, exp(y))", "silu(exp(y))"}, []string{"exp", "mul", "silu"}},
		{"graph output", false, true, []string{"mul(x, exp(y))", "exp(y)"}, []string{"exp", "mul"}},
		{"allowed", true, false, []string{"sub(x, y)", "silu(exp(y))"}, []string{"exp", "sub", "silu"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := build(t, func(b *ir.Builder) {
				x := b.Input("x", ir.T(ir.BF16, 32, 64))
				y := b.Input("y", ir.T(ir.BF16, 32, 64))
				b.Region("mlp", 0)
				e := b.Exp(y)
				m := b.Mul(x, e)
				if tc.output {
					b.Output(m, e)
				} else {
					b.Output(m, b.SiLU(e))
				}
			})
			r := mulExp()
			r.AllowSharedInterior = tc.allow
			if _, err := mustEngine(t, r).Run(g); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, outputs(g)); diff != "" {
				t.Errorf("outputs (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.ops, opNames(g.Regions[0])); diff != "" {
				t.Errorf("ops (-want +got):\n%s", diff)
			}
		})
	}
}

func TestInteriorUseInLaterRegionBlocksMatch(t *testing.T) {
	g := build(t, func(b *ir.Builder) {
		x := b.Input("x", ir.T(ir.BF16, 32, 64))
		y := b.Input("y", ir.T(ir.BF16, 32, 64))
		b.Region("mlp", 0)
		e := b.Exp(y)
		m := b.Mul(x, e)
		b.Region("mlp", 1)
		b.Output(b.Add(m, e))
	})
	st, err := mustEngine(t, mulExp()).Run(g)
	if err != nil {
		t.Fatal(err)
	}
	if n := st.Total("MulExp"); n != 0 {
		t.Errorf("fired %d times although exp(y) is read by layer 1", n)
	}
}

func TestMatchStaysInRootRegion(t *testing.T) {
	g := build(t, func(b *ir.Builder) {
		x := b.Input("x", ir.T(ir.BF16, 32, 64))
		y := b.Input("y", ir.T(ir.BF16, 32, 64))
		b.Region("mlp", 0)
		e := b.Exp(y)
		b.Region("mlp", 1)
		b.Output(b.Mul(x, e))
	})
	st, err := mustEngine(t, mulExp()).Run(g)
	if err != nil {
		t.Fatal(err)
	}
	if n := st.Total("MulExp"); n != 0 {
		t.Errorf("fired %d times across a region boundary", n)
	}
}

// silu($x) => mul($x, sigmoid($x)) and back.
func expandSiLU() *Rule {
	return &Rule{
		Name:    "ExpandSiLU",
		Rewrite: "silu(x) => mul(x, sigmoid(x))",
		Pattern: Op(ir.OpSiLU, Var("x")),
		Build: func(b *Builder, m *Match) ([]*ir.Value, error) {
			s, err := b.Emit1(ir.OpSigmoid, []*ir.Value{m.Value("x")}, nil)
			if err != nil {
				return nil, err
			}
			v, err := b.Emit1(ir.OpMul, []*ir.Value{m.Value("x"), s}, nil)
			return []*ir.Value{v}, err
		},
	}
}

func foldSiLU() *Rule {
	return &Rule{
		Name:    "FoldSiLU",
		Rewrite: "mul(x, sigmoid(x)) => silu(x)",
		Pattern: Op(ir.OpMul, Var("x"), Op(ir.OpSigmoid, Var("x"))),
		Build: func(b *Builder, m *Match) ([]*ir.Value, error) {
			v, err := b.Emit1(ir.OpSiLU, []*ir.Value{m.Value("x")}, nil)
			return []*ir.Value{v}, err
		},
	}
}

func TestCycleDetection(t *testing.T) {
	swap := &Rule{
		Name:    "Swap",
		Rewrite: "mul(a, b) => mul(b, a)",
		Pattern: Op(ir.OpMul, Var("a"), Var("b")),
		Build: func(b *Builder, m *Match) ([]*ir.Value, error) {
			v, err := b.Emit1(ir.OpMul, []*ir.Value{m.Value("b"), m.Value("a")}, nil)
			return []*ir.Value{v}, err
		},
	}
	tests := []struct {
		name  string
		rules []*Rule
		want  []string
	}{
		{"two rules", []*Rule{expandSiLU(), foldSiLU()}, []string{"cycle in layer 3 (mlp)", "rules ExpandSiLU and FoldSiLU undo each other", "the cycle fires ExpandSiLU, FoldSiLU"}},
		{"one rule", []*Rule{swap}, []string{"cycle in layer 3 (mlp)", "rule Swap undoes itself", "after firing 2"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := build(t, func(b *ir.Builder) {
				x := b.Input("x", ir.T(ir.BF16, 32, 64))
				y := b.Input("y", ir.T(ir.BF16, 32, 64))
				b.Region("mlp", 3)
				b.Output(b.SiLU(x), b.Mul(x, y))
			})
			_, err := mustEngine(t, tc.rules...).Run(g)
			if err == nil {
				t.Fatal("a cycle ran without error")
			}
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not mention %q", err, want)
				}
			}
		})
	}
}

// TestCycleDetectionLongRegion: in a region of 201 ops the fingerprints
// are taken every third firing (201 / cycleProbes);
// after 200 one-shot firings (exp => sigmoid) a rule that undoes itself
// (mul(a, b) => mul(b, a)) is still reported as a cycle, between two
// sampled firings, not as a missing fixpoint.
func TestCycleDetectionLongRegion(t *testing.T) {
	swap := &Rule{
		Name:    "Swap",
		Rewrite: "mul(a, b) => mul(b, a)",
		Pattern: Op(ir.OpMul, Var("a"), Var("b")),
		Build: func(b *Builder, m *Match) ([]*ir.Value, error) {
			v, err := b.Emit1(ir.OpMul, []*ir.Value{m.Value("b"), m.Value("a")}, nil)
			return []*ir.Value{v}, err
		},
	}
	once := &Rule{
		Name:    "ExpToSigmoid",
		Rewrite: "exp(x) => sigmoid(x)",
		Pattern: Op(ir.OpExp, Var("x")),
		Build: func(b *Builder, m *Match) ([]*ir.Value, error) {
			v, err := b.Emit1(ir.OpSigmoid, []*ir.Value{m.Value("x")}, nil)
			return []*ir.Value{v}, err
		},
	}
	g := build(t, func(b *ir.Builder) {
		x := b.Input("x", ir.T(ir.BF16, 32, 64))
		y := b.Input("y", ir.T(ir.BF16, 32, 64))
		b.Region("mlp", 3)
		var outs []*ir.Value
		for range 200 {
			outs = append(outs, b.Exp(x))
		}
		b.Output(append(outs, b.Mul(x, y))...)
	})
	_, err := mustEngine(t, once, swap).Run(g)
	if err == nil {
		t.Fatal("a cycle ran without error")
	}
	for _, want := range []string{"cycle in layer 3 (mlp)", "rule Swap undoes itself", "after firing 207 the region is back to its state after firing 201"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

func TestFiringBound(t *testing.T) {
	// silu(x) => silu(mul_scalar(x, 1)) creates a new match every time
	// without ever repeating a state.
	grow := &Rule{
		Name:    "Grow",
		Rewrite: "silu(x) => silu(mul_scalar(x, 1))",
		Pattern: Op(ir.OpSiLU, Var("x")),
		Build: func(b *Builder, m *Match) ([]*ir.Value, error) {
			s, err := b.Emit1(ir.OpMulScalar, []*ir.Value{m.Value("x")}, ir.Attrs{"value": 1.0})
			if err != nil {
				return nil, err
			}
			v, err := b.Emit1(ir.OpSiLU, []*ir.Value{s}, nil)
			return []*ir.Value{v}, err
		},
	}
	g := build(t, func(b *ir.Builder) {
		x := b.Input("x", ir.T(ir.BF16, 32, 64))
		b.Region("mlp", 0)
		b.Output(b.SiLU(x))
	})
	e := mustEngine(t, grow)
	e.MaxFirings = 10
	_, err := e.Run(g)
	if err == nil || !strings.Contains(err.Error(), "no fixpoint") || !strings.Contains(err.Error(), "Grow") || !strings.Contains(err.Error(), "after 10 firings") {
		t.Fatalf("got %v, want a no-fixpoint error naming Grow after 10 firings", err)
	}
}

func TestFiringCountsPerLayer(t *testing.T) {
	// Layer i holds i+1 mul(a, a); the prologue holds one more.
	g := build(t, func(b *ir.Builder) {
		x := b.Input("x", ir.T(ir.BF16, 32, 64))
		b.Region("embed", -1)
		h := b.Mul(x, x)
		for i := 0; i < 3; i++ {
			b.Region("mlp", i)
			for j := 0; j <= i; j++ {
				h = b.Mul(h, h)
			}
		}
		b.Output(h)
	})
	st, err := mustEngine(t, mulSelf(), addZero()).Run(g)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[int]int{0: 1, 1: 2, 2: 3}, st.ByLayer("MulSelf")); diff != "" {
		t.Errorf("ByLayer (-want +got):\n%s", diff)
	}
	if got := st.Count("MulSelf", g.Regions[0]); got != 1 {
		t.Errorf("prologue count %d, want 1", got)
	}
	if got := st.Total("MulSelf"); got != 7 {
		t.Errorf("total %d, want 7", got)
	}
	if got := st.Total("AddZero"); got != 0 {
		t.Errorf("AddZero total %d, want 0", got)
	}
	var got []string
	for _, f := range st.Firings() {
		got = append(got, fmt.Sprintf("%s:%s=%d", f.Region.Label(), f.Rule, f.Count))
	}
	want := []string{"embed:MulSelf=1", "layer 0 (mlp):MulSelf=1", "layer 1 (mlp):MulSelf=2", "layer 2 (mlp):MulSelf=3"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Firings (-want +got):\n%s", diff)
	}
	if want := "layer 2 (mlp): MulSelf=3, erased 3\n"; !strings.Contains(st.String(), want) {
		t.Errorf("String() = %q, want a line %q", st.String(), want)
	}
}

func TestDeadOpsErased(t *testing.T) {
	var s *ir.Value
	g := build(t, func(b *ir.Builder) {
		x := b.Input("x", ir.T(ir.BF16, 32, 64))
		s = b.State("s", ir.T(ir.BF16, 32, 64))
		b.Region("mlp", 0)
		b.Exp(b.Sigmoid(x)) // dead chain
		b.UpdateState(s, b.SiLU(x))
		b.Output(b.Mul(x, x))
	})
	st, err := mustEngine(t, mulSelf()).Run(g)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"silu", "square"}, opNames(g.Regions[0])); diff != "" {
		t.Errorf("ops (-want +got):\n%s", diff)
	}
	if got := st.Erased(g.Regions[0]); got != 3 {
		t.Errorf("erased %d ops, want 3 (sigmoid, exp, mul)", got)
	}
	if got := expr(g.StateUpdates[s]); got != "silu(x)" {
		t.Errorf("state update %s, want silu(x)", got)
	}
	if err := ir.Verify(g); err != nil {
		t.Fatal(err)
	}
}

func TestEraseDeadOpsAcrossRegions(t *testing.T) {
	g := build(t, func(b *ir.Builder) {
		x := b.Input("x", ir.T(ir.BF16, 32, 64))
		b.Region("mlp", 0)
		e := b.Exp(x)
		b.Region("mlp", 1)
		b.Sigmoid(e) // dead, and makes exp dead
		b.Output(b.SiLU(x))
	})
	if n := EraseDeadOps(g); n != 2 {
		t.Errorf("erased %d, want 2", n)
	}
	if len(g.Regions[0].Ops) != 0 {
		t.Errorf("layer 0 still has %v", opNames(g.Regions[0]))
	}
}

func TestOneOfAndOpBinding(t *testing.T) {
	// sigmoid(square(x)) or sigmoid(mul(x, x)) => silu(x), reading the inner op by name.
	var inner []string
	r := &Rule{
		Name:    "SigSq",
		Rewrite: "sigmoid(x^2) => silu(x)",
		Pattern: Op(ir.OpSigmoid, OneOf(Op(ir.OpSquare, Var("x")).As("sq"), Op(ir.OpMul, Var("x"), Var("x")).As("sq"))),
		Build: func(b *Builder, m *Match) ([]*ir.Value, error) {
			inner = append(inner, m.Op("sq").Name())
			if !m.Interior(m.Op("sq").Result()) || m.Interior(m.Value("x")) {
				return nil, fmt.Errorf("Interior is wrong")
			}
			v, err := b.Emit1(ir.OpSiLU, []*ir.Value{m.Value("x")}, nil)
			return []*ir.Value{v}, err
		},
	}
	g := build(t, func(b *ir.Builder) {
		x := b.Input("x", ir.T(ir.BF16, 32, 64))
		y := b.Input("y", ir.T(ir.BF16, 32, 64))
		b.Region("mlp", 0)
		b.Output(b.Sigmoid(b.Square(x)), b.Sigmoid(b.Mul(x, x)), b.Sigmoid(b.Mul(x, y)))
	})
	if _, err := mustEngine(t, r).Run(g); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"silu(x)", "silu(x)", "sigmoid(mul(x, y))"}, outputs(g)); diff != "" {
		t.Errorf("outputs (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"square", "mul"}, inner); diff != "" {
		t.Errorf("bound ops (-want +got):\n%s", diff)
	}
}

func TestBuildErrors(t *testing.T) {
	tests := []struct {
		name  string
		build func(b *Builder, m *Match) ([]*ir.Value, error)
		want  string
	}{
		{"wrong shape", func(b *Builder, m *Match) ([]*ir.Value, error) {
			v, err := b.Emit1(ir.OpMean, []*ir.Value{m.Value("x")}, nil)
			return []*ir.Value{v}, err
		}, "replacement 0 is [32,1] bf16 but the result it replaces is [32,64] bf16"},
		{"count", func(b *Builder, m *Match) ([]*ir.Value, error) { return nil, nil }, "returned 0 replacement values for 1 root results"},
		{"own result", func(b *Builder, m *Match) ([]*ir.Value, error) { return m.Root.Results, nil }, "root's own result"},
		{"later value", func(b *Builder, m *Match) ([]*ir.Value, error) {
			later := m.Graph.Regions[0].Ops[1].Result()
			_, err := b.Emit1(ir.OpSiLU, []*ir.Value{later}, nil)
			return nil, err
		}, "is not defined before op mul"},
		{"type error", func(b *Builder, m *Match) ([]*ir.Value, error) {
			_, err := b.Emit1(ir.OpMatmul, []*ir.Value{m.Value("x"), m.Value("x")}, nil)
			return nil, err
		}, "rule matmul-inner"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := build(t, func(b *ir.Builder) {
				x := b.Input("x", ir.T(ir.BF16, 32, 64))
				b.Region("mlp", 0)
				b.Output(b.Mul(x, x), b.Exp(x))
			})
			r := mulSelf()
			r.Build = tc.build
			_, err := mustEngine(t, r).Run(g)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "rule MulSelf at op mul") {
				t.Fatalf("got %v, want error naming rule MulSelf and containing %q", err, tc.want)
			}
		})
	}
}

func TestRuleValidation(t *testing.T) {
	ok := mulSelf()
	tests := []struct {
		name string
		edit func(r *Rule)
		want string
	}{
		{"no name", func(r *Rule) { r.Name = "" }, "has no name"},
		{"no arrow", func(r *Rule) { r.Rewrite = "mul(x, x) to square(x)" }, "before => after"},
		{"two lines", func(r *Rule) { r.Rewrite = "mul(x, x)\n=> square(x)" }, "one line"},
		{"var root", func(r *Rule) { r.Pattern = Var("x") }, "root must be an Op pattern"},
		{"operand count", func(r *Rule) { r.Pattern = Op(ir.OpMul, Var("x")) }, "mul takes 2"},
		{"empty var", func(r *Rule) { r.Pattern = Op(ir.OpExp, Var("")) }, "empty name"},
		{"no build", func(r *Rule) { r.Build = nil }, "no Build"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := mulSelf()
			tc.edit(r)
			_, err := NewEngine(ok, r)
			if tc.name != "no name" && (err == nil || !strings.Contains(err.Error(), "MulSelf")) {
				t.Errorf("error %v does not name the rule", err)
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
	if _, err := NewEngine(mulSelf(), mulSelf()); err == nil || !strings.Contains(err.Error(), "two rules named MulSelf") {
		t.Errorf("duplicate names: got %v", err)
	}
}

func TestPatternString(t *testing.T) {
	p := Op(ir.OpMul, Op(ir.OpSquare, Var("x")).As("sq"), OneOf(Any(), Var("y")))
	if got, want := p.String(), "mul(square($x)@sq, oneof(_, $y))"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	r := mulSelf()
	if r.Before() != "mul(x, x)" || r.AfterHalf() != "square(x)" {
		t.Errorf("Before/AfterHalf = %q, %q", r.Before(), r.AfterHalf())
	}
}

// TestRulePanicIsAnError: a rule whose side condition or builder panics
// stops the run with one error naming the rule, the phase and the op, not
// a stack trace.
func TestRulePanicIsAnError(t *testing.T) {
	for _, phase := range []string{"side condition", "builder"} {
		t.Run(phase, func(t *testing.T) {
			b := ir.NewBuilder("p")
			b.Region("mlp", 0)
			x := b.Input("x", ir.T(ir.BF16, 32, 32))
			b.Output(b.Exp(x))
			g, err := b.Finish()
			if err != nil {
				t.Fatal(err)
			}
			r := &Rule{Name: "Boom", Rewrite: "exp(x) => boom", Pattern: Op(ir.OpExp, Var("x")),
				Build: func(*Builder, *Match) ([]*ir.Value, error) { panic("builder bug") }}
			if phase == "side condition" {
				r.Where = func(*Match) bool { panic("side condition bug") }
			}
			e, err := NewEngine(r)
			if err != nil {
				t.Fatal(err)
			}
			_, err = e.Run(g)
			if err == nil || !strings.Contains(err.Error(), "rule Boom panicked in its "+phase) || !strings.Contains(err.Error(), "op exp") {
				t.Fatalf("err = %v", err)
			}
		})
	}
}
