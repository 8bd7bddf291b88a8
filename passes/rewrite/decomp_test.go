package rewrite

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tcc-dev/tcc/ir"
)

// toyFused fuses mul($x, add($w, $z)) into an all_reduce_add (a fused op)
// whose operands the caller picks. It is numerically meaningless; it
// exercises how decompositions are recorded.
func toyFused(operands func(m *Match) []*ir.Value) *Rule {
	return &Rule{
		Name:    "ToyFused",
		Rewrite: "mul(x, add(w, z)) => all_reduce_add(x, w)",
		Pattern: Op(ir.OpMul, Var("x"), Op(ir.OpAdd, Var("w"), Var("z"))),
		Build: func(b *Builder, m *Match) ([]*ir.Value, error) {
			v, err := b.Emit1(ir.OpAllReduceAdd, operands(m), ir.Attrs{"devices": 1})
			return []*ir.Value{v}, err
		},
	}
}

func toyGraph(t *testing.T) *ir.Graph {
	return build(t, func(b *ir.Builder) {
		x := b.Input("x", ir.T(ir.BF16, 32, 64))
		w := b.Weight("w", ir.T(ir.BF16, 32, 64))
		b.Region("norm", 0)
		b.Output(b.Mul(x, b.Add(w, w)))
	})
}

func TestDecompositionRecorded(t *testing.T) {
	g := toyGraph(t)
	x, w := g.Inputs[0], g.Weights[0]
	rule := toyFused(func(m *Match) []*ir.Value { return []*ir.Value{m.Value("x"), m.Value("w")} })
	if _, err := mustEngine(t, rule).Run(g); err != nil {
		t.Fatal(err)
	}
	if err := ir.Verify(g); err != nil {
		t.Fatal(err)
	}
	ops := g.Regions[0].Ops
	if len(ops) != 1 || ops[0].Kind != ir.OpAllReduceAdd {
		t.Fatalf("ops %v, want one all_reduce_add", opNames(g.Regions[0]))
	}
	f := ops[0]
	if f.Rule != "ToyFused" {
		t.Errorf("Rule = %q, want ToyFused", f.Rule)
	}
	d := f.Decomp
	if d == nil {
		t.Fatal("no decomposition")
	}
	var got []string
	for _, ph := range d.Inputs {
		got = append(got, ph.Name+" "+ph.Type.String())
	}
	want := []string{"x " + x.Type.String(), "residual " + w.Type.String()} // named after all_reduce_add's operands
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("decomposition inputs (-want +got):\n%s", diff)
	}
	// add(w, w) reads placeholder 1 twice; mul reads placeholder 0 and the add.
	if len(d.Ops) != 2 || d.Ops[0].Kind != ir.OpAdd || d.Ops[1].Kind != ir.OpMul {
		t.Fatalf("decomposition ops %v", d.Ops)
	}
	if d.Ops[0].Operands[0] != d.Inputs[1] || d.Ops[0].Operands[1] != d.Inputs[1] {
		t.Errorf("add reads %v, want placeholder w twice", d.Ops[0].Operands)
	}
	if d.Ops[1].Operands[0] != d.Inputs[0] || d.Ops[1].Operands[1] != d.Ops[0].Result() {
		t.Errorf("mul reads %v, want placeholder x and the cloned add", d.Ops[1].Operands)
	}
	if len(d.Outputs) != 1 || d.Outputs[0] != d.Ops[1].Result() {
		t.Errorf("outputs %v, want the cloned mul's result", d.Outputs)
	}
	for _, c := range d.Ops {
		if c.Region != f.Region {
			t.Errorf("decomposition op %s is not in the fused op's region", c.Name())
		}
	}
	var ids []int
	for _, ph := range d.Inputs {
		ids = append(ids, ph.ID)
	}
	for _, c := range d.Ops {
		ids = append(ids, c.ID, c.Result().ID)
	}
	if diff := cmp.Diff([]int{0, 1, 2, 3, 4, 5}, ids); diff != "" {
		t.Errorf("decomposition IDs are not local and dense (-want +got):\n%s", diff)
	}

	fused, decomposed, err := EquivalencePair(f)
	if err != nil {
		t.Fatal(err)
	}
	if n := fused.NumOps(); n != 1 || fused.Ops()[0].Kind != ir.OpAllReduceAdd || fused.Ops()[0].Decomp != d {
		t.Errorf("fused graph: %d ops", n)
	}
	if diff := cmp.Diff([]string{"add(residual, residual)", "mul(x, add(residual, residual))"}, []string{expr(decomposed.Ops()[0].Result()), expr(decomposed.Outputs[0])}); diff != "" {
		t.Errorf("decomposed graph (-want +got):\n%s", diff)
	}
	if len(fused.Inputs) != 2 || len(decomposed.Inputs) != 2 || !fused.Inputs[1].Type.Equal(decomposed.Inputs[1].Type) {
		t.Errorf("inputs do not correspond: %v vs %v", fused.Inputs, decomposed.Inputs)
	}
}

func TestDecompositionNeedsAllInputs(t *testing.T) {
	g := build(t, func(b *ir.Builder) {
		x := b.Input("x", ir.T(ir.BF16, 32, 64))
		w := b.Weight("w", ir.T(ir.BF16, 32, 64))
		z := b.Weight("z", ir.T(ir.BF16, 32, 64))
		b.Region("norm", 0)
		b.Output(b.Mul(x, b.Add(w, z)))
	})
	rule := toyFused(func(m *Match) []*ir.Value { return []*ir.Value{m.Value("x"), m.Value("w")} })
	_, err := mustEngine(t, rule).Run(g)
	if err == nil || !strings.Contains(err.Error(), "all_reduce_add does not take") || !strings.Contains(err.Error(), "ToyFused") {
		t.Fatalf("got %v, want an error saying the fused op lacks z", err)
	}
}

// TestDecompositionSetByRuleKept: a fused op whose Decomp the rule's Build
// set itself keeps it, where the engine's own (the matched ops) could not be
// recorded (the op does not take z, as in TestDecompositionNeedsAllInputs).
func TestDecompositionSetByRuleKept(t *testing.T) {
	g := build(t, func(b *ir.Builder) {
		x := b.Input("x", ir.T(ir.BF16, 32, 64))
		w := b.Weight("w", ir.T(ir.BF16, 32, 64))
		z := b.Weight("z", ir.T(ir.BF16, 32, 64))
		b.Region("norm", 0)
		b.Output(b.Mul(x, b.Add(w, z)))
	})
	own := &ir.Decomposition{}
	rule := toyFused(func(m *Match) []*ir.Value { return []*ir.Value{m.Value("x"), m.Value("w")} })
	build := rule.Build
	rule.Build = func(b *Builder, m *Match) ([]*ir.Value, error) {
		vs, err := build(b, m)
		if err == nil {
			vs[0].Def.Decomp = own
		}
		return vs, err
	}
	if _, err := mustEngine(t, rule).Run(g); err != nil {
		t.Fatalf("run: %v; want the rule's own decomposition kept", err)
	}
	ops := g.Regions[0].Ops
	if len(ops) != 1 || ops[0].Decomp != own {
		t.Fatalf("ops %v, want one all_reduce_add with the rule's decomposition", opNames(g.Regions[0]))
	}
}

func TestEquivalencePairNeedsDecomposition(t *testing.T) {
	g := build(t, func(b *ir.Builder) {
		x := b.Input("x", ir.T(ir.BF16, 32, 64))
		w := b.Weight("w", ir.T(ir.BF16, 32, 64))
		b.Region("norm", 0)
		b.Output(b.AllReduceAdd(x, w, 1))
	})
	if _, _, err := EquivalencePair(g.Ops()[0]); err == nil || !strings.Contains(err.Error(), "no decomposition") {
		t.Fatalf("got %v", err)
	}
}
