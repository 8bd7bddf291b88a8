package kir

import "sort"

// CB placement: the rule the simulator (sim/kexec) and the runtime
// (runtime/blackhole) share, so a program's CBs sit at the same L1
// addresses on the chip as in the simulator.

// CBSpan is the L1 range [Lo, Hi) a placed CB takes on its cores.
type CBSpan struct {
	Cores  []Core
	Lo, Hi uint64
}

// CBPlaceOrder returns the order in which CBs with these indices (in
// declaration order) are placed: by index, ties in declaration order.
func CBPlaceOrder(indices []int) []int {
	order := make([]int, len(indices))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return indices[order[a]] < indices[order[b]] })
	return order
}

// FirstFit is the address of a CB of size bytes on cores: the lowest
// 64-byte-aligned address at or above base (itself aligned) where it
// overlaps no span of placed that shares a core with it.
func FirstFit(base, size uint64, cores []Core, placed []CBSpan) uint64 {
	on := make(map[Core]bool, len(cores))
	for _, c := range cores {
		on[c] = true
	}
	shares := func(s CBSpan) bool {
		for _, c := range s.Cores {
			if on[c] {
				return true
			}
		}
		return false
	}
	addr := base
	for moved := true; moved; {
		moved = false
		for _, s := range placed {
			if addr >= s.Hi || addr+size <= s.Lo || !shares(s) {
				continue
			}
			addr = (s.Hi + 63) &^ 63
			moved = true
		}
	}
	return addr
}

// PlaceCBs is the L1 address of every CB of cbs without a backing buffer
// (0 for the others), placed in CBPlaceOrder by FirstFit: from base, or,
// when early is not empty, the CBs whose index is in early from earlyBase
// first and then the others from base around them (a persistent program's
// phase whose early CBs must clear the phase before it: Phase.CBBase).
func PlaceCBs(cbs []CB, base uint64, early []int, earlyBase uint64) []uint64 {
	addr := make([]uint64, len(cbs))
	idx := make([]int, len(cbs))
	for i, cb := range cbs {
		idx[i] = cb.Index
	}
	in := func(i int) bool {
		for _, e := range early {
			if e == cbs[i].Index {
				return true
			}
		}
		return false
	}
	var done []CBSpan
	for pass := 0; pass < 2; pass++ {
		from := base
		if pass == 0 {
			if len(early) == 0 {
				continue
			}
			from = earlyBase
		}
		for _, i := range CBPlaceOrder(idx) {
			cb := &cbs[i]
			if cb.Backing != "" || cb.Bytes() <= 0 || in(i) != (pass == 0) {
				continue
			}
			cores := CoresOf(cb.Cores)
			a := FirstFit(from, uint64(cb.Bytes()), cores, done)
			done = append(done, CBSpan{Cores: cores, Lo: a, Hi: a + uint64(cb.Bytes())})
			addr[i] = a
		}
	}
	return addr
}
