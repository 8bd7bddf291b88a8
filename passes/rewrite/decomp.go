package rewrite

import (
	"fmt"

	"github.com/tcc-dev/tcc/ir"
)

// decompose records the matched ops as the decomposition of fused. Inputs
// are fresh placeholder values, one per operand of fused, bound
// positionally, named after the op table's operand and of the operand's
// kind (input, weight, state, or result for a computed operand); the matched ops are cloned, in program
// order, with their operands rewired to the placeholders or to earlier
// clones, and keep the fused op's region; Outputs[j] is the clone of the
// root result that fused's result j replaces. IDs inside the decomposition
// are local to it (as in ir's text form): placeholders 0..n-1, then each
// op followed by its results.
func decompose(fused *ir.Op, m *Match, repl []*ir.Value) (*ir.Decomposition, error) {
	return decomposeOps(fused, m.Ops, m.RootResults(), repl)
}

// Decompose is decompose for a rewrite outside the engine whose fused op
// takes over the result values of ops (in program order) rather than
// replacing them: fused.Results must be results of ops, and each becomes
// the decomposition output of the clone that produced it.
func Decompose(fused *ir.Op, ops []*ir.Op) (*ir.Decomposition, error) {
	return decomposeOps(fused, ops, fused.Results, fused.Results)
}

// decomposeOps is decompose over ops, where repl[i] replaces olds[i].
func decomposeOps(fused *ir.Op, ops []*ir.Op, olds, repl []*ir.Value) (*ir.Decomposition, error) {
	info := fused.Info()
	d := &ir.Decomposition{}
	mapped := map[*ir.Value]*ir.Value{}
	id := 0
	next := func() int { id++; return id - 1 }
	for i, v := range fused.Operands {
		name := info.Operands[min(i, len(info.Operands)-1)]
		ph := &ir.Value{ID: next(), Name: name, Kind: v.Kind, Type: v.Type}
		d.Inputs = append(d.Inputs, ph)
		if _, dup := mapped[v]; !dup {
			mapped[v] = ph
		}
	}
	for _, op := range ops {
		c := &ir.Op{ID: next(), Kind: op.Kind, Attrs: cloneAttrs(op.Attrs), Region: fused.Region, Decomp: op.Decomp, Rule: op.Rule}
		for i, v := range op.Operands {
			mv, ok := mapped[v]
			if !ok {
				return nil, fmt.Errorf("fused %s does not take %s (operand %d of matched %s) as an operand, so its decomposition cannot be recorded", fused.Name(), v, i, op.Where())
			}
			c.Operands = append(c.Operands, mv)
		}
		for _, r := range op.Results {
			cr := &ir.Value{ID: next(), Name: r.Name, Kind: ir.KindResult, Type: r.Type, Def: c}
			c.Results = append(c.Results, cr)
			mapped[r] = cr
		}
		d.Ops = append(d.Ops, c)
	}
	for j, r := range fused.Results {
		found := false
		for i, rv := range repl {
			if rv == r {
				d.Outputs = append(d.Outputs, mapped[olds[i]])
				found = true
				break
			}
		}
		if !found {
			return nil, fmt.Errorf("result %d of fused %s does not directly replace a result of a matched root (%s), so its decomposition has no output", j, fused.Name(), fused.Where())
		}
	}
	return d, nil
}

func cloneAttrs(a ir.Attrs) ir.Attrs {
	c := make(ir.Attrs, len(a))
	for k, v := range a {
		if s, ok := v.([]int); ok {
			v = append([]int(nil), s...)
		}
		c[k] = v
	}
	return c
}

// EquivalencePair builds two standalone graphs for checking a fused op
// against the decomposition it replaced: fused holds just op, decomposed
// holds the cloned decomposition ops. Both have one graph input
// (ir.KindInput, whatever the operand's kind) per operand of op, in operand
// order, with the operand's type and the op table's operand name,
// and one output per result of op, so fused.Inputs[i] and
// decomposed.Inputs[i] take the same data (a value op reads as several
// operands is read through the first one's input in both). It fails if op has no
// decomposition or the decomposition does not verify.
func EquivalencePair(op *ir.Op) (fused, decomposed *ir.Graph, err error) {
	d := op.Decomp
	if d == nil {
		return nil, nil, fmt.Errorf("rewrite: %s has no decomposition", op.Where())
	}
	if len(d.Inputs) != len(op.Operands) || len(d.Outputs) != len(op.Results) {
		return nil, nil, fmt.Errorf("rewrite: %s: decomposition has %d inputs/%d outputs for %d operands/%d results", op.Where(), len(d.Inputs), len(d.Outputs), len(op.Operands), len(op.Results))
	}
	label := op.Name()
	if op.Rule != "" {
		label = op.Rule
	}
	region := ir.RegionKind("main")
	if op.Region != nil {
		region = op.Region.Kind
	}

	fb := ir.NewBuilder(label + ".fused")
	// A value op reads as several operands is read through the first
	// one's input, as the decomposition's ops read the first placeholder
	// bound to it (the later inputs stay unread in both graphs).
	var reads []*ir.Value
	first := map[*ir.Value]*ir.Value{}
	for i, v := range op.Operands {
		in := fb.Input(d.Inputs[i].Name, v.Type)
		if f, ok := first[v]; ok {
			in = f
		} else {
			first[v] = in
		}
		reads = append(reads, in)
	}
	fb.Region(region, -1)
	fop := fb.G.Regions[0]
	fb.Output(fb.Emit(op.Kind, reads, cloneAttrs(op.Attrs))...)
	fop.Ops[0].Decomp, fop.Ops[0].Rule = d, op.Rule
	if fused, err = fb.Finish(); err != nil {
		return nil, nil, fmt.Errorf("rewrite: fused graph of %s: %w", op.Where(), err)
	}

	db := ir.NewBuilder(label + ".decomposed")
	mapped := map[*ir.Value]*ir.Value{}
	for _, ph := range d.Inputs {
		mapped[ph] = db.Input(ph.Name, ph.Type)
	}
	db.Region(region, -1)
	for _, c := range d.Ops {
		var operands []*ir.Value
		for _, v := range c.Operands {
			mv, ok := mapped[v]
			if !ok {
				return nil, nil, fmt.Errorf("rewrite: decomposition of %s: %s reads %s before it is defined", op.Where(), c.Name(), v)
			}
			operands = append(operands, mv)
		}
		res := db.Emit(c.Kind, operands, cloneAttrs(c.Attrs))
		for i, r := range c.Results {
			if i < len(res) {
				mapped[r] = res[i]
			}
		}
	}
	for _, o := range d.Outputs {
		mv, ok := mapped[o]
		if !ok {
			return nil, nil, fmt.Errorf("rewrite: decomposition of %s: output %s is not produced by its ops", op.Where(), o)
		}
		db.Output(mv)
	}
	if decomposed, err = db.Finish(); err != nil {
		return nil, nil, fmt.Errorf("rewrite: decomposed graph of %s: %w", op.Where(), err)
	}
	return fused, decomposed, nil
}
