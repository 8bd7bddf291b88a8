// Package opspec declares tcc's graph-IR op table as data.
//
// Each entry names an op, its operands, its attributes, a one-line semantics
// comment and the shape rule (a function in package ir) that infers its result
// types. The generator in ir/internal/opgen turns this table into the OpKind
// enum, the op info table and the typed Builder methods of package ir
// (ir/ops_gen.go). Adding an op means adding an entry here, a shape rule in
// ir/shape_rules.go if none fits, and its semantics in the reference evaluator.
//
// The table is split by class over several files (core.go, ...); All returns
// the concatenation in a fixed order, which fixes the enum numbering.
package opspec

// AttrKind is the Go type of an attribute value.
type AttrKind int

const (
	AttrInt    AttrKind = iota // int
	AttrFloat                  // float64
	AttrString                 // string
	AttrInts                   // []int
	AttrDType                  // ir.DType
)

// Attr declares one attribute of an op.
type Attr struct {
	Name     string
	Kind     AttrKind
	Optional bool // may be absent; the builder takes it as a trailing option
}

// Op declares one graph-IR op.
type Op struct {
	Name     string   // text name used by the printer, parser and reports
	Go       string   // Go identifier: OpKind constant suffix and Builder method name
	Doc      string   // one-line semantics
	Operands []string // operand names, in order
	Variadic bool     // the last operand repeats (at least once)
	Attrs    []Attr
	Results  int    // number of results
	Shape    string // name of the shape rule function in package ir
	Class    string // op class: eltwise, reduce, matmul, norm, data, layout, collective, fused (not a fusion-rule family)
	Fused    bool   // produced only by fusion; carries the decomposition it replaced
	SFPU     bool   // one SFPU op per element (ir/sfpu Table entry of the same name); chainable into eltwise_chain
}

// All returns the whole op table in enum order.
func All() []Op {
	var all []Op
	all = append(all, coreOps...)
	all = append(all, modelOps...)
	all = append(all, fusedCommonOps...)
	all = append(all, fusedGDNOps...)
	all = append(all, fusedAttentionOps...)
	return all
}
