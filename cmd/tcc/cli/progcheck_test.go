package cli

import (
	"math"
	"testing"
)

// TestSameValue: --check's per-program comparison is bit for bit, zeros
// by sign too (the card's FPU writes +0 and its SFPU's sign flip -0, and
// the reference follows both), with NaN equal to NaN.
func TestSameValue(t *testing.T) {
	negZero := float32(math.Copysign(0, -1))
	nan := float32(math.NaN())
	tests := []struct {
		name string
		a, b float32
		want bool
	}{
		{"equal", 1.5, 1.5, true},
		{"last_bit", 1, math.Nextafter32(1, 2), false},
		{"zero_signs", 0, negZero, false},
		{"neg_zeros", negZero, negZero, true},
		{"nans", nan, -nan, true},
		{"nan_and_number", nan, 1, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := sameValue(tc.a, tc.b); got != tc.want {
				t.Errorf("sameValue(%g, %g) = %v, want %v", tc.a, tc.b, got, tc.want)
			}
		})
	}
}
