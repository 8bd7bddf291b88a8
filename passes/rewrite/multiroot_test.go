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

// TestMultiRootEarlyUseBlocksMatch: a reader of the first root between the
// two roots would precede the replacement, so the match is refused.
func TestMultiRootEarlyUseBlocksMatch(t *testing.T) {
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
	if st.Total("CSEExp") != 0 {
		t.Errorf("fired across an early use")
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
