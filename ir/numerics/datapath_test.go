package numerics

import (
	"bufio"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/tcc-dev/tcc/ir"
)

// TestDatapathMatchesTTSim replays testdata/fpu_datapath.txt: MVMUL,
// ELWADD and ELWMUL lanes as ttsim's bit-exact Blackhole model computes
// them. IEEE float32 arithmetic fails most of these lines.
func TestDatapathMatchesTTSim(t *testing.T) {
	f, err := os.Open("testdata/fpu_datapath.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	counts := map[string]int{}
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		text := sc.Text()
		if text == "" || text[0] == '#' {
			continue
		}
		fs := strings.Fields(text)
		h := func(i int) uint32 {
			v, err := strconv.ParseUint(fs[i], 16, 32)
			if err != nil {
				t.Fatalf("line %d: field %d: %v", line, i, err)
			}
			return uint32(v)
		}
		fp32 := fs[1] == "1"
		var got, want uint32
		switch fs[0] {
		case "mvmul":
			var a, b [16]uint32
			for i := range a {
				a[i], b[i] = h(4+i), h(20+i)
			}
			got, want = mvmulLane(a[:], b[:], h(3), int(h(2)), fp32), h(36)
		case "elwadd":
			got, want = elwaddLane(h(2), h(3), fp32), h(4)
		case "elwmul":
			got, want = elwmulLane(h(4), h(5), h(3), int(h(2)), fp32), h(6)
		default:
			t.Fatalf("line %d: unknown op %q", line, fs[0])
		}
		counts[fs[0]]++
		if got != want {
			t.Errorf("line %d (%s): got %08x, ttsim %08x", line, text[:min(len(text), 60)], got, want)
		}
	}
	for _, op := range []string{"mvmul", "elwadd", "elwmul"} {
		if counts[op] < 100 {
			t.Errorf("%d %s vectors, want at least 100", counts[op], op)
		}
	}
}

func TestDatapathHand(t *testing.T) {
	bits := math.Float32frombits
	tests := []struct {
		name      string
		got, want float32
	}{
		// 2^-12 is shifted out of the 11-bit aligned mantissa (IEEE: 1.000244).
		{"add drops bits below 11", FPUAdd(1, 0x1p-12, true), 1},
		// 1.5*2^-10 aligns to 0x600>>10 rounded half up = 2 units of 2^-10.
		{"add rounds the aligned operand half up", FPUAdd(1, 1.5*0x1p-10, true), 1 + 0x1p-9},
		{"sub is add of the negation", FPUSub(1, 0.5, true), 0.5},
		// bf16 DEST: 1 + 3*2^-8 rounds half up to 1 + 2^-6 (ties-to-even would too; 1+5*2^-8 shows it).
		{"bf16 DEST rounds half up", FPUAdd(1, 5*0x1p-8, false), 1 + 3*0x1p-7},
		{"mul at HiFi4 is exact for bf16", FPUMul(1.5, 1.25, 0, ir.HiFi4, true), 1.875},
		{"mul at LoFi drops SrcA's low bits", FPUMul(1+0x1p-6, 1, 0, ir.LoFi, true), 1},
		{"mul accumulates into DEST", FPUMul(2, 3, 1, ir.HiFi4, true), 7},
		{"packer ties round away from zero", FromBF16Bits(PackerBF16(bits(0x3F808000))), bits(0x3F810000)},
		{"packer ties round away from zero (negative)", FromBF16Bits(PackerBF16(bits(0xBF808000))), bits(0xBF810000)},
		{"packer NaN becomes Inf", FromBF16Bits(PackerBF16(bits(0x7FC00001))), float32(math.Inf(1))},
		{"packer flushes below the smallest normal to +0", FromBF16Bits(PackerBF16(bits(0x80400000))), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if math.Float32bits(tt.got) != math.Float32bits(tt.want) {
				t.Errorf("got %v (%#08x), want %v (%#08x)", tt.got, math.Float32bits(tt.got), tt.want, math.Float32bits(tt.want))
			}
		})
	}
}

func TestMatmulTileGroupAlignment(t *testing.T) {
	// Row 0 of in0 is [1, 2^-20, 0...], column 0 of in1 all ones: the
	// 2^-20 product is aligned away inside its group of eight (IEEE:
	// 1 + 2^-20, representable in fp32).
	a := make([]float32, TileElems)
	b := make([]float32, TileElems)
	a[FaceIndex(0, 0)], a[FaceIndex(0, 1)] = 1, 0x1p-20
	for k := 0; k < TileDim; k++ {
		b[FaceIndex(k, 0)] = 1
	}
	acc := make([]float32, TileElems)
	MatmulTile(acc, a, b, ir.HiFi4, true)
	if got := acc[FaceIndex(0, 0)]; got != 1 {
		t.Errorf("acc[0][0] = %v, want 1 (the 2^-20 product is below the group's alignment)", got)
	}
	// In different groups of eight (k 0 and k 8) both survive: each group
	// is aligned on its own and the two sums meet in fp32.
	a[FaceIndex(0, 1)], a[FaceIndex(0, 8)] = 0, 0x1p-20
	clear(acc)
	MatmulTile(acc, a, b, ir.HiFi4, true)
	if got := acc[FaceIndex(0, 0)]; got != 1+0x1p-20 {
		t.Errorf("acc[0][0] = %v, want 1+2^-20 (separate groups)", got)
	}
}

func BenchmarkMatmulTile(b *testing.B) {
	x, y, acc := make([]float32, TileElems), make([]float32, TileElems), make([]float32, TileElems)
	for i := range x {
		x[i], y[i] = RoundBF16(float32(i%37)/7-2), RoundBF16(float32(i%29)/5-3)
	}
	for _, f := range []ir.MathFidelity{ir.LoFi, ir.HiFi2, ir.HiFi4} {
		b.Run(f.String(), func(b *testing.B) {
			for b.Loop() {
				MatmulTile(acc, x, y, f, true)
			}
		})
	}
}

// TestMvmulPhases: mvmulPhases, which shares the exponent work of a dot
// product across fidelity phases, gives exactly the sequence of
// per-phase, per-half mvmulParts calls (the lane model checked against
// ttsim above), on random source words with zeros, equal and far-apart
// exponents, at every fidelity and both DEST widths.
func TestMvmulPhases(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	low := false // this case's words all from the bottom of the range
	word := func() uint32 {
		k := rng.IntN(8)
		if low && k > 1 {
			k = 3
		}
		switch k {
		case 0:
			return 0 // zero
		case 1:
			return uint32(rng.IntN(0x400)) | uint32(rng.IntN(2))<<18 // exponent 0: zero
		case 2:
			return 127<<10 | uint32(rng.IntN(0x400)) | uint32(rng.IntN(2))<<18 // around 1
		case 3:
			// products whose exponent lands at the bottom of DEST's range
			// in some phase (a.exp + b.exp - 127 - 12..0 around 0)
			return uint32(60+rng.IntN(16))<<10 | uint32(rng.IntN(0x400)) | uint32(rng.IntN(2))<<18
		}
		return uint32(rng.IntN(1 << 19))
	}
	for n := 0; n < 20000; n++ {
		low = n%2 == 1
		var a, b [32]srcParts
		for i := range a {
			a[i], b[i] = partsA(word()), partsB(word())
		}
		dst := rng.Uint32()
		switch rng.IntN(4) {
		case 0:
			dst = 0
		case 1:
			dst = dst&0x807FFFFF | uint32(1+rng.IntN(4))<<23 // DEST at the bottom of its range
		}
		phases := 1 + rng.IntN(4)
		fp32 := rng.IntN(2) == 0
		want := dst
		for p := 0; p < phases; p++ {
			want = mvmulParts(a[:16], b[:16], want, p, fp32)
			want = mvmulParts(a[16:], b[16:], want, p, fp32)
		}
		if got := mvmulPhases(a[:], b[:], dst, phases, fp32); got != want {
			t.Fatalf("case %d (phases %d, fp32 %v, dst %#x): mvmulPhases = %#x, per-phase mvmulParts = %#x", n, phases, fp32, dst, got, want)
		}
	}
}

// TestPoolTile: GAPOOL's sum is an mvmul lane per face, not a float32
// running sum: a term far below the largest of its group of eight is
// aligned away (1 + 2^-20 pools to 1, where float32 keeps 1 + 2^-20), the
// faces' phases accumulate onto DEST in turn, and a bf16 DEST holds bf16.
// (On ttsim, tiny-mlp at --seed 2 matches only with this model:
// TestTTSimTinyMLP.)
func TestPoolTile(t *testing.T) {
	line := func(v map[int]float32) []float32 {
		x := make([]float32, TileDim)
		for i, f := range v {
			x[i] = f
		}
		return x
	}
	for _, tc := range []struct {
		name string
		dst  float32
		x    []float32
		s    float32
		fp32 bool
		want float32
	}{
		{"exact terms", 0, line(map[int]float32{0: 1, 5: 2, 20: -0.5}), 1, true, 2.5},
		{"scaler", 1, line(map[int]float32{0: 1.5, 31: 0.25}), 2, true, 4.5},
		{"small term aligned away", 0, line(map[int]float32{0: 1, 1: 0x1p-20}), 1, true, 1},
		{"small term in the other face", 0, line(map[int]float32{0: 1, 16: 0x1p-20}), 1, true, 1 + 0x1p-20},
		{"bf16 DEST", 0, line(map[int]float32{0: 1, 16: 0x1p-10}), 1, false, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := PoolTile(tc.dst, tc.x, tc.s, ir.HiFi4, tc.fp32); got != tc.want {
				t.Errorf("PoolTile = %v (%#08x), want %v (%#08x)", got, math.Float32bits(got), tc.want, math.Float32bits(tc.want))
			}
		})
	}
}

// BenchmarkMatmulRow is Matmul of one row by a [512, 2048] matrix: the
// reference evaluator's decode matmuls, where turning b into source
// words costs as much as the dot products.
func BenchmarkMatmulRow(b *testing.B) {
	const k, n = 512, 2048
	x, w := make([]float32, k), make([]float32, k*n)
	for i := range x {
		x[i] = RoundBF16(float32(i%37)/7 - 2)
	}
	for i := range w {
		w[i] = RoundBF16(float32(i%29)/5 - 3)
	}
	for b.Loop() {
		Matmul(x, w, 1, k, n, ir.HiFi2)
	}
}
