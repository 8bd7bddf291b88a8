package kexec

import (
	"fmt"
	"sort"
)

// region is a half-open address range [start, end).
type region struct{ start, end uint64 }

// allocator is a deterministic first-fit allocator over [lo, hi).
// Bottom-up allocators take the lowest fitting address, top-down ones the
// highest.
type allocator struct {
	lo, hi  uint64
	topDown bool
	used    []region // sorted by start
}

func alignUp(n, a uint64) uint64 { return (n + a - 1) / a * a }

func alignDown(n, a uint64) uint64 { return n / a * a }

// alloc reserves size bytes aligned to align and returns the start address.
func (a *allocator) alloc(size, align uint64) (uint64, error) {
	if size == 0 {
		size = align
	}
	// Gaps between used regions, in address order.
	var gaps []region
	prev := a.lo
	for _, r := range a.used {
		if r.start > prev {
			gaps = append(gaps, region{prev, r.start})
		}
		prev = max(prev, r.end)
	}
	if a.hi > prev {
		gaps = append(gaps, region{prev, a.hi})
	}
	pick := func(g region) (uint64, bool) {
		if a.topDown {
			if g.end < size {
				return 0, false
			}
			s := alignDown(g.end-size, align)
			return s, s >= g.start
		}
		s := alignUp(g.start, align)
		return s, s+size <= g.end
	}
	if a.topDown {
		for i := len(gaps) - 1; i >= 0; i-- {
			if s, ok := pick(gaps[i]); ok {
				a.insert(region{s, s + size})
				return s, nil
			}
		}
	} else {
		for _, g := range gaps {
			if s, ok := pick(g); ok {
				a.insert(region{s, s + size})
				return s, nil
			}
		}
	}
	return 0, fmt.Errorf("out of memory: no free %d bytes in [%#x, %#x)", size, a.lo, a.hi)
}

func (a *allocator) insert(r region) {
	i := sort.Search(len(a.used), func(i int) bool { return a.used[i].start >= r.start })
	a.used = append(a.used, region{})
	copy(a.used[i+1:], a.used[i:])
	a.used[i] = r
}

// free releases the region starting at start.
func (a *allocator) free(start uint64) bool {
	for i, r := range a.used {
		if r.start == start {
			a.used = append(a.used[:i], a.used[i+1:]...)
			return true
		}
	}
	return false
}

// lowest is the lowest allocated address, or hi when nothing is allocated.
func (a *allocator) lowest() uint64 {
	if len(a.used) == 0 {
		return a.hi
	}
	return a.used[0].start
}
