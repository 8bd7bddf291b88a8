package rewrite

import (
	"fmt"

	"github.com/tcc-dev/tcc/ir"
)

// Builder creates a rule's replacement ops. New ops go into the root's
// region just before the root, in the order they are emitted; their result
// types come from ir.InferTypes. Nothing is inserted if Build fails.
type Builder struct {
	g         *ir.Graph
	rule      *Rule
	root      *ir.Op
	available func(*ir.Value) bool
	ops       []*ir.Op
}

// Graph is the graph being rewritten (read only for rules).
func (b *Builder) Graph() *ir.Graph { return b.g }

// Emit creates an op of kind with the given operands and attributes and
// returns it; its Rule field names the rule. Operands must be defined
// before the matched root or be results of ops emitted earlier by this
// builder.
func (b *Builder) Emit(kind ir.OpKind, operands []*ir.Value, attrs ir.Attrs) (*ir.Op, error) {
	if attrs == nil {
		attrs = ir.Attrs{}
	}
	for i, v := range operands {
		if v == nil {
			return nil, fmt.Errorf("new %s: operand %d is nil", kind, i)
		}
		if !b.available(v) && !b.emitted(v) {
			return nil, fmt.Errorf("new %s: operand %d (%s) is not defined before %s", kind, i, v, b.root.Where())
		}
	}
	types, err := ir.InferTypes(kind, operands, attrs)
	if err != nil {
		return nil, fmt.Errorf("new op: %w", err)
	}
	op := &ir.Op{ID: b.g.NewOpID(), Kind: kind, Operands: append([]*ir.Value(nil), operands...), Attrs: attrs, Region: b.root.Region, Rule: b.rule.Name}
	for _, t := range types {
		r := b.g.NewValue(ir.KindResult, "", t)
		r.Def = op
		op.Results = append(op.Results, r)
	}
	b.ops = append(b.ops, op)
	return op, nil
}

// Emit1 is Emit for single-result ops; it returns the result.
func (b *Builder) Emit1(kind ir.OpKind, operands []*ir.Value, attrs ir.Attrs) (*ir.Value, error) {
	op, err := b.Emit(kind, operands, attrs)
	if err != nil {
		return nil, err
	}
	if len(op.Results) != 1 {
		return nil, fmt.Errorf("new %s has %d results; use Emit", kind, len(op.Results))
	}
	return op.Results[0], nil
}

func (b *Builder) emitted(v *ir.Value) bool {
	for _, op := range b.ops {
		if v.Def == op {
			return true
		}
	}
	return false
}
