package timing

import "testing"

func TestLayerSet(t *testing.T) {
	for _, tt := range []struct {
		idx  []int
		want string
	}{
		{[]int{5}, "5"},
		{[]int{4, 5, 6}, "4-6"},
		{[]int{3, 7, 11, 15}, "3-15 every 4th"},
		{[]int{0, 2}, "0,2"},
		{[]int{1, 2, 4, 5, 6, 8}, "1-2,4-6,8"},
		{[]int{1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, 16, 17}, "13 of 1-17"},
		{[]int{1, 12, 23}, "1-23 every 11th"},
		{[]int{1, 3, 5}, "1-5 every 2nd"},
	} {
		if got := LayerSet(tt.idx); got != tt.want {
			t.Errorf("LayerSet(%v) = %q, want %q", tt.idx, got, tt.want)
		}
	}
}
