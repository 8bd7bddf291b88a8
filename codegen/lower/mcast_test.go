package lower

import (
	"testing"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower/blocks"
	"github.com/tcc-dev/tcc/codegen/target"
)

// TestMcastGroups: for every core count, the activation multicast's groups
// cover every core once (senders included), no rectangle holds its
// sender or spans a NoC column gap, and each group's destination count is
// the group minus its sender.
func TestMcastGroups(t *testing.T) {
	tg := target.Blackhole()
	for n := 2; n <= tg.NumWorkers(); n++ {
		cores, _ := blocks.FirstCores(tg, n)
		groups, err := mcastGroups(tg, cores)
		if err != nil {
			t.Fatalf("%d cores: %v", n, err)
		}
		seen := map[kir.Core]int{}
		for _, g := range groups {
			seen[g.sender]++
			dests := 0
			for _, r := range g.rects {
				if g.sender.X >= r.x0 && g.sender.X <= r.x1 && g.sender.Y >= r.y0 && g.sender.Y <= r.y1 {
					t.Errorf("%d cores: rectangle %+v holds its sender %v", n, r, g.sender)
				}
				a, _, _ := tg.WorkerNoC(r.x0, r.y0)
				b, _, _ := tg.WorkerNoC(r.x1, r.y0)
				if b-a != r.x1-r.x0 {
					t.Errorf("%d cores: rectangle %+v spans a NoC column gap", n, r)
				}
				for x := r.x0; x <= r.x1; x++ {
					for y := r.y0; y <= r.y1; y++ {
						seen[kir.Core{X: x, Y: y}]++
					}
				}
				dests += r.cores()
			}
			if dests != g.size-1 {
				t.Errorf("%d cores: group %d..%d sends to %d cores, want %d", n, g.x0, g.x1, dests, g.size-1)
			}
		}
		for _, c := range cores {
			if seen[c] != 1 {
				t.Errorf("%d cores: core %v covered %d times, want once", n, c, seen[c])
			}
		}
		if len(seen) != n {
			t.Errorf("%d cores: groups cover %d cores", n, len(seen))
		}
	}
}
