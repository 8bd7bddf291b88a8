package multicore

import (
	"testing"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower/blocks"
	"github.com/tcc-dev/tcc/codegen/target"
)

// coresFrom is the n worker cores from worker index first, row-major.
func coresFrom(t *target.Target, first, n int) []kir.Core {
	cores := make([]kir.Core, n)
	for i := range cores {
		cores[i] = kir.Core{X: (first + i) % t.GridX, Y: (first + i) / t.GridX}
	}
	return cores
}

// checkCover fails unless rects cover exactly want, each once, and no
// rectangle spans a NoC column or row gap.
func checkCover(t *testing.T, tg *target.Target, rects []Rect, want []kir.Core) {
	t.Helper()
	seen := map[kir.Core]int{}
	for _, r := range rects {
		for y := r.Y0; y <= r.Y1; y++ {
			for x := r.X0; x <= r.X1; x++ {
				seen[kir.Core{X: x, Y: y}]++
			}
		}
		ax, ay, _ := tg.WorkerNoC(r.X0, r.Y0)
		bx, by, _ := tg.WorkerNoC(r.X1, r.Y1)
		if bx-ax != r.X1-r.X0 || by-ay != r.Y1-r.Y0 {
			t.Errorf("rectangle %+v spans a NoC gap (NoC (%d,%d)-(%d,%d))", r, ax, ay, bx, by)
		}
	}
	for _, c := range want {
		if seen[c] != 1 {
			t.Errorf("core %v covered %d times, want once", c, seen[c])
		}
	}
	if len(seen) != len(want) {
		t.Errorf("rectangles cover %d cores, want %d", len(seen), len(want))
	}
}

// TestFollowerRects: the rectangles cover exactly the followers, never
// the leader, and never span a NoC column or row gap.
func TestFollowerRects(t *testing.T) {
	tg := target.Blackhole()
	for _, tc := range []struct {
		name     string
		first, n int
	}{
		{"one row", 0, 9}, {"row and a half", 0, 23}, {"from mid row", 12, 23}, {"pair", 5, 2},
		{"whole grid", 0, 110}, {"across a gap", 6, 3}, {"three rows", 30, 40}, {"grid end", 97, 13},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cores := coresFrom(tg, tc.first, tc.n)
			rects, err := FollowerRects(tg, cores[1:])
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rects {
				if contains(r, cores[0]) {
					t.Errorf("the leader %v is inside %+v", cores[0], r)
				}
			}
			checkCover(t, tg, rects, cores[1:])
		})
	}
}

// TestColumnGroups: for every core count, the multicast's column groups
// are the runs of NoC-contiguous columns the cores use, one group each;
// they cover every core once (senders included), no rectangle holds its
// sender or spans a NoC gap, and each group's destination count is the
// group minus its sender.
func TestColumnGroups(t *testing.T) {
	tg := target.Blackhole()
	run := make([]int, tg.GridX) // column -> its run of NoC-contiguous columns
	for x := 1; x < tg.GridX; x++ {
		a, _, _ := tg.WorkerNoC(x-1, 0)
		b, _, _ := tg.WorkerNoC(x, 0)
		run[x] = run[x-1]
		if b != a+1 {
			run[x]++
		}
	}
	for n := 2; n <= tg.NumWorkers(); n++ {
		cores, _ := blocks.FirstCores(tg, n)
		groups, err := ColumnGroups(tg, cores)
		if err != nil {
			t.Fatalf("%d cores: %v", n, err)
		}
		runs := map[int]bool{}
		for _, c := range cores {
			runs[run[c.X]] = true
		}
		if len(groups) != len(runs) {
			t.Errorf("%d cores: %d groups, want one per NoC column run: %d", n, len(groups), len(runs))
		}
		var all []Rect
		for _, g := range groups {
			for _, c := range g.Members {
				if run[c.X] != run[g.Sender.X] {
					t.Errorf("%d cores: group of %v holds %v across a NoC column gap", n, g.Sender, c)
				}
			}
			all = append(all, Rect{g.Sender.X, g.Sender.Y, g.Sender.X, g.Sender.Y})
			dests := 0
			for _, r := range g.Rects {
				if contains(r, g.Sender) {
					t.Errorf("%d cores: rectangle %+v holds its sender %v", n, r, g.Sender)
				}
				dests += r.Cores()
			}
			all = append(all, g.Rects...)
			if dests != len(g.Members)-1 || g.Members[0] != g.Sender {
				t.Errorf("%d cores: group of %v sends to %d cores, want its %d members but the sender", n, g.Sender, dests, len(g.Members)-1)
			}
		}
		checkCover(t, tg, all, cores)
	}
}

// contains reports whether core c lies in r.
func contains(r Rect, c kir.Core) bool {
	return c.X >= r.X0 && c.X <= r.X1 && c.Y >= r.Y0 && c.Y <= r.Y1
}

// TestRectGroups: with loopback every group is one rectangle multicast
// once, its sender (its first member) inside it; the groups' members
// cover every core once, each group's rectangle holds exactly its
// members, never spans a NoC gap, and counts them all (the loopback
// num_dests), or the group is its sender alone with no rectangle. The
// 108 cores of two row blocks (a prefill matmul's) need 7 senders that
// each send once, where the column groups' 4 senders send up to 3 times.
func TestRectGroups(t *testing.T) {
	tg := target.Blackhole()
	for _, tc := range []struct {
		name          string
		cores, blocks int
		wantGroups    int // -1: not checked
	}{
		{"108 cores in two row blocks", 108, 2, 7},
		{"whole grid", 110, 1, 2},
		{"one row and a bit", 14, 1, 3},
		{"every count", -1, 1, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			counts := []int{tc.cores}
			if tc.cores < 0 {
				counts = nil
				for n := 1; n <= tg.NumWorkers(); n++ {
					counts = append(counts, n)
				}
			}
			for _, n := range counts {
				cores, _ := blocks.FirstCores(tg, n)
				cg, err := BlockColumnGroups(tg, cores, tc.blocks)
				if err != nil {
					t.Fatalf("%d cores: %v", n, err)
				}
				groups, err := RectGroups(tg, cg)
				if err != nil {
					t.Fatalf("%d cores: %v", n, err)
				}
				if tc.wantGroups >= 0 && len(groups) != tc.wantGroups {
					t.Errorf("%d cores: %d rectangle groups, want %d", n, len(groups), tc.wantGroups)
				}
				var all []Rect
				for _, g := range groups {
					if len(g.Members) == 0 || g.Members[0] != g.Sender {
						t.Fatalf("%d cores: group %+v does not start with its sender", n, g)
					}
					r := Rect{g.Sender.X, g.Sender.Y, g.Sender.X, g.Sender.Y}
					switch {
					case len(g.Rects) == 1:
						r = g.Rects[0]
					case len(g.Rects) > 1 || len(g.Members) > 1:
						t.Fatalf("%d cores: group of %v has %d members and rectangles %+v, want one rectangle (or none for a lone sender)", n, g.Sender, len(g.Members), g.Rects)
					}
					if !contains(r, g.Sender) || r.Cores() != len(g.Members) {
						t.Errorf("%d cores: group of %v: rectangle %+v of %d cores, want its %d members, the sender included", n, g.Sender, r, r.Cores(), len(g.Members))
					}
					for _, c := range g.Members {
						if !contains(r, c) {
							t.Errorf("%d cores: member %v outside its group's rectangle %+v", n, c, r)
						}
					}
					all = append(all, r)
				}
				checkCover(t, tg, all, cores)
			}
		})
	}
}
