package lower

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestSplitBalance checks Split.Balance: contiguous ranges covering every
// item once whose largest weight is the least possible.
func TestSplitBalance(t *testing.T) {
	for _, tc := range []struct {
		name       string
		weights    []int
		cores      int
		wantBounds []int
		wantMax    int
	}{
		{"even", []int{1, 1, 1, 1, 1, 1}, 3, []int{0, 2, 4, 6}, 2},
		{"heavy items alone", []int{1, 1, 1, 1, 8, 8, 1, 1}, 4, []int{0, 4, 5, 6, 8}, 8},
		{"more cores than items", []int{3, 2}, 4, []int{0, 1, 2, 2, 2}, 3},
		{"one core", []int{2, 5, 1}, 1, []int{0, 3}, 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := Split{Items: len(tc.weights), Cores: tc.cores}.Balance(func(i int) int { return tc.weights[i] })
			if diff := cmp.Diff(tc.wantBounds, s.Bounds); diff != "" {
				t.Errorf("bounds (-want +got):\n%s", diff)
			}
			most := 0
			for c := range tc.cores {
				st, n := s.Range(c)
				sum := 0
				for _, w := range tc.weights[st : st+n] {
					sum += w
				}
				most = max(most, sum)
			}
			if most != tc.wantMax {
				t.Errorf("largest range weight %d, want %d", most, tc.wantMax)
			}
		})
	}
}
