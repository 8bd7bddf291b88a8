package checkpoint

import (
	"fmt"
	"math"

	"github.com/tcc-dev/tcc/models/safetensors"
)

// e2m1 holds the values of the 16 E2M1 codes (sign bit 3).
var e2m1 = [16]float32{0, 0.5, 1, 1.5, 2, 3, 4, 6, 0, -0.5, -1, -1.5, -2, -3, -4, -6}

// E2M1 returns the value of a 4-bit E2M1 code.
func E2M1(code uint8) float32 { return e2m1[code&0xF] }

// DequantNVFP4 returns the [rows, cols] float32 weight of packed ([rows,
// cols/2] bytes, low nibble = even column), scale ([rows, cols/16]
// float8_e4m3 values as float32) and the global scale, which divides:
// w = (e2m1 * scale) / global.
func DequantNVFP4(packed []byte, scale []float32, global float32, rows, cols int) ([]float32, error) {
	if cols%16 != 0 {
		return nil, fmt.Errorf("nvfp4: %d input columns are not whole groups of 16", cols)
	}
	if len(packed) != rows*cols/2 {
		return nil, fmt.Errorf("nvfp4: weight_packed has %d bytes, [%d, %d] needs %d", len(packed), rows, cols, rows*cols/2)
	}
	if len(scale) != rows*cols/16 {
		return nil, fmt.Errorf("nvfp4: weight_scale has %d values, [%d, %d/16] needs %d", len(scale), rows, cols, rows*cols/16)
	}
	if !(global > 0) || math.IsInf(float64(global), 0) {
		return nil, fmt.Errorf("nvfp4: weight_global_scale %v is not a positive finite number", global)
	}
	out := make([]float32, rows*cols)
	for i := range out {
		b := packed[i/2]
		code := b & 0xF
		if i%2 == 1 {
			code = b >> 4
		}
		out[i] = e2m1[code] * scale[i/16] / global
	}
	return out, nil
}

// DequantFP8 returns the [rows, cols] float32 weight of q (float8_e4m3
// values as float32) times its scale: one scale (len(scale) == 1) or one
// per [br, bc] block, scale [ceil(rows/br), ceil(cols/bc)] row-major.
func DequantFP8(q []float32, scale []float32, rows, cols, br, bc int) ([]float32, error) {
	if len(q) != rows*cols {
		return nil, fmt.Errorf("fp8: %d values for [%d, %d]", len(q), rows, cols)
	}
	out := make([]float32, len(q))
	if len(scale) == 1 {
		for i, v := range q {
			out[i] = v * scale[0]
		}
		return out, nil
	}
	if br < 1 || bc < 1 {
		return nil, fmt.Errorf("fp8: %d scales but no weight_block_size", len(scale))
	}
	sr, sc := (rows+br-1)/br, (cols+bc-1)/bc
	if len(scale) != sr*sc {
		return nil, fmt.Errorf("fp8: weight_scale_inv has %d values, [%d, %d] in [%d, %d] blocks needs [%d, %d]", len(scale), rows, cols, br, bc, sr, sc)
	}
	for r := 0; r < rows; r++ {
		for c := 0; c < cols; c++ {
			out[r*cols+c] = q[r*cols+c] * scale[(r/br)*sc+c/bc]
		}
	}
	return out, nil
}

// QuantizeNVFP4 is the inverse test helper: it quantises a [rows, cols]
// weight the way llm-compressor does (global = 448*6/amax, per-group
// scale = amax_group/6 * global rounded to float8_e4m3, codes rounded to
// the nearest E2M1 value) and returns the packed codes, the scales and
// the global scale.
func QuantizeNVFP4(w []float32, rows, cols int) (packed []byte, scale []byte, global float32) {
	amax := float32(0)
	for _, v := range w {
		amax = max(amax, float32(math.Abs(float64(v))))
	}
	if amax == 0 {
		amax = 1
	}
	global = 448 * 6 / amax
	packed = make([]byte, rows*cols/2)
	scale = make([]byte, rows*cols/16)
	for g := 0; g < rows*cols/16; g++ {
		ga := float32(0)
		for _, v := range w[g*16 : g*16+16] {
			ga = max(ga, float32(math.Abs(float64(v))))
		}
		sb := safetensors.Float32ToF8E4M3(ga / 6 * global)
		scale[g] = sb
		s := safetensors.F8E4M3ToFloat32(sb) / global
		for j := 0; j < 16; j++ {
			i := g*16 + j
			code := nearestE2M1(w[i], s)
			if i%2 == 0 {
				packed[i/2] |= code
			} else {
				packed[i/2] |= code << 4
			}
		}
	}
	return packed, scale, global
}

func nearestE2M1(v, s float32) uint8 {
	best, bestErr := uint8(0), float32(math.Inf(1))
	// With v and s >= 0 no negative code (8..15) is nearer than the
	// positive one of its magnitude, which comes first: the search stops
	// at 8 and returns what the whole one would. The positive codes'
	// values e2m1[c]*s rise with c (rounding keeps the order), so once
	// one reaches v the later ones are no nearer: the search stops there.
	n, up := uint8(16), false
	if v >= 0 && s >= 0 {
		n, up = 8, true
	}
	for c := uint8(0); c < n; c++ {
		if d := math.Float32frombits(math.Float32bits(e2m1[c]*s-v) &^ (1 << 31)); d < bestErr {
			best, bestErr = c, d
		}
		if up && e2m1[c]*s >= v {
			break
		}
	}
	return best
}
