package codegen

import (
	"errors"
	"fmt"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/sim/ref"
)

// Build is a compiled graph: one device program per op in execution order
// and the device buffers they read and write.
type Build struct {
	Graph    *ir.Graph
	Target   *target.Target
	Programs []*Program
	Buffers  []BufferSpec
	// printed holds each kernel's C++ as Compile printed it (nil for a
	// Build assembled by hand: render prints).
	printed map[*kir.Kernel][]byte
	// views maps each reshape result that is a view (viewAliases) to the
	// value whose buffer it reads.
	views map[*ir.Value]*ir.Value
	// shared maps each value held in a shared buffer (planReuse) to the
	// buffer's index in Buffers.
	shared map[*ir.Value]int
}

// RowSplit is the chunking of op's program when it is a split-row norm
// (kir.Program.RowSplit), zero otherwise: set it as the reference's
// ref.Options.RowSplit so that the reference adds the row sums as the
// build's programs do.
func (b *Build) RowSplit(op *ir.Op) ref.RowSplit {
	for _, p := range b.Programs {
		if p.Op == op && p.Kernel.RowSplit != nil {
			return ref.RowSplit{Per: p.Kernel.RowSplit.Per, Fan: p.Kernel.RowSplit.Fan}
		}
	}
	return ref.RowSplit{}
}

// Program is the device program of one graph op. Programs of ops that
// lower alike share kernel bodies and argument values (lowerMemo): a
// Build's programs are read, never modified.
type Program struct {
	Op     *ir.Op
	Kernel *kir.Program
}

// BufferSpec is one device buffer: the tensor a graph value holds, its
// placement and its pages (lower.PageLayout). A shared buffer holds several
// intermediate values in turn (Values); its shape and pages are those of
// the largest, and each program declares it with the pages of the value it
// reads or writes, at most Pages.
type BufferSpec struct {
	// Name is the buffer's global name (lower.Context.BufferName): the
	// checkpoint name of a weight, "s<N>" for a shared buffer, "t<ID>" for
	// any other value.
	Name string
	// Value is the value the buffer holds (a shared buffer: the first of
	// its values with the most pages).
	Value *ir.Value
	// Values, for a shared buffer, are the values it holds, in the order
	// the programs write them; their live ranges (first writer to last
	// reader) do not overlap. Nil for any other buffer.
	Values   []*ir.Value
	Shape    ir.Shape
	DType    ir.DType
	Layout   ir.Layout
	Mem      ir.MemoryConfig
	PageSize int
	Pages    int
	// Blocks places a weight's pages in blocks (lower.WeightBlocks), or
	// is nil.
	Blocks *kir.BlockLayout
}

// Buffer is the buffer s describes, as programs declare it.
func (s *BufferSpec) Buffer() kir.Buffer {
	return kir.Buffer{Name: s.Name, Mem: s.Mem, DType: s.DType, Layout: s.Layout, PageSize: s.PageSize, Pages: s.Pages, Blocks: s.Blocks}
}

// maxErrors caps the lowering errors Compile reports at once.
const maxErrors = 20

// Compile lowers every op of g (fused and placed: every value DRAM
// interleaved) for target t. On success Build.Programs has one entry per op
// in g.Ops() order, each program valid for t (kir.Validate), and
// Build.Buffers one entry per device buffer, in the order inputs, weights,
// states, op results (program order; a shared buffer where its first value
// is written), with unique names; every buffer a program declares is in
// Build.Buffers with the same page layout (of a shared buffer: the same
// page size, dtype and layout and at most its pages). The intermediate
// values (op results that are neither graph outputs nor written into a
// state's or another value's buffer) share DRAM buffers by liveness
// (planReuse). A graph
// whose buffers do not fit one device's DRAM (GraphMemory) is refused with
// a *DRAMError before any op is lowered. On
// failure the error lists every op that could not be lowered (up to 20),
// each naming the op, its layer, its shapes and the rule broken. g is not
// modified.
func Compile(g *ir.Graph, t *target.Target) (*Build, error) {
	if g == nil {
		return nil, errors.New("codegen: graph is nil")
	}
	if t == nil {
		return nil, fmt.Errorf("codegen: graph %q: target is nil", g.Name)
	}
	if err := ir.Verify(g); err != nil {
		return nil, fmt.Errorf("codegen: graph %q does not verify: %w", g.Name, err)
	}
	ctx := lower.NewContext(t)
	m := newMemo(t)
	ctx.Validate = m.validate
	lm := newLowerMemo(m)
	alias, err := bufferAliases(g)
	if err != nil {
		return nil, err
	}
	ctx.Alias = alias
	ctx.Blocks = weightBlocks(g, t, ctx.Fidelity)
	plan := planReuse(g, alias)
	ctx.Names = plan.names()
	// The DRAM capacity first (rule dram-capacity), before any op is
	// lowered; a value without a page layout is reported below.
	if u, err := graphMemory(g, t, alias, plan, ctx.Blocks); err == nil {
		if err := fits(g, t, u); err != nil {
			return nil, err
		}
	}
	b := &Build{Graph: g, Target: t, printed: m.printed, views: map[*ir.Value]*ir.Value{}, shared: map[*ir.Value]int{}}
	byName := map[string]*ir.Value{}
	slotAt := map[int]int{} // plan slot -> index in b.Buffers
	var errs []error
	fail := func(err error) {
		if len(errs) < maxErrors {
			errs = append(errs, err)
		}
	}
	addBuffer := func(v *ir.Value, where string) {
		name := ctx.BufferName(v)
		if other, dup := byName[name]; dup {
			fail(fmt.Errorf("codegen: %s: buffer name %q of %s %s is already used by %s %s; weight names must be unique and must not look like t<ID> or s<N>", where, name, v.Kind, v, other.Kind, other))
			return
		}
		byName[name] = v
		ps, pages, err := lower.PageLayout(v.Type)
		if err != nil {
			fail(fmt.Errorf("codegen: %s: %s %s (%q, %s): %w", where, v.Kind, v, v.Name, v.Type, err))
			return
		}
		if !lower.Addressable(v.Type.Mem) {
			fail(fmt.Errorf("codegen: %s: %s %s (%q, %s %s %s) is placed %s; rule placement: device buffers are DRAM interleaved, L1 interleaved or L1 sharded with a shard spec", where, v.Kind, v, v.Name, v.Type.Shape, v.Type.DType, v.Type.Layout, v.Type.Mem))
			return
		}
		b.Buffers = append(b.Buffers, BufferSpec{Name: name, Value: v, Shape: v.Type.Shape.Clone(), DType: v.Type.DType,
			Layout: v.Type.Layout, Mem: v.Type.Mem, PageSize: ps, Pages: pages, Blocks: ctx.Blocks[v]})
	}
	for _, list := range [][]*ir.Value{g.Inputs, g.Weights, g.States} {
		for _, v := range list {
			addBuffer(v, fmt.Sprintf("graph %q", g.Name))
		}
	}
	for _, op := range g.Ops() {
		if isView(op, alias) {
			b.views[op.Result()] = alias[op.Result()]
			continue // its result is its operand's buffer (viewAliases)
		}
		for _, r := range op.Results {
			s, isShared := plan.slot[r]
			switch _, inPlace := alias[r]; {
			case inPlace:
			case !isShared:
				addBuffer(r, op.Where())
			default:
				at, added := slotAt[s]
				if !added {
					at = len(b.Buffers)
					addBuffer(plan.slots[s].Largest, op.Where())
					if len(b.Buffers) == at {
						continue // addBuffer failed
					}
					b.Buffers[at].Values = plan.slots[s].Values
					slotAt[s] = at
				}
				b.shared[r] = at
			}
		}
		p, err := lm.lower(op, ctx)
		if err != nil {
			fail(fmt.Errorf("codegen: %w", err))
			continue
		}
		b.Programs = append(b.Programs, &Program{Op: op, Kernel: p})
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("codegen: graph %q: %d problem(s):\n%w", g.Name, len(errs), errors.Join(errs...))
	}
	if err := b.checkBuffers(); err != nil {
		return nil, err
	}
	return b, nil
}

// weightBlocks places every weight of g that only the matmul engine reads
// in blocks (lower.WeightBlocks).
func weightBlocks(g *ir.Graph, t *target.Target, fid ir.MathFidelity) map[*ir.Value]*kir.BlockLayout {
	uses := map[*ir.Value][]*ir.Op{}
	for _, op := range g.Ops() {
		for _, v := range op.Operands {
			if v.Kind == ir.KindWeight && (len(uses[v]) == 0 || uses[v][len(uses[v])-1] != op) {
				uses[v] = append(uses[v], op)
			}
		}
	}
	out := map[*ir.Value]*kir.BlockLayout{}
	for _, w := range g.Weights {
		if l := lower.WeightBlocks(t, w, uses[w], fid); l != nil {
			out[w] = l
		}
	}
	return out
}

// bufferAliases is stateAliases plus viewAliases: every value written into
// (or read from) another value's buffer, mapped to that value.
func bufferAliases(g *ir.Graph) (map[*ir.Value]*ir.Value, error) {
	alias, err := stateAliases(g)
	if err != nil {
		return nil, err
	}
	viewAliases(g, alias)
	return alias, nil
}

// viewAliases adds to alias every reshape whose result is a view of its
// operand (lower.ReshapeIsView: same pages, byte for byte), mapped to the
// buffer the operand lives in, so Compile builds no program for it (a
// 256-token prefill step had ~700 such page copies per device, e.g.
// [1,24,256,128] -> [1,24,8,32,128] into chunks). Only values no program
// writes after the reshape qualify: the operand is an op result or an
// input (not a state, which a later op may update in place, nor a weight,
// whose pages may be laid out in blocks), and the result is neither a
// graph output nor a state's new value (those are writes into their own
// buffers).
func viewAliases(g *ir.Graph, alias map[*ir.Value]*ir.Value) {
	pinned := map[*ir.Value]bool{}
	for _, v := range g.Outputs {
		pinned[v] = true
	}
	for _, v := range g.StateUpdates {
		pinned[v] = true
	}
	for _, op := range g.Ops() {
		if op.Kind != ir.OpReshape || len(op.Operands) != 1 || len(op.Results) != 1 {
			continue
		}
		x, out := op.Operands[0], op.Result()
		root := x
		if a, ok := alias[x]; ok {
			root = a
		}
		if pinned[out] || (root.Kind != ir.KindResult && root.Kind != ir.KindInput) || !lower.ReshapeIsView(x, out) {
			continue
		}
		alias[out] = root
	}
}

// isView reports whether op is a reshape viewAliases made a view: its
// result's buffer is its operand's.
func isView(op *ir.Op, alias map[*ir.Value]*ir.Value) bool {
	if op.Kind != ir.OpReshape || len(op.Results) != 1 {
		return false
	}
	a, ok := alias[op.Result()]
	return ok && a.Kind != ir.KindState
}

// stateAliases maps each state's new value to the state, so the op that
// computes it writes the state's buffer in place. That is sound only when
// no op reads the old state after the new contents are written and the new
// value has the state's page layout; otherwise Compile fails naming the
// state and the late reader (rule: persistent state is updated in place).
func stateAliases(g *ir.Graph) (map[*ir.Value]*ir.Value, error) {
	alias := map[*ir.Value]*ir.Value{}
	pos := map[*ir.Op]int{}
	for i, op := range g.Ops() {
		pos[op] = i
	}
	for _, s := range g.States {
		nv, ok := g.StateUpdates[s]
		if !ok || nv == s {
			continue
		}
		if nv.Def == nil {
			return nil, fmt.Errorf("codegen: state %q is updated to %s, which no op computes", s.Name, nv)
		}
		if nv.Type.DType != s.Type.DType || nv.Type.Layout != s.Type.Layout || !nv.Type.Shape.Equal(s.Type.Shape) {
			return nil, fmt.Errorf("codegen: state %q is %s but its new value (%s) is %s; rule in-place state: the update must have the state's type", s.Name, s.Type, nv.Def.Where(), nv.Type)
		}
		for _, op := range g.Ops() {
			if pos[op] <= pos[nv.Def] {
				continue
			}
			for _, v := range op.Operands {
				if v == s {
					return nil, fmt.Errorf("codegen: state %q is read by %s after %s writes its new contents; rule in-place state: every read of the old state must come first", s.Name, op.Where(), nv.Def.Where())
				}
			}
		}
		alias[nv] = s
	}
	return alias, nil
}

// Buffer returns the spec called name, or nil.
func (b *Build) Buffer(name string) *BufferSpec {
	for i := range b.Buffers {
		if b.Buffers[i].Name == name {
			return &b.Buffers[i]
		}
	}
	return nil
}

// BufferOf returns the spec of the buffer holding value v (for a state's
// new value, the state's own buffer; for a reshape view, its operand's
// buffer; for a value in a shared buffer, that buffer, the same spec for
// each of its values), or nil.
func (b *Build) BufferOf(v *ir.Value) *BufferSpec {
	v = b.Holder(v)
	if i, ok := b.shared[v]; ok {
		return &b.Buffers[i]
	}
	for i := range b.Buffers {
		if b.Buffers[i].Value == v {
			return &b.Buffers[i]
		}
	}
	return nil
}

// Holder is the value whose page layout v's contents have in its buffer
// (BufferOf): a reshape view's operand, a state's new value's state, else v
// itself. A shared buffer holds each of its values in that value's own
// layout, over the first of its pages.
func (b *Build) Holder(v *ir.Value) *ir.Value {
	if root, ok := b.views[v]; ok {
		v = root
	}
	for s, nv := range b.Graph.StateUpdates {
		if nv == v {
			return s
		}
	}
	return v
}

// checkBuffers checks that every buffer a program declares is a build
// buffer with the same layout (a lowering bug otherwise).
func (b *Build) checkBuffers() error {
	byName := make(map[string]*BufferSpec, len(b.Buffers))
	for i := range b.Buffers {
		if _, dup := byName[b.Buffers[i].Name]; !dup { // Buffer finds the first
			byName[b.Buffers[i].Name] = &b.Buffers[i]
		}
	}
	for _, p := range b.Programs {
		for _, pb := range p.Kernel.Buffers {
			s := byName[pb.Name]
			if s == nil {
				return fmt.Errorf("codegen: %s: program %q declares buffer %q, which no graph value holds", p.Op.Where(), p.Kernel.Name, pb.Name)
			}
			if (s.Blocks == nil) != (pb.Blocks == nil) || s.Blocks != nil && *s.Blocks != *pb.Blocks {
				return fmt.Errorf("codegen: %s: program %q declares buffer %q with block layout %v; the build places it %v", p.Op.Where(), p.Kernel.Name, pb.Name, pb.Blocks, s.Blocks)
			}
			pagesOK := s.Pages == pb.Pages || s.Values != nil && pb.Pages <= s.Pages
			if s.PageSize != pb.PageSize || !pagesOK || s.DType != pb.DType || s.Layout != pb.Layout {
				return fmt.Errorf("codegen: %s: program %q declares buffer %q as %d pages of %d bytes (%s %s); the build has %d pages of %d bytes (%s %s)",
					p.Op.Where(), p.Kernel.Name, pb.Name, pb.Pages, pb.PageSize, pb.DType, pb.Layout, s.Pages, s.PageSize, s.DType, s.Layout)
			}
		}
	}
	return nil
}
