package lower

import (
	"reflect"
	"testing"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower/blocks"
	"github.com/tcc-dev/tcc/codegen/target"
)

// TestPrologueItems checks the item list both attention prologues split
// over the cores: the segments q, k, gate, v, then one copy item per kv
// head of each cache not updated in place, back to back, and the norm
// units of each item (what the compute kernel of a core iterates over).
func TestPrologueItems(t *testing.T) {
	// want: the units of a user's items, in order
	cases := map[string]struct {
		q, k, gate, v, copies int
		inPlaceK, inPlaceV    bool
		kUnits                int
		want                  []int
	}{
		"decode_in_place":  {1, 1, 1, 1, 2, true, true, 1, []int{1, 1, 0, 0}},
		"decode_copies":    {2, 1, 2, 1, 3, false, false, 1, []int{1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0}},
		"prefill_k_copied": {3, 2, 2, 2, 2, false, true, 4, []int{1, 1, 1, 4, 4, 0, 0, 0, 0, 0, 0}},
		"prefill_v_copied": {1, 1, 1, 1, 1, true, false, 3, []int{1, 3, 0, 0, 0}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			it := newPrologueItems(tc.q, tc.k, tc.gate, tc.v, tc.copies, tc.inPlaceK, tc.inPlaceV)
			if it.perUser != len(tc.want) {
				t.Fatalf("perUser = %d, want %d", it.perUser, len(tc.want))
			}
			copies := func(inPlace bool) int {
				if inPlace {
					return 0
				}
				return tc.copies
			}
			next := 0
			for _, s := range []struct {
				name string
				seg  itemSeg
				n    int
			}{{"q", it.q, tc.q}, {"k", it.k, tc.k}, {"gate", it.gate, tc.gate}, {"v", it.v, tc.v},
				{"kcopy", it.kcopy, copies(tc.inPlaceK)}, {"vcopy", it.vcopy, copies(tc.inPlaceV)}} {
				if s.seg.n != s.n || (s.n > 0 && s.seg.lo != next) {
					t.Errorf("%s = %+v, want %d items from %d", s.name, s.seg, s.n, next)
				}
				next += s.seg.n
			}
			for user := range 2 {
				for r, w := range tc.want {
					if got := it.units(user*it.perUser+r, tc.kUnits); got != w {
						t.Errorf("units(user %d, item %d) = %d, want %d", user, r, got, w)
					}
				}
			}
		})
	}
}

// TestSetItemArgs checks the per-core runtime args of a program split by
// items: (start, count) of the reader and the writer, the units of the
// core's items for the compute kernel.
func TestSetItemArgs(t *testing.T) {
	for _, tc := range []struct {
		name  string
		plan  Split
		units func(i int) int
		want  [][3]uint32 // per core: start, count, units
	}{
		{"one_unit_each", Split{Items: 5, Cores: 3, PerCore: 2}, func(int) int { return 1 }, [][3]uint32{{0, 2, 2}, {2, 2, 2}, {4, 1, 1}}},
		{"odd_items_only", Split{Items: 5, Cores: 3, PerCore: 2}, func(i int) int { return i % 2 * 3 }, [][3]uint32{{0, 2, 3}, {2, 2, 3}, {4, 1, 0}}},
		{"one_core", Split{Items: 4, Cores: 1, PerCore: 4}, func(i int) int { return i }, [][3]uint32{{0, 4, 6}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := kir.NewProgram("split")
			cores, rs := blocks.FirstCores(target.Blackhole(), tc.plan.Cores)
			rd, wr := newReader(p, rs), newWriter(p, rs)
			cp := blocks.NewComputeKernel(p, rs, kir.ComputeConfig{})
			for _, k := range []*kir.Kernel{rd, wr} {
				k.RuntimeArg("start")
				k.RuntimeArg("count")
			}
			cp.RuntimeArg("units")
			setItemArgs(cores, tc.plan, rd, cp, wr, tc.units)
			for i, c := range cores {
				w := tc.want[i]
				rw := []kir.ArgValue{kir.U32(w[0]), kir.U32(w[1])}
				for _, k := range []*kir.Kernel{rd, wr} {
					if got := k.RuntimeValuesOn(c); !reflect.DeepEqual(got, rw) {
						t.Errorf("core %d %s args = %v, want %v", i, k.Name, got, rw)
					}
				}
				if got, want := cp.RuntimeValuesOn(c), []kir.ArgValue{kir.U32(w[2])}; !reflect.DeepEqual(got, want) {
					t.Errorf("core %d compute args = %v, want %v", i, got, want)
				}
			}
		})
	}
}

// TestDecodeHeadGroups checks how many q and gate items per tile row of
// heads the decode prologue makes: groups of at least minGroupHeads heads
// dividing H when every head and kv head of a user is in one tile row and
// the items fit one per core, else one.
func TestDecodeHeadGroups(t *testing.T) {
	for _, tc := range []struct {
		name              string
		B, H, Hkv, D, wkr int
		want              int
	}{
		{"27b_b1", 1, 12, 2, 256, 130, 3},
		{"27b_b8", 8, 12, 2, 256, 130, 3},
		{"h18_straddles_row16", 2, 18, 2, 64, 130, 3},
		{"h4_no_smaller_group", 2, 4, 2, 64, 130, 1},
		{"h7_prime", 1, 7, 1, 64, 130, 1},
		{"h40_two_tile_rows", 3, 40, 8, 32, 130, 1},
		{"kv40_two_tile_rows", 1, 40, 40, 32, 130, 1},
		{"too_few_cores", 3, 8, 1, 64, 2, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := prologueDims{B: tc.B, S: 1, H: tc.H, Hkv: tc.Hkv, D: tc.D, R: 32, L: 64}
			if err := d.tiles(); err != nil {
				t.Fatal(err)
			}
			if got := decodeHeadGroups(d, tc.wkr); got != tc.want {
				t.Errorf("decodeHeadGroups(B=%d H=%d Hkv=%d, %d workers) = %d, want %d", tc.B, tc.H, tc.Hkv, tc.wkr, got, tc.want)
			}
		})
	}
}
