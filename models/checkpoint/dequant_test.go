package checkpoint

import (
	"math"
	"math/rand"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tcc-dev/tcc/ir/numerics"
	"github.com/tcc-dev/tcc/models/safetensors"
)

func TestDequantNVFP4Hand(t *testing.T) {
	// byte 0: low nibble 1 (0.5) is column 0, high nibble 0xA (-1) column 1;
	// byte 1: 7 (6) and 0 (0). scale 2 (e4m3 0x40), global 4: w = e2m1*2/4.
	packed := make([]byte, 8)
	packed[0], packed[1] = 0xA1, 0x07
	scale := []float32{safetensors.F8E4M3ToFloat32(0x40)}
	got, err := DequantNVFP4(packed, scale, 4, 1, 16)
	if err != nil {
		t.Fatal(err)
	}
	want := make([]float32, 16)
	want[0], want[1], want[2] = 0.25, -0.5, 3
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	for _, tt := range []struct {
		name   string
		packed []byte
		scale  []float32
		global float32
	}{
		{"short packed", make([]byte, 7), scale, 4},
		{"short scale", packed, nil, 4},
		{"zero global", packed, scale, 0},
		{"nan global", packed, scale, float32(math.NaN())},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := DequantNVFP4(tt.packed, tt.scale, tt.global, 1, 16); err == nil {
				t.Error("no error")
			}
		})
	}
}

func TestDequantFP8Blocks(t *testing.T) {
	// [3, 3] in [2, 2] blocks: scales [[1, 2], [4, 8]], partial edge blocks.
	q := []float32{1, 1, 1, 1, 1, 1, 1, 1, 1}
	got, err := DequantFP8(q, []float32{1, 2, 4, 8}, 3, 3, 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]float32{1, 1, 2, 1, 1, 2, 4, 4, 8}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if got, _ := DequantFP8([]float32{2, 3}, []float32{0.5}, 1, 2, 0, 0); !cmp.Equal(got, []float32{1, 1.5}) {
		t.Errorf("per-tensor scale: got %v, want [1 1.5]", got)
	}
	if _, err := DequantFP8(q, []float32{1, 2}, 3, 3, 2, 2); err == nil {
		t.Error("wrong scale count accepted")
	}
}

func norm(v []float32) float64 {
	s := 0.0
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	return math.Sqrt(s)
}

// TestNVFP4GlobalScaleDivides: the dequantised weight has the reference's
// norm; an inverted global scale keeps PCC (a scalar factor) but moves the
// norm ratio by global^2, which the ratio check catches.
func TestNVFP4GlobalScaleDivides(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	rows, cols := 64, 128
	w := make([]float32, rows*cols)
	for i := range w {
		w[i] = float32(rng.NormFloat64() * 0.02)
	}
	bf := make([]float32, len(w))
	for i, v := range w {
		bf[i] = numerics.RoundBF16(v)
	}
	packed, sb, global := QuantizeNVFP4(w, rows, cols)
	scale, _ := safetensors.ToFloat32(safetensors.F8E4M3, sb)
	good, err := DequantNVFP4(packed, scale, global, rows, cols)
	if err != nil {
		t.Fatal(err)
	}
	inverted, _ := DequantNVFP4(packed, scale, 1/global, rows, cols)
	for _, tt := range []struct {
		name   string
		w      []float32
		wantOK bool
	}{{"divides", good, true}, {"inverted", inverted, false}} {
		t.Run(tt.name, func(t *testing.T) {
			pcc := numerics.PCC(bf, tt.w)
			ratio := norm(tt.w) / norm(bf)
			t.Logf("PCC %.5f, norm ratio %.4g (global scale %.4g)", pcc, ratio, global)
			if pcc < 0.98 {
				t.Errorf("PCC %.5f < 0.98", pcc)
			}
			if ok := ratio > 0.95 && ratio < 1.05; ok != tt.wantOK {
				t.Errorf("norm ratio %.4g: within 5%% = %v, want %v", ratio, ok, tt.wantOK)
			}
		})
	}
}

// TestNearestE2M1SearchesHalf: nearestE2M1, which skips the negative
// codes for a value and scale >= 0 and stops at the first code whose value
// reaches v, returns the code the search over all 16 codes returns (the
// first nearest), on random values, scales (a subnormal and an infinite
// one among them), zeros, ties and NaN.
func TestNearestE2M1SearchesHalf(t *testing.T) {
	whole := func(v, s float32) uint8 {
		best, bestErr := uint8(0), float32(math.Inf(1))
		for c := uint8(0); c < 16; c++ {
			if d := float32(math.Abs(float64(e2m1[c]*s - v))); d < bestErr {
				best, bestErr = c, d
			}
		}
		return best
	}
	rng := rand.New(rand.NewSource(2))
	vals := []float32{0, float32(math.Copysign(0, -1)), 0.25, 0.75, 5, -5, 7, float32(math.NaN()), float32(math.Inf(1))}
	for range 20000 {
		vals = append(vals, float32(rng.NormFloat64()*4))
	}
	for _, s := range []float32{0, 1, 0.5, 0.37, 2.5, 1e-40, float32(math.Inf(1))} {
		for _, v := range vals {
			if got, want := nearestE2M1(v, s), whole(v, s); got != want {
				t.Fatalf("nearestE2M1(%v, %v) = %d, the whole search gives %d", v, s, got, want)
			}
		}
	}
}
