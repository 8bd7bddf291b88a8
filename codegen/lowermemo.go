package codegen

import (
	"fmt"
	"math"
	"sort"
	"strconv"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower"
	"github.com/tcc-dev/tcc/ir"
)

// lowerMemoOff turns the lowering memo off (tests compare builds with and
// without it).
var lowerMemoOff bool

// lowerMemo lowers each distinct op once per build. Ops of different layers
// usually differ only in the buffers they name (a 256-token prefill step of
// qwen27b at 1x2 lowers 3,254 ops of 61 keys, its decode step 517 of 15):
// an op whose key (lowerKey) was lowered before gets a copy of that
// program with the buffer names mapped position by position and the
// program renamed, instead of a new lowering and validation. Kernel bodies are shared between the copies
// (nothing mutates a program once Lower has finished and validated it), so
// the printer's memo sees one body and prints it once.
type lowerMemo struct {
	m *memo
	// progs holds the first program lowered for each key, or nil when
	// that program names a buffer no op value holds or is not called
	// "<op>_<id>" (its copies could not be renamed; such ops are lowered
	// one by one).
	progs map[string]*lowered
	// key and names are lowerKey's scratch, reused from op to op.
	key   []byte
	names []string
}

// lowered is a memoised program and the buffer names of its op's values,
// in opValues order.
type lowered struct {
	p     *kir.Program
	names []string
}

func newLowerMemo(m *memo) *lowerMemo {
	return &lowerMemo{m: m, progs: map[string]*lowered{}}
}

// lower is lower.Lower(op, ctx), answered from the memo when an op of the
// same key was lowered before. ctx must be the same for every op of the
// build except for the ops themselves (its Alias, Blocks, Fidelity, Ring
// and Target are read per build, not per op).
func (lm *lowerMemo) lower(op *ir.Op, ctx *lower.Context) (*kir.Program, error) {
	if lowerMemoOff || op == nil {
		return lower.Lower(op, ctx)
	}
	key, names, ok := lm.lowerKey(op, ctx)
	if !ok {
		return lower.Lower(op, ctx)
	}
	e, seen := lm.progs[string(key)]
	if seen && e != nil {
		return lm.clone(e, op, names), nil
	}
	p, err := lower.Lower(op, ctx)
	if err != nil || seen {
		return p, err
	}
	if renamable(p, op, names) {
		lm.progs[string(key)] = &lowered{p: p, names: append([]string(nil), names...)}
	} else {
		lm.progs[string(key)] = nil
	}
	return p, nil
}

// programName is the name Lower gives op's program.
func programName(op *ir.Op) string { return op.Name() + "_" + strconv.Itoa(op.ID) }

// renamable reports whether every buffer name p holds is one of names and
// p is called programName(op), so that a copy for another op of the same
// key is renamed completely.
func renamable(p *kir.Program, op *ir.Op, names []string) bool {
	if p.Name != programName(op) {
		return false
	}
	known := func(n string) bool {
		for _, m := range names {
			if m == n {
				return true
			}
		}
		return false
	}
	for _, b := range p.Buffers {
		if !known(b.Name) {
			return false
		}
	}
	for _, c := range p.CBs {
		if c.Backing != "" && !known(c.Backing) {
			return false
		}
	}
	for _, k := range p.Kernels {
		for _, a := range k.Args {
			if a.Value.Buffer != "" && !known(a.Value.Buffer) {
				return false
			}
		}
		for _, ca := range k.RuntimeValues {
			for _, v := range ca.Values {
				if v.Buffer != "" && !known(v.Buffer) {
					return false
				}
			}
		}
	}
	return true
}

// clone is e's program for op, whose op values' buffers are called names:
// the program, its buffers, CBs, semaphores, kernels, arguments and
// runtime values copied with every buffer name mapped from e.names to
// names by position; the kernel bodies, defines, core ranges and the
// runtime values of cores that name no buffer are shared. The printed C++ of each
// kernel is the original's (m.printed).
func (lm *lowerMemo) clone(e *lowered, op *ir.Op, names []string) *kir.Program {
	rename := func(n string) string {
		if n == "" {
			return n
		}
		for i, m := range e.names {
			if m == n {
				return names[i]
			}
		}
		return n // renamable ruled this out
	}
	src := e.p
	p := &kir.Program{Name: programName(op), RowSplit: src.RowSplit}
	p.Buffers = make([]kir.Buffer, len(src.Buffers))
	for i, b := range src.Buffers {
		b.Name = rename(b.Name)
		p.Buffers[i] = b
	}
	if src.CBs != nil {
		p.CBs = make([]kir.CB, len(src.CBs))
		for i, c := range src.CBs {
			c.Backing = rename(c.Backing)
			p.CBs[i] = c
		}
	}
	if src.Semaphores != nil {
		p.Semaphores = append([]kir.Semaphore(nil), src.Semaphores...)
	}
	p.Kernels = make([]*kir.Kernel, len(src.Kernels))
	for i, k := range src.Kernels {
		nk := *k
		if k.Args != nil {
			nk.Args = make([]kir.Arg, len(k.Args))
			for j, a := range k.Args {
				a.Value.Buffer = rename(a.Value.Buffer)
				nk.Args[j] = a
			}
		}
		if k.RuntimeValues != nil {
			nk.RuntimeValues = make([]kir.CoreArgs, len(k.RuntimeValues))
			for j, ca := range k.RuntimeValues {
				// A core's values that name no buffer are shared (most
				// are offsets and counts).
				if !namesBuffer(ca.Values) {
					nk.RuntimeValues[j] = ca
					continue
				}
				vs := make([]kir.ArgValue, len(ca.Values))
				for l, v := range ca.Values {
					v.Buffer = rename(v.Buffer)
					vs[l] = v
				}
				nk.RuntimeValues[j] = kir.CoreArgs{Core: ca.Core, Values: vs}
			}
		}
		p.Kernels[i] = &nk
		if s, ok := lm.m.printed[k]; ok {
			lm.m.printed[&nk] = s
		}
	}
	return p
}

// namesBuffer reports whether a value of vs names a buffer.
func namesBuffer(vs []kir.ArgValue) bool {
	for i := range vs {
		if vs[i].Buffer != "" {
			return true
		}
	}
	return false
}

// lowerKey is the key of op's lowering: everything Lower reads of op and
// its values except the buffer names and the op's id (which only name
// things): the op kind and attributes; for each operand and result its
// kind, type (shape, dtype, layout, placement with its shard spec,
// distribution) and block layout (ctx.Blocks), which earlier value it is
// (the same value twice) and which earlier value's buffer it names (an
// in-place update names its state's buffer). names are the buffer names
// (ctx.BufferName) of op's operands then results. ok is false for an op
// with a nil value or an attribute of a type the key does not know (Lower
// then reports or lowers it by itself). key and names are reused by the
// next call.
func (lm *lowerMemo) lowerKey(op *ir.Op, ctx *lower.Context) (key []byte, names []string, ok bool) {
	b := lm.key[:0]
	num := func(n int) {
		b = strconv.AppendInt(b, int64(n), 10)
		b = append(b, ',')
	}
	num(int(op.Kind))
	attrs := make([]string, 0, len(op.Attrs))
	for k := range op.Attrs {
		attrs = append(attrs, k)
	}
	sort.Strings(attrs)
	for _, k := range attrs {
		b = strconv.AppendQuote(b, k)
		switch v := op.Attrs[k].(type) {
		case int:
			b = append(b, 'i')
			num(v)
		case float64:
			b = append(b, 'f')
			b = strconv.AppendUint(b, math.Float64bits(v), 16)
		case string:
			b = append(b, 's')
			b = strconv.AppendQuote(b, v)
		case []int:
			b = append(b, 'l')
			num(len(v))
			for _, x := range v {
				num(x)
			}
		case ir.DType:
			b = append(b, 'd')
			num(int(v))
		case bool:
			b = append(b, 'b')
			b = strconv.AppendBool(b, v)
		default:
			return nil, nil, false
		}
		b = append(b, ';')
	}
	names = lm.names[:0]
	nOps := len(op.Operands)
	for i := 0; i < nOps+len(op.Results); i++ {
		var v *ir.Value
		if i < nOps {
			v = op.Operands[i]
		} else {
			v = op.Results[i-nOps]
		}
		if v == nil {
			return nil, nil, false
		}
		name := ctx.BufferName(v)
		names = append(names, name)
		b = append(b, '|')
		num(int(v.Kind))
		t := v.Type
		num(len(t.Shape))
		for _, d := range t.Shape {
			num(d)
		}
		num(int(t.DType))
		num(int(t.Layout))
		num(int(t.Mem.Kind))
		if s := t.Mem.Shard; s != nil {
			b = append(b, 's')
			num(s.Grid.X0)
			num(s.Grid.Y0)
			num(s.Grid.X1)
			num(s.Grid.Y1)
			num(s.Shape[0])
			num(s.Shape[1])
		}
		num(t.Dist.Axis)
		if l := ctx.Blocks[v]; l != nil {
			b = append(b, 'b')
			num(l.Kt)
			num(l.Nt)
			num(l.Period)
			num(l.Dest)
			num(l.KB)
		}
		// The first earlier position holding the same value, and the
		// first naming the same buffer (or -1).
		same, sameName := -1, -1
		for j := 0; j < i; j++ {
			var w *ir.Value
			if j < nOps {
				w = op.Operands[j]
			} else {
				w = op.Results[j-nOps]
			}
			if same < 0 && w == v {
				same = j
			}
			if sameName < 0 && names[j] == name {
				sameName = j
			}
		}
		num(same)
		num(sameName)
	}
	lm.key, lm.names = b, names
	return b, names, true
}

// String describes the memo's use for debugging: keys and keys that
// could not be memoised.
func (lm *lowerMemo) String() string {
	n := 0
	for _, e := range lm.progs {
		if e == nil {
			n++
		}
	}
	return fmt.Sprintf("lowering memo: %d keys, %d not renamable", len(lm.progs), n)
}
