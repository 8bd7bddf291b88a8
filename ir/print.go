package ir

// The text form of a graph. Print writes it and Parse reads it back; for any
// graph Parse accepts, Print(Parse(text)) parses again and prints identically,
// and for a verified graph g, Print(Parse(Print(g))) == Print(g).
//
//	graph tiny_mlp mesh 1x2 {
//	  input %0 "tokens" : [1,1] uint32 row_major dram_interleaved
//	  weight %1 "model.embed_tokens.weight" : [512,64] bf16 tile dram_interleaved
//	  state %2 "conv_state.0" : [1,3,256] bf16 tile l1_height_sharded<(0,0)-(7,0) 32x64> split(2)
//	  region embed {
//	    %4 = embedding(%0, %1) : [1,1,64] bf16 tile dram_interleaved
//	  }
//	  region mlp 0 {
//	    %6 "h" = rmsnorm_matmul(%4, %5, %3) {eps = 1e-06, offset = 1.0} : [1,1,64] bf16 tile dram_interleaved rule "FuseRMSNormMatmul" decomp {
//	      input %0 "x" : [1,1,64] bf16 tile dram_interleaved
//	      ...
//	      output %11
//	    }
//	    %9, %10 = some_pair_op(%6) : [1,1,64] bf16 tile dram_interleaved, [1,1,64] fp32 tile dram_interleaved id 42
//	  }
//	  output %20
//	  update %2 = %17
//	}
//
// Lines:
//   - graph NAME mesh RxC { ... }: NAME is bare when it is an identifier
//     ([A-Za-z_][A-Za-z0-9_]*) and a quoted Go string otherwise; the same holds
//     for region kinds.
//   - input/weight/state %ID ["name"] : TYPE declares a graph value. Names
//     are quoted Go strings (strconv.Quote) and omitted when empty.
//   - region KIND [INDEX] { ... } holds op lines; INDEX is omitted for -1
//     (prologue and epilogue regions).
//   - %ID ["name"], ... = OP(%ID, ...) [{key = value, ...}] : TYPE, ...
//     [id N] [rule "name"] [decomp { ... }] is one op. Attributes are sorted
//     by key. An int prints in decimal; a float64 with strconv 'g' and the
//     shortest exact precision, with ".0" appended when that has no '.', 'e',
//     "Inf" or "NaN" (so 1.0, 1e-06, +Inf, NaN); a string quoted; an []int as
//     [1,2]; a DType by name. "id N" appears only when the op's ID is not its
//     first result's ID minus one (which Builder.Emit and Graph.Renumber
//     produce). "rule" appears when Op.Rule is set.
//   - decomp { ... } holds a fused op's Decomposition: placeholder
//     declarations (input/weight/state/result %ID ["name"] : TYPE, in
//     Decomposition.Inputs order), its op lines, and "output %ID, ..." for
//     Decomposition.Outputs. Value numbers inside a decomp are local to it;
//     a number not defined there refers to the enclosing scope.
//   - output %ID, ... lists Graph.Outputs; update %STATE = %VALUE records one
//     state update, sorted by state ID.
//
// TYPE is SHAPE DTYPE LAYOUT MEMORY [split(AXIS)], for example
// [1,32,64] bf16 tile l1_block_sharded<(0,0)-(3,3) 64x64> split(2); MEMORY
// uses MemoryConfig.String's format and the distribution is omitted when
// replicated. Blank lines and // comments are ignored by Parse.

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
)

// Print returns the canonical text of g (the format is described at the
// top of print.go). It is
// deterministic, does not mutate g and does not panic on malformed graphs
// (nil values print as %<nil>; such text does not parse).
func Print(g *Graph) string {
	var p printer
	p.graph(g)
	return p.b.String()
}

// Fprint writes Print(g) to w and returns the write error, if any.
func Fprint(w io.Writer, g *Graph) error {
	_, err := io.WriteString(w, Print(g))
	return err
}

// PrintRegion returns the text of one region as it appears inside Print's
// output, unindented. g is the graph r belongs to (unused today; it may be
// nil).
func PrintRegion(g *Graph, r *Region) string {
	var p printer
	p.region(r)
	return p.b.String()
}

type printer struct {
	b      strings.Builder
	indent int
}

func (p *printer) line(parts ...string) {
	for range p.indent {
		p.b.WriteString("  ")
	}
	for _, s := range parts {
		p.b.WriteString(s)
	}
	p.b.WriteByte('\n')
}

func (p *printer) graph(g *Graph) {
	if g == nil {
		return
	}
	p.line("graph ", nameText(g.Name), " mesh ", g.Mesh.String(), " {")
	p.indent++
	for _, sec := range []struct {
		kw   string
		vals []*Value
	}{{"input", g.Inputs}, {"weight", g.Weights}, {"state", g.States}} {
		for _, v := range sec.vals {
			p.decl(sec.kw, v)
		}
	}
	for _, r := range g.Regions {
		p.region(r)
	}
	if len(g.Outputs) > 0 {
		p.line("output ", refList(g.Outputs))
	}
	type upd struct{ s, v *Value }
	ups := make([]upd, 0, len(g.StateUpdates))
	for s, v := range g.StateUpdates {
		ups = append(ups, upd{s, v})
	}
	sort.Slice(ups, func(i, j int) bool {
		if a, b := idOf(ups[i].s), idOf(ups[j].s); a != b {
			return a < b
		}
		return idOf(ups[i].v) < idOf(ups[j].v)
	})
	for _, u := range ups {
		p.line("update ", ref(u.s), " = ", ref(u.v))
	}
	p.indent--
	p.line("}")
}

func (p *printer) region(r *Region) {
	if r == nil {
		p.line("region <nil> {", "}")
		return
	}
	head := "region " + nameText(string(r.Kind))
	if r.Index != -1 {
		head += " " + strconv.Itoa(r.Index)
	}
	p.line(head, " {")
	p.indent++
	for _, op := range r.Ops {
		p.op(op)
	}
	p.indent--
	p.line("}")
}

// decl prints a declaration: graph inputs, weights and states, and
// decomposition placeholders.
func (p *printer) decl(kw string, v *Value) {
	if v == nil {
		p.line(kw, " %<nil>")
		return
	}
	p.line(kw, " ", valueDef(v), " : ", typeText(v.Type))
}

func (p *printer) op(op *Op) {
	if op == nil {
		p.line("%<nil> = <nil>()")
		return
	}
	var b strings.Builder
	for i, r := range op.Results {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(valueDef(r))
	}
	b.WriteString(" = ")
	b.WriteString(op.Kind.String())
	b.WriteString("(")
	b.WriteString(refList(op.Operands))
	b.WriteString(")")
	if len(op.Attrs) > 0 {
		b.WriteString(" {")
		for i, k := range op.Attrs.Keys() {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(k)
			b.WriteString(" = ")
			b.WriteString(attrText(op.Attrs[k]))
		}
		b.WriteString("}")
	}
	b.WriteString(" : ")
	for i, r := range op.Results {
		if i > 0 {
			b.WriteString(", ")
		}
		if r == nil {
			b.WriteString("<nil>")
			continue
		}
		b.WriteString(typeText(r.Type))
	}
	if !implicitOpID(op) {
		b.WriteString(" id ")
		b.WriteString(strconv.Itoa(op.ID))
	}
	if op.Rule != "" {
		b.WriteString(" rule ")
		b.WriteString(strconv.Quote(op.Rule))
	}
	if op.Decomp == nil {
		p.line(b.String())
		return
	}
	b.WriteString(" decomp {")
	p.line(b.String())
	p.indent++
	d := op.Decomp
	for _, v := range d.Inputs {
		kw := "input"
		if v != nil && int(v.Kind) < len(valueKindNames) {
			kw = v.Kind.String()
		}
		p.decl(kw, v)
	}
	for _, sub := range d.Ops {
		p.op(sub)
	}
	if len(d.Outputs) > 0 {
		p.line("output ", refList(d.Outputs))
	}
	p.indent--
	p.line("}")
}

// implicitOpID reports whether op's ID is the one Parse assigns when the text
// gives none: its first result's ID minus one.
func implicitOpID(op *Op) bool {
	return len(op.Results) > 0 && op.Results[0] != nil && op.ID == op.Results[0].ID-1
}

func idOf(v *Value) int {
	if v == nil {
		return math.MinInt
	}
	return v.ID
}

func ref(v *Value) string {
	if v == nil {
		return "%<nil>"
	}
	return "%" + strconv.Itoa(v.ID)
}

func refList(vs []*Value) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = ref(v)
	}
	return strings.Join(parts, ", ")
}

// valueDef is a defining occurrence: %ID followed by the quoted name, if any.
func valueDef(v *Value) string {
	if v == nil || v.Name == "" {
		return ref(v)
	}
	return ref(v) + " " + strconv.Quote(v.Name)
}

// nameText prints a graph name or region kind: bare when it is an
// identifier, quoted otherwise.
func nameText(s string) string {
	if isIdent(s) {
		return s
	}
	return strconv.Quote(s)
}

func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || i > 0 && '0' <= c && c <= '9' {
			continue
		}
		return false
	}
	return true
}

// typeText prints SHAPE DTYPE LAYOUT MEMORY [split(AXIS)].
func typeText(t TensorType) string {
	s := t.Shape.String() + " " + t.DType.String() + " " + t.LayoutText() + " " + t.Mem.String()
	if !t.Dist.IsReplicated() {
		s += " " + t.Dist.String()
	}
	return s
}

// formatFloat prints f so that it parses back to the same float64 and always
// reads as a float: it contains '.', 'e', "Inf" or "NaN".
func formatFloat(f float64) string {
	s := strconv.FormatFloat(f, 'g', -1, 64)
	if !strings.ContainsAny(s, ".eIN") {
		s += ".0"
	}
	return s
}

func attrText(v any) string {
	switch v := v.(type) {
	case int:
		return strconv.Itoa(v)
	case float64:
		return formatFloat(v)
	case string:
		return strconv.Quote(v)
	case []int:
		return Shape(v).String()
	case DType:
		return v.String()
	}
	return fmt.Sprintf("<%T>", v)
}
