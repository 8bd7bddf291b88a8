package ir

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/tcc-dev/tcc/ir/opspec"
)

// ParseError is an error in graph text at Line:Col (both 1-based; Col counts
// bytes).
type ParseError struct {
	Line, Col int
	Msg       string
}

func (e *ParseError) Error() string { return fmt.Sprintf("%d:%d: %s", e.Line, e.Col, e.Msg) }

// maxDecompDepth bounds how deeply decompositions may nest in parsed text.
const maxDecompDepth = 32

// Parse reads the text form written by Print (see print.go) and returns the
// graph it describes. Value and op IDs are the ones in the text; an op without
// "id N" gets its first result's ID minus one, or a fresh ID if that is taken.
// Result types are re-inferred with InferTypes and must agree in shape and
// dtype with the annotation (layout, memory and distribution come from the
// annotation, since passes set them). The returned graph passes Verify.
// Every error is a *ParseError naming the line and column and what was
// expected; Parse does not panic.
func Parse(src string) (g *Graph, err error) {
	p := &parser{lx: lexer{src: src, line: 1}}
	defer func() {
		if r := recover(); r != nil {
			pe, ok := r.(*ParseError)
			if !ok {
				panic(r)
			}
			g, err = nil, pe
		}
	}()
	p.next()
	return p.file(), nil
}

// ---- lexer ----

type tokKind uint8

const (
	tEOF    tokKind = iota
	tNL             // end of line
	tWord           // run of [A-Za-z0-9_.+-]: identifiers, numbers, 1x2
	tString         // quoted Go string; text is the unquoted value
	tValue          // %N; text is N
	tPunct          // one of { } ( ) [ ] , = : < >
	tErr            // lexical error; text is the message
)

type token struct {
	kind      tokKind
	text      string
	line, col int
}

func (t token) String() string {
	switch t.kind {
	case tEOF:
		return "end of input"
	case tNL:
		return "end of line"
	case tWord:
		return strconv.Quote(t.text)
	case tString:
		return "string " + strconv.Quote(t.text)
	case tValue:
		return "value %" + t.text
	case tPunct:
		return "'" + t.text + "'"
	}
	return t.text
}

type lexer struct {
	src       string
	pos       int
	line      int
	lineStart int
}

func isWordByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '.' || c == '+' || c == '-'
}

func (l *lexer) next() token {
	for l.pos < len(l.src) {
		c := l.src[l.pos]
		if c == ' ' || c == '\t' || c == '\r' {
			l.pos++
		} else if c == '/' && strings.HasPrefix(l.src[l.pos:], "//") {
			for l.pos < len(l.src) && l.src[l.pos] != '\n' {
				l.pos++
			}
		} else {
			break
		}
	}
	t := token{line: l.line, col: l.pos - l.lineStart + 1}
	if l.pos >= len(l.src) {
		t.kind = tEOF
		return t
	}
	start := l.pos
	c := l.src[l.pos]
	switch {
	case c == '\n':
		l.pos++
		l.line++
		l.lineStart = l.pos
		t.kind = tNL
	case c == '%':
		l.pos++
		for l.pos < len(l.src) && '0' <= l.src[l.pos] && l.src[l.pos] <= '9' {
			l.pos++
		}
		t.kind, t.text = tValue, l.src[start+1:l.pos]
		if t.text == "" {
			t.kind, t.text = tErr, "expected a value number after '%'"
		}
	case c == '"':
		l.pos++
		for l.pos < len(l.src) && l.src[l.pos] != '"' && l.src[l.pos] != '\n' {
			if l.src[l.pos] == '\\' {
				l.pos++
			}
			l.pos++
		}
		if l.pos >= len(l.src) || l.src[l.pos] != '"' {
			l.pos = min(l.pos, len(l.src))
			t.kind, t.text = tErr, "unterminated string literal"
			return t
		}
		l.pos++
		s, err := strconv.Unquote(l.src[start:l.pos])
		if err != nil {
			t.kind, t.text = tErr, fmt.Sprintf("bad string literal %s", l.src[start:l.pos])
			return t
		}
		t.kind, t.text = tString, s
	case strings.IndexByte("{}()[],=:<>", c) >= 0:
		l.pos++
		t.kind, t.text = tPunct, string(c)
	case isWordByte(c):
		for l.pos < len(l.src) && isWordByte(l.src[l.pos]) {
			l.pos++
		}
		t.kind, t.text = tWord, l.src[start:l.pos]
	default:
		t.kind, t.text = tErr, fmt.Sprintf("unexpected character %q", c)
	}
	return t
}

// ---- parser ----

// scope maps value numbers to values; a decomposition opens a child scope.
type scope struct {
	parent *scope
	vals   map[int]*Value
}

func (s *scope) lookup(id int) *Value {
	for ; s != nil; s = s.parent {
		if v, ok := s.vals[id]; ok {
			return v
		}
	}
	return nil
}

// opAt remembers where a graph-level op was written, to assign and check op IDs.
type opAt struct {
	op       *Op
	explicit bool
	at       token
}

type parser struct {
	lx    lexer
	tok   token
	g     *Graph
	ops   []opAt // graph-level ops in program order
	maxID int    // largest ID seen anywhere, for Graph.nextID
}

func (p *parser) failAt(t token, format string, a ...any) {
	panic(&ParseError{Line: t.line, Col: t.col, Msg: fmt.Sprintf(format, a...)})
}

func (p *parser) fail(format string, a ...any) { p.failAt(p.tok, format, a...) }

func (p *parser) expected(what string) {
	p.fail("expected %s, found %s", what, p.tok)
}

func (p *parser) next() {
	p.tok = p.lx.next()
	if p.tok.kind == tErr {
		p.fail("%s", p.tok.text)
	}
}

func (p *parser) isPunct(s string) bool { return p.tok.kind == tPunct && p.tok.text == s }

func (p *parser) isWord(s string) bool { return p.tok.kind == tWord && p.tok.text == s }

func (p *parser) punct(s string) {
	if !p.isPunct(s) {
		p.expected("'" + s + "'")
	}
	p.next()
}

func (p *parser) keyword(s string) {
	if !p.isWord(s) {
		p.expected(strconv.Quote(s))
	}
	p.next()
}

func (p *parser) word(what string) token {
	t := p.tok
	if t.kind != tWord {
		p.expected(what)
	}
	p.next()
	return t
}

func (p *parser) str(what string) string {
	t := p.tok
	if t.kind != tString {
		p.expected(what)
	}
	p.next()
	return t.text
}

// endLine consumes the end of a statement: one or more newlines.
func (p *parser) endLine() {
	if p.tok.kind != tNL {
		p.expected("end of line")
	}
	p.skipNL()
}

func (p *parser) skipNL() {
	for p.tok.kind == tNL {
		p.next()
	}
}

func (p *parser) int(what string) int {
	t := p.word(what)
	n, err := strconv.Atoi(t.text)
	if err != nil {
		p.failAt(t, "expected %s, found %s", what, t)
	}
	return n
}

// name reads a graph name or region kind: an identifier-like word or a string.
func (p *parser) name(what string) string {
	if p.tok.kind == tString {
		return p.str(what)
	}
	return p.word(what).text
}

func (p *parser) seeID(id int) {
	if id > p.maxID {
		p.maxID = id
	}
}

// file: graph NAME mesh RxC { NL stmt* } NL* EOF
func (p *parser) file() *Graph {
	p.skipNL()
	start := p.tok
	p.keyword("graph")
	name := p.name("graph name")
	p.keyword("mesh")
	mt := p.word("mesh shape RxC")
	mesh, err := ParseMesh(mt.text)
	if err != nil {
		p.failAt(mt, "%v", err)
	}
	p.punct("{")
	p.endLine()
	p.g = NewGraph(name)
	p.g.Mesh = mesh
	p.maxID = -1
	top := &scope{vals: map[int]*Value{}}
	lastLayer := -1
	for !p.isPunct("}") {
		switch {
		case p.isWord("input"), p.isWord("weight"), p.isWord("state"):
			kw := p.tok.text
			v := p.decl(top)
			switch kw {
			case "input":
				v.Kind = KindInput
				p.g.Inputs = append(p.g.Inputs, v)
			case "weight":
				v.Kind = KindWeight
				p.g.Weights = append(p.g.Weights, v)
			default:
				v.Kind = KindState
				p.g.States = append(p.g.States, v)
			}
		case p.isWord("region"):
			p.region(top, &lastLayer)
		case p.isWord("output"):
			p.g.Outputs = append(p.g.Outputs, p.outputs(top)...)
		case p.isWord("update"):
			p.update(top)
		default:
			p.expected("input, weight, state, region, output, update or '}'")
		}
	}
	p.next()
	p.skipNL()
	if p.tok.kind != tEOF {
		p.expected("end of input after the graph's '}'")
	}
	p.assignOpIDs(top)
	p.g.nextID = p.maxID + 1
	if err := safeVerify(p.g); err != nil {
		p.failAt(start, "graph fails verification: %v", err)
	}
	return p.g
}

// decl: KIND %ID ["name"] : TYPE NL. The caller sets the value's kind.
func (p *parser) decl(s *scope) *Value {
	p.next() // keyword
	v := p.valueDef(s, nil)
	p.punct(":")
	v.Type = p.typ()
	p.endLine()
	s.vals[v.ID] = v
	return v
}

// valueDef reads %ID ["name"], rejecting an ID already defined in s or in
// pending (results of the same op).
func (p *parser) valueDef(s *scope, pending []*Value) *Value {
	t := p.tok
	if t.kind != tValue {
		p.expected("a value such as %3")
	}
	id := p.valueNumber(t)
	if _, dup := s.vals[id]; dup {
		p.failAt(t, "value %%%d is already defined", id)
	}
	for _, v := range pending {
		if v.ID == id {
			p.failAt(t, "value %%%d is already defined", id)
		}
	}
	p.next()
	v := &Value{ID: id}
	if p.tok.kind == tString {
		v.Name = p.str("value name")
	}
	p.seeID(id)
	return v
}

// maxIDNumber bounds value numbers and op IDs in text, so fresh IDs cannot overflow.
const maxIDNumber = 1<<31 - 1

// valueNumber converts the text of a value token.
func (p *parser) valueNumber(t token) int {
	id, err := strconv.Atoi(t.text)
	if err != nil || id > maxIDNumber {
		p.failAt(t, "value number %%%s is out of range (at most %d)", t.text, maxIDNumber)
	}
	return id
}

// use reads a reference %ID to a value visible in s.
func (p *parser) use(s *scope) *Value {
	t := p.tok
	if t.kind != tValue {
		p.expected("a value such as %3")
	}
	id := p.valueNumber(t)
	v := s.lookup(id)
	if v == nil {
		p.failAt(t, "undefined value %%%d", id)
	}
	p.next()
	return v
}

// outputs: output %ID, ... NL
func (p *parser) outputs(s *scope) []*Value {
	p.next()
	vs := []*Value{p.use(s)}
	for p.isPunct(",") {
		p.next()
		vs = append(vs, p.use(s))
	}
	p.endLine()
	return vs
}

// update: update %STATE = %VALUE NL
func (p *parser) update(s *scope) {
	p.next()
	at := p.tok
	st := p.use(s)
	if st.Kind != KindState {
		p.failAt(at, "update target %%%d is a %s, not a state", st.ID, st.Kind)
	}
	if _, dup := p.g.StateUpdates[st]; dup {
		p.failAt(at, "state %%%d is updated twice", st.ID)
	}
	p.punct("=")
	p.g.StateUpdates[st] = p.use(s)
	p.endLine()
}

// region: region KIND [INDEX] { NL op* } NL
func (p *parser) region(s *scope, lastLayer *int) {
	at := p.tok
	p.next()
	r := &Region{Kind: RegionKind(p.name("region kind")), Index: -1}
	if !p.isPunct("{") {
		r.Index = p.int("layer index or '{'")
	}
	if r.IsLayer() {
		if r.Index <= *lastLayer {
			p.failAt(at, "region %s follows layer %d; layer indices must increase", r.Label(), *lastLayer)
		}
		*lastLayer = r.Index
	}
	p.punct("{")
	p.endLine()
	for !p.isPunct("}") {
		if p.tok.kind != tValue {
			p.expected("an op such as %5 = add(%3, %4) : ..., or '}'")
		}
		r.Ops = append(r.Ops, p.op(s, r, 0))
	}
	p.next()
	p.endLine()
	p.g.Regions = append(p.g.Regions, r)
}

// op: %ID ["name"], ... = OP(%ID, ...) [{attrs}] : TYPE, ... [id N]
// [rule "name"] [decomp { ... }] NL. depth is 0 for graph-level ops.
func (p *parser) op(s *scope, r *Region, depth int) *Op {
	var results []*Value
	for {
		results = append(results, p.valueDef(s, results))
		if !p.isPunct(",") {
			break
		}
		p.next()
	}
	p.punct("=")
	nameTok := p.word("op name")
	kind, ok := LookupOp(nameTok.text)
	if !ok {
		p.failAt(nameTok, "unknown op %q", nameTok.text)
	}
	info := kind.Info()
	if len(results) != info.Results {
		p.failAt(nameTok, "op %s has %d results, %d are written", info.Name, info.Results, len(results))
	}
	op := &Op{Kind: kind, Region: r, Attrs: Attrs{}}
	p.punct("(")
	if !p.isPunct(")") {
		op.Operands = append(op.Operands, p.use(s))
		for p.isPunct(",") {
			p.next()
			op.Operands = append(op.Operands, p.use(s))
		}
	}
	p.punct(")")
	if p.isPunct("{") {
		p.attrs(info, op.Attrs)
	}
	p.punct(":")
	for i, v := range results {
		if i > 0 {
			p.punct(",")
		}
		v.Type = p.typ()
		v.Kind = KindResult
		v.Def = op
	}
	if p.isPunct(",") {
		p.fail("op %s: %d results are named but more types are given", info.Name, len(results))
	}
	op.Results = results
	p.checkTypes(nameTok, op)
	explicit := false
	var idTok token
	if p.isWord("id") {
		p.next()
		idTok = p.tok
		op.ID = p.int("op id")
		if op.ID < -maxIDNumber || op.ID > maxIDNumber {
			p.failAt(idTok, "op id %d is out of range (at most %d in magnitude)", op.ID, maxIDNumber)
		}
		p.seeID(op.ID)
		explicit = true
	} else {
		op.ID = results[0].ID - 1
	}
	if p.isWord("rule") {
		p.next()
		op.Rule = p.str("rule name string")
	}
	if p.isWord("decomp") {
		if depth >= maxDecompDepth {
			p.fail("decompositions nest deeper than %d", maxDecompDepth)
		}
		p.next()
		op.Decomp = p.decomp(s, r, depth+1)
		if info.Fused && (len(op.Decomp.Inputs) != len(op.Operands) || len(op.Decomp.Outputs) != len(op.Results)) {
			p.failAt(nameTok, "op %s: decomposition has %d inputs and %d outputs for %d operands and %d results",
				info.Name, len(op.Decomp.Inputs), len(op.Decomp.Outputs), len(op.Operands), len(op.Results))
		}
	}
	p.endLine()
	for _, v := range results {
		s.vals[v.ID] = v
	}
	if depth == 0 {
		p.ops = append(p.ops, opAt{op: op, explicit: explicit, at: idTok})
	}
	return op
}

// attrs: { key = value, ... }, converting each value to its declared kind.
func (p *parser) attrs(info *OpInfo, into Attrs) {
	p.punct("{")
	for !p.isPunct("}") {
		if len(into) > 0 {
			p.punct(",")
		}
		kt := p.word("attribute name")
		var decl *opspec.Attr
		for i := range info.Attrs {
			if info.Attrs[i].Name == kt.text {
				decl = &info.Attrs[i]
			}
		}
		if decl == nil && kt.text == FidelityAttr {
			decl = &fidelityAttrSpec
		}
		if decl == nil {
			names := make([]string, len(info.Attrs))
			for i, a := range info.Attrs {
				names[i] = a.Name
			}
			p.failAt(kt, "op %s has no attribute %q (attributes: %s)", info.Name, kt.text, strings.Join(names, ", "))
		}
		if _, dup := into[kt.text]; dup {
			p.failAt(kt, "attribute %q is given twice", kt.text)
		}
		p.punct("=")
		into[kt.text] = p.attrValue(info, decl)
	}
	p.next()
}

func (p *parser) attrValue(info *OpInfo, a *opspec.Attr) any {
	t := p.tok
	bad := func(want string) {
		p.failAt(t, "bad attribute %s of op %s: want %s, found %s", a.Name, info.Name, want, t)
	}
	switch a.Kind {
	case opspec.AttrInt:
		if t.kind != tWord {
			bad("an int")
		}
		n, err := strconv.Atoi(t.text)
		if err != nil {
			bad("an int")
		}
		p.next()
		return n
	case opspec.AttrFloat:
		if t.kind != tWord {
			bad("a float")
		}
		f, err := strconv.ParseFloat(t.text, 64)
		if err != nil {
			bad("a float (such as 1.0, 1e-06, +Inf or NaN)")
		}
		p.next()
		return f
	case opspec.AttrString:
		if t.kind != tString {
			bad("a quoted string")
		}
		p.next()
		return t.text
	case opspec.AttrInts:
		if !p.isPunct("[") {
			bad("a list of ints such as [1,2]")
		}
		return []int(p.intList())
	case opspec.AttrDType:
		if t.kind != tWord {
			bad("a dtype")
		}
		dt, err := ParseDType(t.text)
		if err != nil {
			p.failAt(t, "bad attribute %s of op %s: %v", a.Name, info.Name, err)
		}
		p.next()
		return dt
	}
	p.failAt(t, "attribute %s of op %s has unknown kind %d", a.Name, info.Name, int(a.Kind))
	return nil
}

// intList: [N, ...]
func (p *parser) intList() Shape {
	p.punct("[")
	s := Shape{}
	for !p.isPunct("]") {
		if len(s) > 0 {
			p.punct(",")
		}
		s = append(s, p.int("an integer or ']'"))
	}
	p.next()
	return s
}

// typ: SHAPE DTYPE LAYOUT MEMORY [split(AXIS)], checked against the rules
// Verify applies to every value.
func (p *parser) typ() TensorType {
	at := p.tok
	if !p.isPunct("[") {
		p.expected("a type such as [1,32] bf16 tile dram_interleaved")
	}
	var t TensorType
	t.Shape = p.intList()
	for _, d := range t.Shape {
		if d <= 0 {
			p.failAt(at, "shape %s has a non-positive dimension", t.Shape)
		}
	}
	dt := p.word("dtype")
	var err error
	if t.DType, err = ParseDType(dt.text); err != nil {
		p.failAt(dt, "%v", err)
	}
	lt := p.word("layout")
	if lt.text == TransposedTileLayoutText {
		t.Layout, t.TilesTransposed = TileLayout, true
	} else if t.Layout, err = ParseLayout(lt.text); err != nil {
		p.failAt(lt, "%v", err)
	}
	if t.DType.IsBlockFloat() && t.Layout != TileLayout {
		p.failAt(lt, "%s needs tile layout, not %s", t.DType, t.Layout)
	}
	mt := p.word("memory kind")
	if t.Mem.Kind, err = ParseMemKind(mt.text); err != nil {
		p.failAt(mt, "%v", err)
	}
	if p.isPunct("<") {
		if !t.Mem.Kind.IsSharded() {
			p.fail("%s takes no shard spec", t.Mem.Kind)
		}
		t.Mem.Shard = p.shardSpec()
	} else if t.Mem.Kind.IsSharded() {
		p.expected(fmt.Sprintf("a shard spec such as %s<(0,0)-(7,0) 32x64> after %s", t.Mem.Kind, t.Mem.Kind))
	}
	t.Dist = Replicated
	if p.isWord("split") {
		p.next()
		p.punct("(")
		axTok := p.tok
		ax := p.int("split axis")
		if ax < 0 || ax >= t.Shape.Rank() {
			p.failAt(axTok, "split axis %d is out of range for rank %d", ax, t.Shape.Rank())
		}
		t.Dist = Dist{Axis: ax}
		p.punct(")")
	}
	return t
}

// shardSpec: <(X0,Y0)-(X1,Y1) RxC>
func (p *parser) shardSpec() *ShardSpec {
	p.punct("<")
	var sp ShardSpec
	p.punct("(")
	sp.Grid.X0 = p.int("core x")
	p.punct(",")
	sp.Grid.Y0 = p.int("core y")
	p.punct(")")
	dash := p.word("'-'")
	if dash.text != "-" {
		p.failAt(dash, "expected '-' between core coordinates, found %s", dash)
	}
	p.punct("(")
	sp.Grid.X1 = p.int("core x")
	p.punct(",")
	sp.Grid.Y1 = p.int("core y")
	p.punct(")")
	st := p.word("shard shape RxC")
	r, c, ok := strings.Cut(st.text, "x")
	var err1, err2 error
	sp.Shape[0], err1 = strconv.Atoi(r)
	sp.Shape[1], err2 = strconv.Atoi(c)
	if !ok || err1 != nil || err2 != nil {
		p.failAt(st, "expected shard shape RxC such as 32x64, found %s", st)
	}
	p.punct(">")
	return &sp
}

// checkTypes re-infers op's result types and compares shape and dtype with
// the annotation.
func (p *parser) checkTypes(at token, op *Op) {
	info := op.Info()
	want, err := safeInfer(op.Kind, op.Operands, op.Attrs)
	if err != nil {
		p.failAt(at, "op %s: %v", info.Name, err)
	}
	for i, r := range op.Results {
		if !r.Type.Shape.Equal(want[i].Shape) || r.Type.DType != want[i].DType {
			p.failAt(at, "op %s: result %d (%%%d) is annotated %s %s but the shape rule gives %s %s",
				info.Name, i, r.ID, r.Type.Shape, r.Type.DType, want[i].Shape, want[i].DType)
		}
	}
}

// decomp: { NL (decl | op | output)* } — the body of a fused op's decomposition.
func (p *parser) decomp(outer *scope, r *Region, depth int) *Decomposition {
	p.punct("{")
	p.endLine()
	s := &scope{parent: outer, vals: map[int]*Value{}}
	d := &Decomposition{}
	for !p.isPunct("}") {
		switch {
		case p.tok.kind == tValue:
			d.Ops = append(d.Ops, p.op(s, r, depth))
		case p.isWord("output"):
			d.Outputs = append(d.Outputs, p.outputs(s)...)
		case p.tok.kind == tWord:
			kind, ok := map[string]ValueKind{"input": KindInput, "weight": KindWeight, "state": KindState, "result": KindResult}[p.tok.text]
			if !ok {
				p.expected("input, weight, state, result, an op, output or '}'")
			}
			v := p.decl(s)
			v.Kind = kind
			d.Inputs = append(d.Inputs, v)
		default:
			p.expected("input, weight, state, result, an op, output or '}'")
		}
	}
	p.next()
	return d
}

// assignOpIDs checks explicit graph-level op IDs against every value and op
// ID, then gives each op without one its first result's ID minus one, or a
// fresh ID when that is taken.
func (p *parser) assignOpIDs(top *scope) {
	used := map[int]bool{}
	for id := range top.vals {
		used[id] = true
	}
	for _, o := range p.ops {
		if !o.explicit {
			continue
		}
		if v, ok := top.vals[o.op.ID]; ok {
			p.failAt(o.at, "op id %d is already the id of value %s", o.op.ID, v)
		}
		if used[o.op.ID] {
			p.failAt(o.at, "op id %d is already the id of another op", o.op.ID)
		}
		used[o.op.ID] = true
	}
	fresh := p.maxID + 1
	for _, o := range p.ops {
		if o.explicit {
			continue
		}
		if used[o.op.ID] {
			o.op.ID = fresh
			fresh++
		}
		used[o.op.ID] = true
	}
	p.maxID = max(p.maxID, fresh-1)
}

// safeInfer runs InferTypes, turning a panic in a shape rule into an error.
func safeInfer(kind OpKind, operands []*Value, attrs Attrs) (ts []TensorType, err error) {
	defer func() {
		if r := recover(); r != nil {
			ts, err = nil, fmt.Errorf("shape rule panicked: %v", r)
		}
	}()
	return InferTypes(kind, operands, attrs)
}

// safeVerify runs Verify, turning a panic in a shape rule into an error.
func safeVerify(g *Graph) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("verifier panicked: %v", r)
		}
	}()
	return Verify(g)
}
