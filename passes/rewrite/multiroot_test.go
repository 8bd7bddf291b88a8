package rewrite

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tcc-dev/tcc/ir"
)

// cseExp: two exp(x) of one x (two roots) => one exp(x) replacing both.
func cseExp() *Rule {
	return &Rule{
		Name:    "CSEExp",
		Rewrite: "exp(x), exp(x) => exp(x)",
		Pattern: Op(ir.OpExp, Var("x")),
		Extra:   []*Pattern{Op(ir.OpExp, Var("x"))},
		Build: func(b *Builder, m *Match) ([]*ir.Value, error) {
			v, err := b.Emit1(ir.OpExp, []*ir.Value{m.Value("x")}, nil)
			return []*ir.Value{v, v}, err
		},
	}
}

func TestMultiRootReplacesEveryRoot(t *testing.T) {
	g := build(t, func(b *ir.Builder) {
		x := b.Input("x", ir.T(ir.BF16, 32, 32))
		y := b.Input("y", ir.T(ir.BF16, 32, 32))
		b.Region("mlp", 0)
		a := b.Exp(x)
		c := b.Exp(y) // different operand: must not pair with a
		d := b.Exp(x)
		b.Output(b.Add(a, d), c)
	})
	st, err := mustEngine(t, cseExp()).Run(g)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"add(exp(x), exp(x))", "exp(y)"}, outputs(g)); diff != "" {
		t.Errorf("outputs (-want +got):\n%s", diff)
	}
	add := g.Outputs[0].Def
	if add.Operands[0] != add.Operands[1] {
		t.Errorf("both roots should be replaced by one value: %v", add.Operands)
	}
	if diff := cmp.Diff([]string{"exp", "exp", "add"}, opNames(g.Regions[0])); diff != "" {
		t.Errorf("ops (-want +got):\n%s", diff)
	}
	if st.Total("CSEExp") != 1 {
		t.Errorf("fired %d times, want 1", st.Total("CSEExp"))
	}
	if err := ir.Verify(g); err != nil {
		t.Fatal(err)
	}
}

// TestMultiRootEarlyUseMovesInsertion: a reader of the first root that
// precedes the second root gets the replacement inserted before it.
func TestMultiRootEarlyUseMovesInsertion(t *testing.T) {
	g := build(t, func(b *ir.Builder) {
		x := b.Input("x", ir.T(ir.BF16, 32, 32))
		b.Region("mlp", 0)
		a := b.Exp(x)
		s := b.SiLU(a)
		d := b.Exp(x)
		b.Output(s, d)
	})
	st, err := mustEngine(t, cseExp()).Run(g)
	if err != nil {
		t.Fatal(err)
	}
	if st.Total("CSEExp") != 1 {
		t.Errorf("fired %d times, want 1", st.Total("CSEExp"))
	}
	if diff := cmp.Diff([]string{"exp", "silu"}, opNames(g.Regions[0])); diff != "" {
		t.Errorf("ops (-want +got):\n%s", diff)
	}
	if err := ir.Verify(g); err != nil {
		t.Fatal(err)
	}
}

// siluExpPair: silu(a) and exp(b) (two roots) => fresh silu(a), exp(b).
func siluExpPair() *Rule {
	return &Rule{
		Name:    "SiluExpPair",
		Rewrite: "silu(a), exp(b) => silu(a), exp(b)",
		Pattern: Op(ir.OpSiLU, Var("a")),
		Extra:   []*Pattern{Op(ir.OpExp, Var("b"))},
		Build: func(b *Builder, m *Match) ([]*ir.Value, error) {
			s, err := b.Emit1(ir.OpSiLU, []*ir.Value{m.Value("a")}, nil)
			if err != nil {
				return nil, err
			}
			e, err := b.Emit1(ir.OpExp, []*ir.Value{m.Value("b")}, nil)
			return []*ir.Value{s, e}, err
		},
	}
}

// TestMultiRootLateVariableBlocksMatch: the replacement would have to go
// before an early reader of the first root, but a variable of the second
// root is defined after that reader, so the match is refused.
func TestMultiRootLateVariableBlocksMatch(t *testing.T) {
	g := build(t, func(b *ir.Builder) {
		x := b.Input("x", ir.T(ir.BF16, 32, 32))
		b.Region("mlp", 0)
		p := b.SiLU(x)
		u := b.Sigmoid(p)
		y := b.Square(x)
		q := b.Exp(y)
		b.Output(u, q)
	})
	st, err := mustEngine(t, siluExpPair()).Run(g)
	if err != nil {
		t.Fatal(err)
	}
	if st.Total("SiluExpPair") != 0 {
		t.Errorf("fired although exp's operand is defined after silu's reader")
	}
	if err := ir.Verify(g); err != nil {
		t.Fatal(err)
	}
}

func TestExtraPatternValidated(t *testing.T) {
	r := cseExp()
	r.Extra = []*Pattern{Var("x")}
	if _, err := NewEngine(r); err == nil {
		t.Error("a Var extra root was accepted")
	}
}
