package codegen

import (
	"fmt"

	"github.com/tcc-dev/tcc/codegen/lower"
	"github.com/tcc-dev/tcc/ir"
)

// reusePlan places the intermediate values of a graph in shared DRAM
// buffers ("slots"): two values share a slot only when their live ranges
// do not overlap. A value's live range runs from the op that writes it to
// the last op that reads it or a reshape view of it (viewAliases), in
// g.Ops() order, which is the order the programs run; an operand and a
// result of one op are both live at that op, so no program reads and
// writes one slot through two values.
type reusePlan struct {
	// slot maps each shared value to its slot's index in slots.
	slot map[*ir.Value]int
	// slots in the order their first value is written.
	slots []reuseSlot
}

// reuseSlot is one shared buffer: the values it holds in turn, in program
// order, and its size.
type reuseSlot struct {
	Name   string
	Values []*ir.Value
	// Largest is the first value of the most pages: the slot has its
	// shape, placement and page layout.
	Largest *ir.Value
	Pages   int
	// end is the index of the op that last reads the slot's current value.
	end int
}

// slotClass is what values sharing a slot have in common: the slot's
// pages are laid out alike for each of them, only their number differs.
type slotClass struct {
	mem      ir.MemoryConfig
	pageSize int
	dtype    ir.DType
	layout   ir.Layout
}

// reusable reports whether v may live in a shared slot: an op result
// written into its own DRAM-interleaved buffer (not a state's new value
// nor a view, alias) that the host does not read after the step (not a
// graph output).
func reusable(v *ir.Value, alias map[*ir.Value]*ir.Value, outputs map[*ir.Value]bool) bool {
	if _, aliased := alias[v]; aliased {
		return false
	}
	return v.Kind == ir.KindResult && !outputs[v] && v.Type.Mem.Kind == ir.DRAMInterleaved && v.Type.Mem.Shard == nil
}

// planReuse assigns the reusable values of g (reusable) to slots by a
// linear scan in program order: at each op, the slots whose value was last
// read by an earlier op become free; each result of the op takes the free
// slot of its class (same placement, page size, dtype and layout) that
// fits it best, the smallest at least as large as the value (ties: the
// lowest index) or, when none is, the largest (grown to the value); a new
// slot when its class has none free. Slots are named "s<index>". The plan
// depends on g alone, so it is the same on every call.
func planReuse(g *ir.Graph, alias map[*ir.Value]*ir.Value) *reusePlan {
	outputs := map[*ir.Value]bool{}
	for _, v := range g.Outputs {
		outputs[v] = true
	}
	root := func(v *ir.Value) *ir.Value {
		if a, ok := alias[v]; ok {
			return a
		}
		return v
	}
	ops := g.Ops()
	lastRead := map[*ir.Value]int{}
	for i, op := range ops {
		for _, v := range op.Operands {
			lastRead[root(v)] = i
		}
	}
	p := &reusePlan{slot: map[*ir.Value]int{}}
	free := map[slotClass][]int{} // free slots of each class, ascending index
	busy := []int{}               // slots holding a live value
	for i, op := range ops {
		// Free the slots whose value no op from i on reads.
		kept := busy[:0]
		for _, s := range busy {
			if p.slots[s].end < i {
				c := classOf(p.slots[s].Largest)
				free[c] = insertSorted(free[c], s)
			} else {
				kept = append(kept, s)
			}
		}
		busy = kept
		for _, r := range op.Results {
			if !reusable(r, alias, outputs) {
				continue
			}
			ps, pages, err := lower.PageLayout(r.Type)
			if err != nil || ps <= 0 {
				continue // reported by Compile and GraphMemory
			}
			end := max(i, lastRead[r])
			c := classOf(r)
			s := pick(p.slots, free[c], pages)
			if s < 0 {
				s = len(p.slots)
				p.slots = append(p.slots, reuseSlot{Name: fmt.Sprintf("s%d", s), Largest: r, Pages: pages})
			} else {
				free[c] = remove(free[c], s)
				if pages > p.slots[s].Pages {
					p.slots[s].Largest, p.slots[s].Pages = r, pages
				}
			}
			p.slots[s].Values = append(p.slots[s].Values, r)
			p.slots[s].end = end
			p.slot[r] = s
			busy = append(busy, s)
		}
	}
	return p
}

// classOf is v's slot class; v has a page layout.
func classOf(v *ir.Value) slotClass {
	ps, _, _ := lower.PageLayout(v.Type)
	return slotClass{mem: v.Type.Mem, pageSize: ps, dtype: v.Type.DType, layout: v.Type.Layout}
}

// pick is the free slot (of cands, ascending) for a value of pages pages:
// the smallest holding at least pages, else the largest; -1 when cands is
// empty. Ties go to the lowest index.
func pick(slots []reuseSlot, cands []int, pages int) int {
	best, largest := -1, -1
	for _, s := range cands {
		n := slots[s].Pages
		if n >= pages && (best < 0 || n < slots[best].Pages) {
			best = s
		}
		if largest < 0 || n > slots[largest].Pages {
			largest = s
		}
	}
	if best >= 0 {
		return best
	}
	return largest
}

func insertSorted(xs []int, x int) []int {
	i := 0
	for i < len(xs) && xs[i] < x {
		i++
	}
	xs = append(xs, 0)
	copy(xs[i+1:], xs[i:])
	xs[i] = x
	return xs
}

func remove(xs []int, x int) []int {
	for i, y := range xs {
		if y == x {
			return append(xs[:i], xs[i+1:]...)
		}
	}
	return xs
}

// names maps every shared value to its slot's name (lower.Context.Names).
func (p *reusePlan) names() map[*ir.Value]string {
	out := make(map[*ir.Value]string, len(p.slot))
	for v, s := range p.slot {
		out[v] = p.slots[s].Name
	}
	return out
}
