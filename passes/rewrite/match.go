package rewrite

import (
	"sort"

	"github.com/tcc-dev/tcc/ir"
)

// Match is one successful match of a rule's pattern, handed to the rule's
// side condition and replacement builder.
type Match struct {
	Rule  *Rule
	Graph *ir.Graph
	// Root is the op the pattern's outermost Op matched; its results are
	// replaced by the rule's replacement values.
	Root *ir.Op
	// Roots are Root followed by the roots of the rule's Extra patterns;
	// their results are replaced, in this order.
	Roots []*ir.Op
	// Ops are the distinct matched ops (roots included) in program order.
	Ops   []*ir.Op
	vars  map[string]*ir.Value
	named map[string]*ir.Op
}

// Value returns the value bound to variable name, or nil if the pattern has
// no such variable.
func (m *Match) Value(name string) *ir.Value { return m.vars[name] }

// Op returns the op bound with Pattern.As(name), or nil.
func (m *Match) Op(name string) *ir.Op { return m.named[name] }

// Vars returns the bound variable names in sorted order.
func (m *Match) Vars() []string {
	ks := make([]string, 0, len(m.vars))
	for k := range m.vars {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// IsRoot reports whether op is one of the match's roots.
func (m *Match) IsRoot(op *ir.Op) bool {
	for _, r := range m.Roots {
		if r == op {
			return true
		}
	}
	return false
}

// RootResults are the results of every root, in Roots order: the values
// the rule's replacements stand for.
func (m *Match) RootResults() []*ir.Value {
	var out []*ir.Value
	for _, r := range m.Roots {
		out = append(out, r.Results...)
	}
	return out
}

// Interior reports whether v is produced by a matched op other than the root.
func (m *Match) Interior(v *ir.Value) bool {
	if v.Def == nil || m.IsRoot(v.Def) {
		return false
	}
	for _, op := range m.Ops {
		if op == v.Def {
			return true
		}
	}
	return false
}

type varBinding struct {
	name string
	v    *ir.Value
}

type opBinding struct {
	name string
	op   *ir.Op
}

// matcher is the backtracking matcher. Every binding pushed during a failed
// attempt is popped again, so the state after a false return equals the
// state before the call.
type matcher struct {
	root  *ir.Op
	roots []*ir.Op // primary root, then extra roots matched so far
	vars  []varBinding
	named []opBinding
	ops   []*ir.Op // matched ops, possibly repeated
}

func (m *matcher) lookupVar(name string) (*ir.Value, bool) {
	for _, b := range m.vars {
		if b.name == name {
			return b.v, true
		}
	}
	return nil, false
}

func (m *matcher) lookupOp(name string) (*ir.Op, bool) {
	for _, b := range m.named {
		if b.name == name {
			return b.op, true
		}
	}
	return nil, false
}

// match tries to match p against v, then calls k; it returns true only if k
// accepted the complete match.
func (m *matcher) match(p *Pattern, v *ir.Value, k func() bool) bool {
	switch p.kind {
	case patAny:
		return k()
	case patVar:
		if b, ok := m.lookupVar(p.name); ok {
			return b == v && k()
		}
		m.vars = append(m.vars, varBinding{p.name, v})
		if k() {
			return true
		}
		m.vars = m.vars[:len(m.vars)-1]
		return false
	case patOneOf:
		for _, alt := range p.operands {
			if m.match(alt, v, k) {
				return true
			}
		}
		return false
	default:
		d := v.Def
		if d == nil || d.Region != m.root.Region {
			return false
		}
		return m.matchOp(p, d, k)
	}
}

// matchOp matches an Op pattern against op itself.
func (m *matcher) matchOp(p *Pattern, op *ir.Op, k func() bool) bool {
	if op.Kind != p.op || len(op.Operands) != len(p.operands) {
		return false
	}
	pushed := false
	if p.name != "" {
		if b, ok := m.lookupOp(p.name); ok {
			if b != op {
				return false
			}
		} else {
			m.named = append(m.named, opBinding{p.name, op})
			pushed = true
		}
	}
	m.ops = append(m.ops, op)
	ok := m.matchSeq(p.operands, op.Operands, k)
	if !ok && len(op.Operands) == 2 && Commutative(op.Kind) && op.Operands[0] != op.Operands[1] {
		ok = m.matchSeq(p.operands, []*ir.Value{op.Operands[1], op.Operands[0]}, k)
	}
	if !ok {
		m.ops = m.ops[:len(m.ops)-1]
		if pushed {
			m.named = m.named[:len(m.named)-1]
		}
	}
	return ok
}

func (m *matcher) matchSeq(ps []*Pattern, vs []*ir.Value, k func() bool) bool {
	if len(ps) == 0 {
		return k()
	}
	return m.match(ps[0], vs[0], func() bool { return m.matchSeq(ps[1:], vs[1:], k) })
}

// snapshot turns the matcher state into a Match; pos orders ops.
func (m *matcher) snapshot(r *Rule, g *ir.Graph, pos map[*ir.Op]int) *Match {
	mt := &Match{Rule: r, Graph: g, Root: m.root, Roots: append([]*ir.Op{m.root}, m.roots...), vars: map[string]*ir.Value{}, named: map[string]*ir.Op{}}
	for _, b := range m.vars {
		mt.vars[b.name] = b.v
	}
	for _, b := range m.named {
		mt.named[b.name] = b.op
	}
	seen := map[*ir.Op]bool{}
	for _, op := range m.ops {
		if !seen[op] {
			seen[op] = true
			mt.Ops = append(mt.Ops, op)
		}
	}
	sort.Slice(mt.Ops, func(i, j int) bool { return pos[mt.Ops[i]] < pos[mt.Ops[j]] })
	return mt
}
