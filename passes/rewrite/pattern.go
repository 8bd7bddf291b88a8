package rewrite

import (
	"fmt"
	"strings"

	"github.com/tcc-dev/tcc/ir"
)

type patternKind uint8

const (
	patOp    patternKind = iota // matches a value defined by an op of a kind
	patVar                      // binds a value to a name
	patAny                      // matches any value
	patOneOf                    // matches if any alternative matches
)

// Pattern is a tree over ops that a rule matches against the value a root
// op produces. Build patterns with Op, Var, Any and OneOf.
type Pattern struct {
	kind     patternKind
	op       ir.OpKind
	name     string // variable name (Var) or op binding name (Op.As)
	operands []*Pattern
}

// Op matches a value produced by an op of the given kind in the root op's
// region whose operands match the operand patterns, one per operand. For
// commutative kinds (see Commutative) both operand orders are tried.
func Op(kind ir.OpKind, operands ...*Pattern) *Pattern {
	return &Pattern{kind: patOp, op: kind, operands: operands}
}

// Var matches any value and binds it to name. A name used more than once in
// a pattern matches only if every occurrence binds the same value.
func Var(name string) *Pattern { return &Pattern{kind: patVar, name: name} }

// Any matches any value without binding it.
func Any() *Pattern { return &Pattern{kind: patAny} }

// OneOf matches if any of the alternatives matches; they are tried in order.
// Variables bound inside the chosen alternative stay bound.
func OneOf(alts ...*Pattern) *Pattern { return &Pattern{kind: patOneOf, operands: alts} }

// As names the op an Op pattern matches, so side conditions and builders can
// read its attributes with Match.Op(name). Like a variable, a name used twice
// must bind the same op. It returns p.
func (p *Pattern) As(name string) *Pattern {
	if p.kind == patOp {
		p.name = name
	}
	return p
}

// commutative lists the binary ops whose operands may be swapped. The op
// table does not carry this property yet; it lives here until it does.
var commutative = map[ir.OpKind]bool{ir.OpAdd: true, ir.OpMul: true}

// Commutative reports whether the matcher tries both operand orders of kind.
func Commutative(kind ir.OpKind) bool { return commutative[kind] }

// String prints the pattern in the form used by rule comments, for example
// mul(mul($x, rsqrt(_)), $w).
func (p *Pattern) String() string {
	var sb strings.Builder
	p.write(&sb, false)
	return sb.String()
}

// write prints p: variables as $name, alternatives as oneof(...), named
// ops with @name; plain (Describe) prints variables by name, alternatives
// as "a | b" and drops op names.
func (p *Pattern) write(sb *strings.Builder, plain bool) {
	switch {
	case p.kind == patVar && plain:
		sb.WriteString(p.name)
		return
	case p.kind == patVar:
		sb.WriteString("$" + p.name)
		return
	case p.kind == patAny:
		sb.WriteString("_")
		return
	case p.kind == patOneOf && plain:
		for i, o := range p.operands {
			if i > 0 {
				sb.WriteString(" | ")
			}
			o.write(sb, plain)
		}
		return
	case p.kind == patOneOf:
		sb.WriteString("oneof")
	default:
		sb.WriteString(p.op.String())
	}
	sb.WriteByte('(')
	for i, o := range p.operands {
		if i > 0 {
			sb.WriteString(", ")
		}
		o.write(sb, plain)
	}
	sb.WriteByte(')')
	if p.kind == patOp && p.name != "" && !plain {
		sb.WriteString("@" + p.name)
	}
}

// check reports malformed patterns: invalid op kinds, wrong operand counts,
// empty alternatives and empty variable names.
func (p *Pattern) check() error {
	switch p.kind {
	case patVar:
		if p.name == "" {
			return fmt.Errorf("Var with an empty name")
		}
	case patOneOf:
		if len(p.operands) == 0 {
			return fmt.Errorf("OneOf with no alternatives")
		}
	case patOp:
		if p.op <= ir.InvalidOp || int(p.op) > len(ir.AllOpKinds()) {
			return fmt.Errorf("Op with invalid kind %d", int(p.op))
		}
		info := p.op.Info()
		n := len(info.Operands)
		if (!info.Variadic && len(p.operands) != n) || (info.Variadic && len(p.operands) < n) {
			return fmt.Errorf("Op(%s) has %d operand patterns; %s takes %d (%v)", info.Name, len(p.operands), info.Name, n, info.Operands)
		}
	}
	for _, o := range p.operands {
		if o == nil {
			return fmt.Errorf("nil operand pattern in %s", p)
		}
		if err := o.check(); err != nil {
			return err
		}
	}
	return nil
}
