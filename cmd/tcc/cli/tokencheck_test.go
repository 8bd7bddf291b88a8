package cli

import (
	"strings"
	"testing"

	"github.com/tcc-dev/tcc/ir"
)

func TestULP(t *testing.T) {
	for _, c := range []struct {
		dt   ir.DType
		x    float64
		want float64
	}{
		{ir.BF16, 3, 1.0 / 64}, {ir.BF16, 2.9688, 1.0 / 64}, {ir.BF16, -3, 1.0 / 64},
		{ir.BF16, 1, 1.0 / 128}, {ir.BF16, 0.75, 1.0 / 256}, {ir.BF16, 200, 1},
		{ir.FP32, 1, 1.0 / (1 << 23)},
	} {
		if got := ulp(c.dt, c.x); got != c.want {
			t.Errorf("ulp(%s, %v) = %v, want %v", c.dt, c.x, got, c.want)
		}
	}
}

// TestTokenMismatchTieWindow: a device token the reference ranks within
// tokenTieULPs bf16 ulps of its top logit is a near tie (the recorded B = 10
// case: reference 3.0000 vs 2.9688, 2 ulps); one shifted beyond the window
// is a mismatch, at any magnitude.
func TestTokenMismatchTieWindow(t *testing.T) {
	const top = 7 // the reference's greedy token
	for _, c := range []struct {
		name     string
		top, dev float32 // the reference's logits of its token and of the device's token (5)
		mismatch bool
	}{
		{"recorded B=10: 2 ulps at 3.0", 3.0, 2.96875, false},
		{"4 ulps at 3.0: the window's edge", 3.0, 3.0 - 4.0/64, false},
		{"5 ulps at 3.0: beyond the window", 3.0, 3.0 - 5.0/64, true},
		{"old rule's window at 3.0 (0.03) but 10 ulps", 3.0, 3.0 - 10.0/64, true},
		{"3 ulps at 40", 40, 40 - 3.0/4, false},
		{"shifted 0.3 at 0.5: 77 ulps", 0.5, 0.2, true},
		{"4 ulps at 0.5", 0.5, 0.5 - 4.0/256, false},
		{"5 ulps at 0.5", 0.5, 0.5 - 5.0/256, true},
		{"0.005 at 0.0625: inside the old rule's 0.01, 10 ulps", 0.0625, 0.0625 - 0.005, true},
		{"device token above the reference's top", 3.0, 3.5, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			const vocab = 16
			logits := make([]float32, 2*vocab)
			for i := range logits {
				logits[i] = -4
			}
			// user 0 agrees; user 1's device token is 5
			logits[top], logits[vocab+top], logits[vocab+5] = c.top, c.top, c.dev
			refNext := []float32{top, top}
			got := [][]int{{top}, {5}}
			bad := tokenMismatch(logits, refNext, ir.BF16, got, 2)
			if (bad != "") != c.mismatch {
				t.Errorf("tokenMismatch = %q, want mismatch %v", bad, c.mismatch)
			}
			if c.mismatch && !strings.Contains(bad, "user 1: 5, reference 7") {
				t.Errorf("tokenMismatch = %q does not name user 1", bad)
			}
		})
	}
}
