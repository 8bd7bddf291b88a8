package rewrite

import (
	"strings"

	"github.com/tcc-dev/tcc/ir"
)

// Describe writes pattern p as the before half of a rule's summary:
// variables by name, alternatives as "a | b", op names as the op table
// spells them; Op names given with As are dropped. For example
// rw.Op(ir.OpAdd, rw.Var("r"), rw.Op(ir.OpMatmul, rw.Var("a"), rw.Var("w")).As("mm"))
// is "add(r, matmul(a, w))".
func Describe(p *Pattern) string {
	var sb strings.Builder
	p.write(&sb, true)
	return sb.String()
}

// BuildFunc is the type of Rule.Build.
type BuildFunc = func(b *Builder, m *Match) ([]*ir.Value, error)

// Emit returns a Build that replaces the root's one result with one op of
// kind whose operands are the values bound to vars, in order, and whose
// attributes are attrs(m) (attrs nil: none).
func Emit(kind ir.OpKind, attrs func(*Match) ir.Attrs, vars ...string) BuildFunc {
	return func(b *Builder, m *Match) ([]*ir.Value, error) {
		ops := make([]*ir.Value, len(vars))
		for i, n := range vars {
			ops[i] = m.Value(n)
		}
		var a ir.Attrs
		if attrs != nil {
			a = attrs(m)
		}
		v, err := b.Emit1(kind, ops, a)
		return []*ir.Value{v}, err
	}
}

// AttrsOf returns the attributes names of the op bound with As(op), for
// Emit.
func AttrsOf(op string, names ...string) func(*Match) ir.Attrs {
	return func(m *Match) ir.Attrs {
		src, a := m.Op(op), ir.Attrs{}
		for _, n := range names {
			a[n] = src.Attrs[n]
		}
		return a
	}
}

// RootShape returns the attribute {name: shape of the root's result}, for
// Emit.
func RootShape(name string) func(*Match) ir.Attrs {
	return func(m *Match) ir.Attrs { return ir.Attrs{name: []int(m.Root.Result().Type.Shape.Clone())} }
}
