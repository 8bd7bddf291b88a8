package kir

import "testing"

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
