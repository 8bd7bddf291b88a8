package multicore

import (
	"fmt"
	"strconv"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/target"
)

// Rect is a rectangle of logical worker cores, corners included.
type Rect struct{ X0, Y0, X1, Y1 int }

// Cores is the number of cores in r.
func (r Rect) Cores() int { return (r.X1 - r.X0 + 1) * (r.Y1 - r.Y0 + 1) }

// Args are r's five multicast argument values for a kernel issuing on NoC
// noc: its corners in that NoC's order (kir.McastCorners), then its number
// of cores (a multicast's num_dests).
func (r Rect) Args(noc int) []kir.ArgValue {
	c := kir.McastCorners(noc, kir.Core{X: r.X0, Y: r.Y0}, kir.Core{X: r.X1, Y: r.Y1})
	return append(c[:], kir.U32(uint32(r.Cores())))
}

// MaxRects bounds the rectangles of FollowerRects, so kernels can declare
// a fixed number of multicast slots.
const MaxRects = 6

// FollowerRects covers exactly cores (consecutive in row-major order) with
// at most MaxRects rectangles whose NoC columns and rows are contiguous, so
// that no multicast rectangle spans a DRAM or PCIe column of the NoC (nor,
// when a sender precedes cores in row-major order, the sender). Rows with
// the same column span merge into one rectangle. More rectangles are an
// error (rule mcast-rect).
func FollowerRects(t *target.Target, cores []kir.Core) ([]Rect, error) {
	nocX := func(c kir.Core) int { nx, _, _ := t.WorkerNoC(c.X, c.Y); return nx }
	nocY := func(y int) int { _, ny, _ := t.WorkerNoC(0, y); return ny }
	var segs []Rect // runs of one grid row, split at NoC gaps
	for i := 0; i < len(cores); {
		c := cores[i]
		j := i + 1
		for j < len(cores) && cores[j].Y == c.Y && cores[j].X == cores[j-1].X+1 && nocX(cores[j]) == nocX(cores[j-1])+1 {
			j++
		}
		segs = append(segs, Rect{X0: c.X, Y0: c.Y, X1: cores[j-1].X, Y1: c.Y})
		i = j
	}
	var out []Rect
	for _, s := range segs {
		merged := false
		for k := range out {
			o := &out[k]
			if o.X0 == s.X0 && o.X1 == s.X1 && o.Y1+1 == s.Y0 && nocY(s.Y0) == nocY(o.Y1)+1 {
				o.Y1 = s.Y1
				merged = true
				break
			}
		}
		if !merged {
			out = append(out, s)
		}
	}
	if len(out) > MaxRects {
		return nil, fmt.Errorf("rule mcast-rect: %d cores need %d multicast rectangles, at most %d are supported", len(cores), len(out), MaxRects)
	}
	return out, nil
}

// Slot is a multicast rectangle as kernel arguments: its NoC corners and
// its number of cores, 0 when the slot is unused on a core.
type Slot struct{ X0, Y0, X1, Y1, Cores kir.ArgRef }

// Addr is the multicast address of L1 address addr on the slot's
// rectangle.
func (s Slot) Addr(addr kir.Expr) kir.MulticastAddr {
	return kir.MulticastAddr{X0: s.X0, Y0: s.Y0, X1: s.X1, Y1: s.Y1, Addr: addr}
}

// DeclareSlots declares n slots through arg (a kernel's RuntimeArg, or a
// CommonArg with its value), in slot order, each as prefix<i>_x0, _y0,
// _x1, _y1 and prefix<i>_<count>.
func DeclareSlots(n int, prefix, count string, arg func(name string) kir.ArgRef) []Slot {
	s := make([]Slot, n)
	for i := range s {
		p := prefix + strconv.Itoa(i) + "_"
		s[i] = Slot{arg(p + "x0"), arg(p + "y0"), arg(p + "x1"), arg(p + "y1"), arg(p + count)}
	}
	return s
}

// SlotValues are the values of n slots (DeclareSlots' order) naming rects
// for a kernel issuing on NoC noc: each rectangle's Args, then zeros for
// the unused slots. rects has at most n rectangles.
func SlotValues(rects []Rect, n, noc int) []kir.ArgValue {
	v := make([]kir.ArgValue, 0, 5*n)
	for i := 0; i < n; i++ {
		if i < len(rects) {
			v = append(v, rects[i].Args(noc)...)
		} else {
			v = append(v, kir.U32(0), kir.U32(0), kir.U32(0), kir.U32(0), kir.U32(0))
		}
	}
	return v
}

// EachSlot emits f for every slot, under `if (cores != 0)`.
func EachSlot(b *kir.Builder, slots []Slot, f func(s Slot)) {
	for _, s := range slots {
		b.If(kir.Ne(s.Cores, kir.C(0)), func() { f(s) })
	}
}
