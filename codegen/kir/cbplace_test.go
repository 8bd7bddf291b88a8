package kir

import (
	"testing"

	"github.com/tcc-dev/tcc/ir"
)

func TestCBPlacement(t *testing.T) {
	order := CBPlaceOrder([]int{16, 0, 24, 0, 2})
	want := []int{1, 3, 4, 0, 2} // by index, ties in declaration order
	for i := range want {
		if order[i] != want[i] {
			t.Fatalf("CBPlaceOrder = %v, want %v", order, want)
		}
	}
	a, b := []Core{{X: 0, Y: 0}}, []Core{{X: 1, Y: 0}}
	placed := []CBSpan{{Cores: a, Lo: 1024, Hi: 1100}}
	for _, tc := range []struct {
		name  string
		size  uint64
		cores []Core
		want  uint64
	}{
		{"fits below the placed CB", 64, a, 960},
		{"overlaps it on a shared core: next 64-byte boundary", 128, a, 1152},
		{"another core does not conflict", 128, b, 960},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := FirstFit(960, tc.size, tc.cores, placed); got != tc.want {
				t.Errorf("FirstFit = %d, want %d", got, tc.want)
			}
		})
	}
}

// TestPlacePhaseCBsEarly: the tables a persistent program's CB records are
// written from place a phase's early CBs (Phase.EarlyCBs) from its CBBase,
// above the phase before's CBs, and its other CBs from the base, exactly
// as the simulator places them (PlaceCBs); a phase without early CBs is
// placed from the base in CBPlaceOrder.
func TestPlacePhaseCBsEarly(t *testing.T) {
	rng := []ir.CoreRange{{X0: 0, Y0: 0, X1: 0, Y1: 0}}
	cb := func(i, pages int) CB {
		return CB{Index: i, PageSize: 2048, Pages: pages, Cores: rng}
	}
	ps := &Persist{Phases: []Phase{
		{Name: "serial", CBs: []CB{cb(16, 2), cb(0, 4)}},
		{Name: "early", CBs: []CB{cb(0, 2), cb(5, 6), cb(16, 2)}, CBBase: 0x40000, EarlyCBs: []int{5}},
	}}
	for _, tc := range []struct {
		phase int
		want  map[int]uint32 // CB index -> address
	}{
		{0, map[int]uint32{0: 0x1000, 16: 0x1000 + 4*2048}},
		{1, map[int]uint32{5: 0x40000, 0: 0x1000, 16: 0x1000 + 2*2048}},
	} {
		t.Run(ps.Phases[tc.phase].Name, func(t *testing.T) {
			placed, err := ps.PlacePhaseCBs(tc.phase, 0x1000)
			if err != nil {
				t.Fatal(err)
			}
			got := map[int]uint32{}
			for _, pl := range placed {
				got[pl.CB.Index] = pl.Addr.Const
			}
			for i, a := range tc.want {
				if got[i] != a {
					t.Errorf("CB c_%d at %#x, want %#x (all: %v)", i, got[i], a, got)
				}
			}
			addrs := PlaceCBs(ps.Phases[tc.phase].CBs, 0x1000, ps.Phases[tc.phase].EarlyCBs, uint64(ps.Phases[tc.phase].CBBase))
			for j, c := range ps.Phases[tc.phase].CBs {
				if uint64(got[c.Index]) != addrs[j] {
					t.Errorf("CB c_%d at %#x in the tables, %#x in the simulator", c.Index, got[c.Index], addrs[j])
				}
			}
		})
	}
}
