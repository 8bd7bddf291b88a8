package numerics

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tcc-dev/tcc/ir"
)

func TestFidelityMul(t *testing.T) {
	// x = 1.9921875 = 1.1111111b (bf16 mantissa 0x7F).
	// As SrcA: A_hi = 1.1111b = 1.9375, A_lo = 0.0000111b = 7/128.
	// As SrcB: B_hi = 1.111111b = 1.984375, B_lo = 2^-7.
	const x = 1.9921875
	tests := []struct {
		name string
		a, b float32 // a feeds SrcA, b feeds SrcB
		f    ir.MathFidelity
		want float32
	}{
		{"LoFi A_hi*B_hi", x, x, ir.LoFi, 1.9375 * 1.984375},                                       // 3.8447265625
		{"HiFi2 adds A_lo*B_hi", x, x, ir.HiFi2, 1.9921875 * 1.984375},                             // 3.9532470703125
		{"HiFi3 adds A_hi*B_lo", x, x, ir.HiFi3, 3.96881103515625 - (7.0/128)*0x1p-7},              // full - A_lo*B_lo = 3.9683837890625
		{"HiFi4 full bf16 product", x, x, ir.HiFi4, 3.96881103515625},                              // x*x exactly
		{"LoFi drops SrcA bit 5", 1.03125, 1, ir.LoFi, 1},                                          // 1+2^-5 is below A_hi's 4 bits
		{"LoFi keeps SrcB bit 5", 1, 1.03125, ir.LoFi, 1.03125},                                    // but within B_hi's 6 bits
		{"HiFi2 restores SrcA bit 5", 1.03125, 1, ir.HiFi2, 1.03125},                               // via A_lo*B_hi
		{"HiFi2 drops SrcB bit 7", 1, 1.0078125, ir.HiFi2, 1},                                      // 1+2^-7 needs B_lo
		{"HiFi3 restores SrcB bit 7", 1, 1.0078125, ir.HiFi3, 1.0078125},                           // via A_hi*B_lo
		{"HiFi3 lacks A_lo*B_lo", 1.0625 + 0x1p-7, 1.0078125, ir.HiFi3, 1.0625*1.0078125 + 0x1p-7}, // A_lo=2^-7 times B_hi=1 only
		{"sign", -1.5, 2, ir.LoFi, -3},
		{"tf32: SrcA ignores its last bit", 1 + 0x1p-10 + 0x1p-20, 1, ir.HiFi4, 1},        // 2^-20 truncated to tf32, 2^-10 unused
		{"tf32: SrcB keeps all 10 bits", 1, 1 + 0x1p-10 + 0x1p-20, ir.HiFi4, 1 + 0x1p-10}, // 2^-20 truncated
		{"tf32: SrcA uses 9 bits", 1 + 0x1p-9, 1, ir.HiFi4, 1 + 0x1p-9},
		{"subnormal input flushes", 0x1p-130, 0x1p100, ir.HiFi4, 0},
		{"subnormal product flushes", 0x1p-70, 0x1p-70, ir.HiFi4, 0},
		{"overflow to Inf", 0x1p100, 0x1p100, ir.HiFi4, float32(math.Inf(1))},
		{"Inf times finite", float32(math.Inf(-1)), 2, ir.HiFi3, float32(math.Inf(-1))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := FidelityMul(tt.a, tt.b, tt.f); got != tt.want {
				t.Errorf("FidelityMul(%v, %v, %s) = %.10g, want %.10g", tt.a, tt.b, tt.f, got, tt.want)
			}
		})
	}
	for _, c := range [][2]float32{{float32(math.Inf(1)), 0}, {float32(math.NaN()), 1}, {1, float32(math.NaN())}} {
		if got := FidelityMul(c[0], c[1], ir.LoFi); !math.IsNaN(float64(got)) {
			t.Errorf("FidelityMul(%v, %v, LoFi) = %v, want NaN", c[0], c[1], got)
		}
	}
}

func TestFidelityMulHiFi4IsExactBF16Product(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for i := 0; i < 5000; i++ {
		a := RoundBF16(float32(r.NormFloat64() * 100))
		b := RoundBF16(float32(r.NormFloat64() * 0.01))
		want := float32(float64(a) * float64(b)) // 8x8-bit product: exact in float32
		if got := FidelityMul(a, b, ir.HiFi4); got != want {
			t.Fatalf("FidelityMul(%v, %v, HiFi4) = %v, want %v", a, b, got, want)
		}
		// Lower fidelities only ever drop bits of the magnitude.
		lo := FidelityMul(a, b, ir.LoFi)
		if math.Abs(float64(lo)) > math.Abs(float64(want)) || (lo != 0 && math.Signbit(float64(lo)) != math.Signbit(float64(want))) {
			t.Fatalf("FidelityMul(%v, %v, LoFi) = %v is not a truncation of %v", a, b, lo, want)
		}
	}
}

func TestFidelityMulPanicsOnUnknownFidelity(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Errorf("FidelityMul accepted fidelity 1")
		}
	}()
	FidelityMul(1, 1, ir.MathFidelity(1))
}

func TestMatmulTileOperandRoles(t *testing.T) {
	// out[0][0] = sum over 32 k of a[0][k]*b[k][0].
	tests := []struct {
		name     string
		a0k, bk0 float32 // row 0 of a (in0) and column 0 of b (in1)
		f        ir.MathFidelity
		want     float32
	}{
		{"in0 feeds SrcB: keeps bit 5 at LoFi", 1.03125, 1, ir.LoFi, 33},
		{"in1 feeds SrcA: drops bit 5 at LoFi", 1, 1.03125, ir.LoFi, 32},
		{"in1 bit 5 back at HiFi2", 1, 1.03125, ir.HiFi2, 33},
		{"in0 bit 7 needs HiFi3", 1.0078125, 1, ir.HiFi2, 32},
		{"in0 bit 7 at HiFi3", 1.0078125, 1, ir.HiFi3, 32.25},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := make([]float32, TileElems)
			b := make([]float32, TileElems)
			for k := 0; k < TileDim; k++ {
				a[FaceIndex(0, k)] = tt.a0k
				b[FaceIndex(k, 0)] = tt.bk0
			}
			acc := make([]float32, TileElems)
			acc[FaceIndex(0, 0)] = 0.5
			acc[FaceIndex(31, 31)] = 7 // untouched: row 31 of a is zero
			MatmulTile(acc, a, b, tt.f, true)
			if got := acc[FaceIndex(0, 0)]; got != tt.want+0.5 {
				t.Errorf("acc[0][0] = %v, want %v", got, tt.want+0.5)
			}
			if got := acc[FaceIndex(31, 31)]; got != 7 {
				t.Errorf("acc[31][31] = %v, want 7 (accumulate, not overwrite)", got)
			}
		})
	}
}

func TestMatmulHand(t *testing.T) {
	a := []float32{1, 2, 3, 4} // [2, 2]
	b := []float32{5, 6, 7, 8} // [2, 2]
	want := []float32{19, 22, 43, 50}
	for _, f := range []ir.MathFidelity{ir.LoFi, ir.HiFi4} { // small integers are exact at any fidelity
		if diff := cmp.Diff(want, Matmul(a, b, 2, 2, 2, f)); diff != "" {
			t.Errorf("Matmul %s mismatch (-want +got):\n%s", f, diff)
		}
	}
	// [1, 3] x [3, 1] with non-square shapes.
	if got := Matmul([]float32{1, 2, 3}, []float32{4, 5, 6}, 1, 3, 1, ir.HiFi2); got[0] != 32 {
		t.Errorf("Matmul dot = %v, want 32", got[0])
	}
}

func TestMatmulMatchesTiledMatmulTile(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	m, k, n := 40, 70, 33
	a := make([]float32, m*k)
	b := make([]float32, k*n)
	for i := range a {
		a[i] = RoundBF16(float32(r.NormFloat64()))
	}
	for i := range b {
		b[i] = float32(r.NormFloat64()) // fp32: exercises the tf32 reduction
	}
	for _, f := range []ir.MathFidelity{ir.LoFi, ir.HiFi2, ir.HiFi3, ir.HiFi4} {
		t.Run(f.String(), func(t *testing.T) {
			at, bt := Tilize(a, m, k), Tilize(b, k, n)
			for i := range bt {
				bt[i] = TruncTF32(bt[i])
			}
			mt, kt, nt := ceilTiles(m), ceilTiles(k), ceilTiles(n)
			out := make([]float32, mt*nt*TileElems)
			for i := 0; i < mt; i++ {
				for j := 0; j < nt; j++ {
					acc := out[(i*nt+j)*TileElems : (i*nt+j+1)*TileElems]
					for p := 0; p < kt; p++ {
						MatmulTile(acc, at[(i*kt+p)*TileElems:(i*kt+p+1)*TileElems], bt[(p*nt+j)*TileElems:(p*nt+j+1)*TileElems], f, true)
					}
				}
			}
			want := Untilize(out, m, n)
			got := Matmul(a, b, m, k, n, f)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Matmul != tiled MatmulTile (-tiled +Matmul):\n%s", diff)
			}
			// MatmulOnto: the same MatmulTile sequence onto a DEST that
			// holds fp32 values first (want is reused as the start).
			start := append([]float32(nil), want...)
			for i := range start {
				start[i] = float32(r.NormFloat64())
			}
			onto := Tilize(start, m, n)
			for i := 0; i < mt; i++ {
				for j := 0; j < nt; j++ {
					acc := onto[(i*nt+j)*TileElems : (i*nt+j+1)*TileElems]
					for p := 0; p < kt; p++ {
						MatmulTile(acc, at[(i*kt+p)*TileElems:(i*kt+p+1)*TileElems], bt[(p*nt+j)*TileElems:(p*nt+j+1)*TileElems], f, true)
					}
				}
			}
			if diff := cmp.Diff(Untilize(onto, m, n), MatmulOnto(start, a, b, m, k, n, f)); diff != "" {
				t.Errorf("MatmulOnto != tiled MatmulTile onto the same DEST (-tiled +MatmulOnto):\n%s", diff)
			}
			// Each product loses at most about 2^-11 of the largest product
			// of its group of eight to the alignment; and the sums are not
			// IEEE float32 sums of the same products.
			ieee := true
			for i := 0; i < m; i++ {
				for j := 0; j < n; j++ {
					var mag float64
					var sum float32
					for p := 0; p < k; p++ {
						mag += math.Abs(float64(a[i*k+p]) * float64(b[p*n+j]))
						sum += FidelityMul(b[p*n+j], a[i*k+p], f)
					}
					if d := math.Abs(float64(got[i*n+j] - sum)); d > mag/256 {
						t.Fatalf("[%d,%d] = %v, IEEE sums %v: differs by %g, more than 2^-8 of the %g sum of |products|", i, j, got[i*n+j], sum, d, mag)
					}
					ieee = ieee && got[i*n+j] == sum
				}
			}
			if ieee {
				t.Errorf("Matmul equals IEEE float32 sums on all %d random sums: the group alignment is not modelled", m*n)
			}
		})
	}
}
