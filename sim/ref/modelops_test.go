package ref

import (
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tcc-dev/tcc/ir"
)

// Float64 references of the model ops, written from their Doc lines with
// explicit multi-indices (unravel/ravel), sharing no code with the
// evaluator's axis views and odometers.

func unravel(flat int, shape []int) []int {
	idx := make([]int, len(shape))
	for d := len(shape) - 1; d >= 0; d-- {
		idx[d] = flat % shape[d]
		flat /= shape[d]
	}
	return idx
}

func ravel(idx, shape []int) int {
	off := 0
	for d := range shape {
		off = off*shape[d] + idx[d]
	}
	return off
}

func posAxis(axis, rank int) int {
	if axis < 0 {
		return axis + rank
	}
	return axis
}

// gen64 returns the values of a tensor of shape out whose element at
// index idx is f(idx).
func gen64(out []int, f func(idx []int) float64) []float64 {
	res := make([]float64, numel(out))
	for o := range res {
		res[o] = f(unravel(o, out))
	}
	return res
}

func slice64(x arr, begin, end []int) []float64 {
	out := make([]int, len(begin))
	for d := range out {
		out[d] = end[d] - begin[d]
	}
	return gen64(out, func(idx []int) float64 {
		src := make([]int, len(idx))
		for d := range idx {
			src[d] = idx[d] + begin[d]
		}
		return x.v[ravel(src, x.shape)]
	})
}

func concat64(a, b arr, axis int) []float64 {
	ax := posAxis(axis, len(a.shape))
	out := append([]int(nil), a.shape...)
	out[ax] += b.shape[ax]
	return gen64(out, func(idx []int) float64 {
		if idx[ax] < a.shape[ax] {
			return a.v[ravel(idx, a.shape)]
		}
		j := append([]int(nil), idx...)
		j[ax] -= a.shape[ax]
		return b.v[ravel(j, b.shape)]
	})
}

func pad64(x arr, out []int, value float64) []float64 {
	return gen64(out, func(idx []int) float64 {
		for d := range idx {
			if idx[d] >= x.shape[d] {
				return value
			}
		}
		return x.v[ravel(idx, x.shape)]
	})
}

func repeat64(x arr, reps, axis int) []float64 {
	ax := posAxis(axis, len(x.shape))
	out := append([]int(nil), x.shape...)
	out[ax] *= reps
	return gen64(out, func(idx []int) float64 {
		j := append([]int(nil), idx...)
		j[ax] /= reps
		return x.v[ravel(j, x.shape)]
	})
}

func transpose64(x arr, d0, d1 int) []float64 {
	d0, d1 = posAxis(d0, len(x.shape)), posAxis(d1, len(x.shape))
	out := append([]int(nil), x.shape...)
	out[d0], out[d1] = out[d1], out[d0]
	return gen64(out, func(idx []int) float64 {
		j := append([]int(nil), idx...)
		j[d0], j[d1] = j[d1], j[d0]
		return x.v[ravel(j, x.shape)]
	})
}

func sum64(x arr, axis int) []float64 {
	ax := posAxis(axis, len(x.shape))
	out := append([]int(nil), x.shape...)
	out[ax] = 1
	return gen64(out, func(idx []int) float64 {
		j := append([]int(nil), idx...)
		s := 0.0
		for i := 0; i < x.shape[ax]; i++ {
			j[ax] = i
			s += x.v[ravel(j, x.shape)]
		}
		return s
	})
}

func bmm64(a, b arr) []float64 {
	r := len(a.shape)
	k := a.shape[r-1]
	out := append([]int(nil), a.shape...)
	out[r-1] = b.shape[r-1]
	return gen64(out, func(idx []int) float64 {
		ai := append([]int(nil), idx...)
		bi := append([]int(nil), idx...)
		s := 0.0
		for p := 0; p < k; p++ {
			ai[r-1], bi[r-2] = p, p
			s += a.v[ravel(ai, a.shape)] * b.v[ravel(bi, b.shape)]
		}
		return s
	})
}

// at reads t at output index idx with numpy broadcasting (t aligned at the
// last dim; size-1 dims read index 0).
func at(t arr, idx []int) float64 {
	j := make([]int, len(t.shape))
	for d := range j {
		i := idx[len(idx)-len(t.shape)+d]
		if t.shape[d] == 1 {
			i = 0
		}
		j[d] = i
	}
	return t.v[ravel(j, t.shape)]
}

func rotary64(x, cos, sin arr) []float64 {
	r := len(x.shape)
	R := x.shape[r-1]
	return gen64(x.shape, func(idx []int) float64 {
		i := idx[r-1]
		j := append([]int(nil), idx...)
		var rh float64
		if i < R/2 {
			j[r-1] = i + R/2
			rh = -x.v[ravel(j, x.shape)]
		} else {
			j[r-1] = i - R/2
			rh = x.v[ravel(j, x.shape)]
		}
		return x.v[ravel(idx, x.shape)]*at(cos, idx) + rh*at(sin, idx)
	})
}

func updateCache64(cache, nw arr, pos int) []float64 {
	return gen64(cache.shape, func(idx []int) float64 {
		if idx[2] == pos {
			return nw.v[ravel([]int{idx[0], idx[1], idx[3]}, nw.shape)]
		}
		return cache.v[ravel(idx, cache.shape)]
	})
}

func sdpa64(q, k, v arr, pos int, scale float64) []float64 {
	G := q.shape[1] / k.shape[1]
	D := q.shape[2]
	return gen64(q.shape, func(idx []int) float64 {
		b, h, i := idx[0], idx[1], idx[2]
		w := make([]float64, pos+1)
		total := 0.0
		for t := range w {
			dot := 0.0
			for e := 0; e < D; e++ {
				dot += q.v[ravel([]int{b, h, e}, q.shape)] * k.v[ravel([]int{b, h / G, t, e}, k.shape)]
			}
			w[t] = math.Exp(scale * dot)
			total += w[t]
		}
		o := 0.0
		for t := range w {
			o += w[t] / total * v.v[ravel([]int{b, h / G, t, i}, v.shape)]
		}
		return o
	})
}

func softplus64(x float64) float64 {
	if x > 20 {
		return x
	}
	return math.Log(1 + math.Exp(x))
}

func bf16In(shape ...int) inSpec { return inSpec{dt: ir.BF16, shape: shape, lo: -3, hi: 3} }

// posIn is a decode position in [lo, hi).
func posIn(lo, hi int) inSpec {
	return inSpec{dt: ir.UInt32, shape: []int{1}, lo: float64(lo), hi: float64(hi), ints: true}
}

func modelOpCases() []opCase {
	eps := 1e-6
	heightSharded := []ir.Option{ir.With("grid", []int{0, 0, 3, 0}), ir.With("shard", []int{32, 32})}
	return []opCase{
		{name: "slice 3-D", in: []inSpec{bf16In(2, 5, 40)}, exact: true,
			build: func(b *ir.Builder, in []*ir.Value) *ir.Value { return b.Slice(in[0], []int{1, 1, 8}, []int{2, 4, 40}) },
			want:  func(in []arr) []float64 { return slice64(in[0], []int{1, 1, 8}, []int{2, 4, 40}) }},
		{name: "slice inner dims only", in: []inSpec{bf16In(3, 4, 6, 10)}, exact: true,
			build: func(b *ir.Builder, in []*ir.Value) *ir.Value {
				return b.Slice(in[0], []int{0, 2, 1, 3}, []int{3, 4, 5, 10})
			},
			want: func(in []arr) []float64 { return slice64(in[0], []int{0, 2, 1, 3}, []int{3, 4, 5, 10}) }},
		{name: "concat axis 1", in: []inSpec{bf16In(2, 3, 40), bf16In(2, 1, 40)}, exact: true,
			build: func(b *ir.Builder, in []*ir.Value) *ir.Value { return b.Concat(in[0], in[1], 1) },
			want:  func(in []arr) []float64 { return concat64(in[0], in[1], 1) }},
		{name: "concat axis -1", in: []inSpec{bf16In(2, 3, 24), bf16In(2, 3, 40)}, exact: true,
			build: func(b *ir.Builder, in []*ir.Value) *ir.Value { return b.Concat(in[0], in[1], -1) },
			want:  func(in []arr) []float64 { return concat64(in[0], in[1], -1) }},
		{name: "concat three operands axis 2", in: []inSpec{bf16In(2, 3, 1, 8), bf16In(2, 3, 2, 8), bf16In(2, 3, 1, 8)}, exact: true,
			build: func(b *ir.Builder, in []*ir.Value) *ir.Value {
				return b.Emit(ir.OpConcat, in, ir.Attrs{"axis": 2})[0]
			},
			want: func(in []arr) []float64 {
				return concat64(arr{shape: []int{2, 3, 3, 8}, v: concat64(in[0], in[1], 2)}, in[2], 2)
			}},
		{name: "concat axis 0", in: []inSpec{bf16In(1, 3, 8), bf16In(2, 3, 8)}, exact: true,
			build: func(b *ir.Builder, in []*ir.Value) *ir.Value { return b.Concat(in[0], in[1], 0) },
			want:  func(in []arr) []float64 { return concat64(in[0], in[1], 0) }},
		{name: "pad heads to a tile", in: []inSpec{bf16In(2, 3, 40)}, exact: true,
			build: func(b *ir.Builder, in []*ir.Value) *ir.Value { return b.Pad(in[0], []int{2, 32, 40}, 0) },
			want:  func(in []arr) []float64 { return pad64(in[0], []int{2, 32, 40}, 0) }},
		{name: "pad every dim with -2", in: []inSpec{bf16In(3, 5)}, exact: true,
			build: func(b *ir.Builder, in []*ir.Value) *ir.Value { return b.Pad(in[0], []int{4, 8}, -2) },
			want:  func(in []arr) []float64 { return pad64(in[0], []int{4, 8}, -2) }},
		{name: "repeat_interleave heads x3", in: []inSpec{bf16In(2, 3, 8)}, exact: true,
			build: func(b *ir.Builder, in []*ir.Value) *ir.Value { return b.RepeatInterleave(in[0], 3, 1) },
			want:  func(in []arr) []float64 { return repeat64(in[0], 3, 1) }},
		{name: "repeat_interleave last axis x2", in: []inSpec{bf16In(2, 3, 8)}, exact: true,
			build: func(b *ir.Builder, in []*ir.Value) *ir.Value { return b.RepeatInterleave(in[0], 2, -1) },
			want:  func(in []arr) []float64 { return repeat64(in[0], 2, -1) }},
		{name: "transpose 0 1", in: []inSpec{bf16In(3, 4, 40)}, exact: true,
			build: func(b *ir.Builder, in []*ir.Value) *ir.Value { return b.Transpose(in[0], 0, 1) },
			want:  func(in []arr) []float64 { return transpose64(in[0], 0, 1) }},
		{name: "transpose -1 -3", in: []inSpec{bf16In(2, 3, 5, 6)}, exact: true,
			build: func(b *ir.Builder, in []*ir.Value) *ir.Value { return b.Transpose(in[0], -1, -3) },
			want:  func(in []arr) []float64 { return transpose64(in[0], -1, -3) }},
		{name: "to_memory l1 interleaved", in: []inSpec{bf16In(2, 3, 40)}, exact: true,
			build: func(b *ir.Builder, in []*ir.Value) *ir.Value { return b.ToMemory(in[0], "l1_interleaved") },
			want:  func(in []arr) []float64 { return in[0].v }},
		{name: "to_memory height sharded", in: []inSpec{bf16In(2, 64, 32)}, exact: true,
			build: func(b *ir.Builder, in []*ir.Value) *ir.Value {
				return b.ToMemory(in[0], "l1_height_sharded", heightSharded...)
			},
			want: func(in []arr) []float64 { return in[0].v }},
		{name: "softplus both sides of the threshold", in: []inSpec{{dt: ir.BF16, shape: []int{4, 64}, lo: -25, hi: 25}},
			build: func(b *ir.Builder, in []*ir.Value) *ir.Value { return b.Softplus(in[0]) },
			want:  func(in []arr) []float64 { return map64(in[0], softplus64) }},
		{name: "sum axis 0", in: []inSpec{bf16In(3, 4, 40)},
			build: func(b *ir.Builder, in []*ir.Value) *ir.Value { return b.Sum(in[0], 0) },
			want:  func(in []arr) []float64 { return sum64(in[0], 0) }},
		{name: "sum axis 1", in: []inSpec{bf16In(3, 4, 40)}, onMaxRel: colSumOnMaxRel,
			build: func(b *ir.Builder, in []*ir.Value) *ir.Value { return b.Sum(in[0], 1) },
			want:  func(in []arr) []float64 { return sum64(in[0], 1) }},
		{name: "sum axis -1", in: []inSpec{{dt: ir.BF16, shape: []int{3, 4, 40}, lo: -1, hi: 3}}, onMaxRel: rowSumOnMaxRel,
			build: func(b *ir.Builder, in []*ir.Value) *ir.Value { return b.Sum(in[0], -1) },
			want:  func(in []arr) []float64 { return sum64(in[0], -1) }},
		{name: "rms_norm offset 1", in: []inSpec{bf16In(2, 3, 64), {dt: ir.BF16, shape: []int{64}, weight: true, lo: -0.5, hi: 0.5}},
			build:    func(b *ir.Builder, in []*ir.Value) *ir.Value { return b.RMSNorm(in[0], in[1], eps, 1) },
			want:     func(in []arr) []float64 { return rmsnorm64(in[0], in[1], eps, 1) },
			onMaxRel: normOnMaxRel},
		{name: "rms_norm offset 0 fp32", in: []inSpec{{dt: ir.FP32, shape: []int{6, 128}, lo: -3, hi: 3}, {dt: ir.BF16, shape: []int{128}, weight: true, lo: 0.5, hi: 1.5}},
			build:    func(b *ir.Builder, in []*ir.Value) *ir.Value { return b.RMSNorm(in[0], in[1], eps, 0) },
			want:     func(in []arr) []float64 { return rmsnorm64(in[0], in[1], eps, 0) },
			onMaxRel: normOnMaxRel},
		{name: "rms_norm_plain", in: []inSpec{bf16In(2, 3, 64)},
			build: func(b *ir.Builder, in []*ir.Value) *ir.Value { return b.RMSNormPlain(in[0], eps/64) },
			want: func(in []arr) []float64 {
				unit := arr{shape: []int{64}, v: make([]float64, 64)} // w + offset = 0 + 1
				return rmsnorm64(in[0], unit, eps/64, 1)
			},
			onMaxRel: normOnMaxRel},
		{name: "bmm 4-D", in: []inSpec{bf16In(2, 3, 5, 40), bf16In(2, 3, 40, 24)},
			build:    func(b *ir.Builder, in []*ir.Value) *ir.Value { return b.BMM(in[0], in[1]) },
			want:     func(in []arr) []float64 { return bmm64(in[0], in[1]) },
			onMaxRel: matmulOnMaxRel},
		{name: "bmm outer product to fp32", in: []inSpec{bf16In(2, 4, 32, 1), bf16In(2, 4, 1, 32)},
			build: func(b *ir.Builder, in []*ir.Value) *ir.Value { return b.BMM(in[0], in[1], ir.WithDType(ir.FP32)) },
			want:  func(in []arr) []float64 { return bmm64(in[0], in[1]) }},
		{name: "bmm rank 2", in: []inSpec{bf16In(7, 33), bf16In(33, 9)},
			build:    func(b *ir.Builder, in []*ir.Value) *ir.Value { return b.BMM(in[0], in[1]) },
			want:     func(in []arr) []float64 { return bmm64(in[0], in[1]) },
			onMaxRel: matmulOnMaxRel},
		{name: "rotary per-user tables", in: []inSpec{bf16In(4, 2, 64), {dt: ir.BF16, shape: []int{2, 64}, lo: -1, hi: 1}, {dt: ir.BF16, shape: []int{2, 64}, lo: -1, hi: 1}},
			build:    func(b *ir.Builder, in []*ir.Value) *ir.Value { return b.Rotary(in[0], in[1], in[2]) },
			want:     func(in []arr) []float64 { return rotary64(in[0], in[1], in[2]) },
			onMaxRel: rotaryOnMaxRel},
		{name: "rotary broadcast row tables", in: []inSpec{bf16In(2, 3, 8), {dt: ir.BF16, shape: []int{1, 8}, lo: -1, hi: 1}, {dt: ir.BF16, shape: []int{3, 8}, lo: -1, hi: 1}},
			build:    func(b *ir.Builder, in []*ir.Value) *ir.Value { return b.Rotary(in[0], in[1], in[2]) },
			want:     func(in []arr) []float64 { return rotary64(in[0], in[1], in[2]) },
			onMaxRel: rotaryOnMaxRel},
		{name: "update_cache bf16", in: []inSpec{bf16In(2, 2, 16, 32), bf16In(2, 32, 32), posIn(0, 16)}, exact: true,
			build: func(b *ir.Builder, in []*ir.Value) *ir.Value { return b.UpdateCache(in[0], in[1], in[2]) },
			want:  func(in []arr) []float64 { return updateCache64(in[0], in[1], int(in[2].v[0])) }},
		{name: "update_cache bfp8_b last position", in: []inSpec{{dt: ir.BFP8B, shape: []int{1, 3, 8, 32}, lo: -3, hi: 3}, {dt: ir.BFP8B, shape: []int{1, 3, 32}, lo: -3, hi: 3}, posIn(7, 8)}, exact: true,
			build: func(b *ir.Builder, in []*ir.Value) *ir.Value { return b.UpdateCache(in[0], in[1], in[2]) },
			want:  func(in []arr) []float64 { return updateCache64(in[0], in[1], int(in[2].v[0])) }},
		{name: "sdpa_decode GQA 3", in: []inSpec{bf16In(2, 6, 32), bf16In(2, 2, 16, 32), bf16In(2, 2, 16, 32), posIn(0, 16)},
			build: func(b *ir.Builder, in []*ir.Value) *ir.Value {
				return b.SDPADecode(in[0], in[1], in[2], in[3], 1/math.Sqrt(32))
			},
			want:     func(in []arr) []float64 { return sdpa64(in[0], in[1], in[2], int(in[3].v[0]), 1/math.Sqrt(32)) },
			onMaxRel: sdpaOnMaxRel},
		{name: "sdpa_decode MHA last position", in: []inSpec{bf16In(1, 2, 64), bf16In(1, 2, 32, 64), bf16In(1, 2, 32, 64), posIn(31, 32)},
			build:    func(b *ir.Builder, in []*ir.Value) *ir.Value { return b.SDPADecode(in[0], in[1], in[2], in[3], 0.125) },
			want:     func(in []arr) []float64 { return sdpa64(in[0], in[1], in[2], int(in[3].v[0]), 0.125) },
			onMaxRel: sdpaOnMaxRel},
		{name: "sdpa_decode position 0", in: []inSpec{bf16In(3, 4, 32), bf16In(3, 1, 8, 32), bf16In(3, 1, 8, 32), posIn(0, 1)},
			build:    func(b *ir.Builder, in []*ir.Value) *ir.Value { return b.SDPADecode(in[0], in[1], in[2], in[3], 0.2) },
			want:     func(in []arr) []float64 { return sdpa64(in[0], in[1], in[2], int(in[3].v[0]), 0.2) },
			onMaxRel: sdpaOnMaxRel},
	}
}

func TestModelOpsAgainstFloat64(t *testing.T) {
	for ci, c := range modelOpCases() {
		t.Run(c.name, func(t *testing.T) { checkOpCase(t, 1000+uint64(ci), c) })
	}
}

// TestModelOpHandValues checks small results computed by hand.
func TestModelOpHandValues(t *testing.T) {
	tests := []struct {
		name  string
		in    ir.TensorType
		data  []float32
		build func(b *ir.Builder, x *ir.Value) *ir.Value
		want  Tensor
	}{
		{"softplus", ir.T(ir.FP32, 4), []float32{0, 25, 20, -1},
			func(b *ir.Builder, x *ir.Value) *ir.Value { return b.Softplus(x) },
			Tensor{Shape: ir.Shape{4}, Data: []float32{float32(math.Ln2), 25, float32(math.Log1p(math.Exp(20))), float32(math.Log1p(math.Exp(-1)))}}},
		{"sum axis 0", ir.T(ir.FP32, 2, 3), []float32{1, 2, 3, 10, 20, 30},
			func(b *ir.Builder, x *ir.Value) *ir.Value { return b.Sum(x, 0) },
			Tensor{Shape: ir.Shape{1, 3}, Data: []float32{11, 22, 33}}},
		// 1 + 2^-11 needs tf32's last mantissa bit: reduce_tile's SrcA
		// drops it (wantOn); a leading-dim sum adds in fp32 on the SFPU.
		{"sum last dim fp32", ir.T(ir.FP32, 1, 2), []float32{1 + 0x1p-11, 1 + 0x1p-11},
			func(b *ir.Builder, x *ir.Value) *ir.Value { return b.Sum(x, -1) },
			Tensor{Shape: ir.Shape{1, 1}, Data: []float32{2 + 0x1p-10}}},
		{"sum leading dim fp32", ir.T(ir.FP32, 2, 1, 1), []float32{1 + 0x1p-11, 1 + 0x1p-11},
			func(b *ir.Builder, x *ir.Value) *ir.Value { return b.Sum(x, 0) },
			Tensor{Shape: ir.Shape{1, 1, 1}, Data: []float32{2 + 0x1p-10}}},
		{"transpose", ir.T(ir.FP32, 2, 3), []float32{1, 2, 3, 4, 5, 6},
			func(b *ir.Builder, x *ir.Value) *ir.Value { return b.Transpose(x, 0, 1) },
			Tensor{Shape: ir.Shape{3, 2}, Data: []float32{1, 4, 2, 5, 3, 6}}},
		{"repeat_interleave", ir.T(ir.FP32, 2, 2), []float32{1, 2, 3, 4},
			func(b *ir.Builder, x *ir.Value) *ir.Value { return b.RepeatInterleave(x, 2, 0) },
			Tensor{Shape: ir.Shape{4, 2}, Data: []float32{1, 2, 1, 2, 3, 4, 3, 4}}},
		{"pad", ir.T(ir.FP32, 1, 2), []float32{1, 2},
			func(b *ir.Builder, x *ir.Value) *ir.Value { return b.Pad(x, []int{2, 3}, 9) },
			Tensor{Shape: ir.Shape{2, 3}, Data: []float32{1, 2, 9, 9, 9, 9}}},
		{"concat", ir.T(ir.FP32, 2, 1), []float32{1, 2},
			func(b *ir.Builder, x *ir.Value) *ir.Value { return b.Concat(x, b.MulScalar(x, 10), 1) },
			Tensor{Shape: ir.Shape{2, 2}, Data: []float32{1, 10, 2, 20}}},
		// cos 0, sin 1: out = rotate_half(x) = [-x2, -x3, x0, x1].
		{"rotary is rotate_half at cos 0, sin 1", ir.T(ir.FP32, 1, 4), []float32{1, 2, 3, 4},
			func(b *ir.Builder, x *ir.Value) *ir.Value {
				return b.Rotary(x, b.MulScalar(x, 0), b.AddScalar(b.MulScalar(x, 0), 1))
			},
			Tensor{Shape: ir.Shape{1, 4}, Data: []float32{-3, -4, 1, 2}}},
		// cos 1, sin 0: identity.
		{"rotary is identity at cos 1, sin 0", ir.T(ir.FP32, 1, 4), []float32{1, 2, 3, 4},
			func(b *ir.Builder, x *ir.Value) *ir.Value {
				return b.Rotary(x, b.AddScalar(b.MulScalar(x, 0), 1), b.MulScalar(x, 0))
			},
			Tensor{Shape: ir.Shape{1, 4}, Data: []float32{1, 2, 3, 4}}},
		// mean(x^2) = (9 + 16) / 2 = 12.5.
		{"rms_norm_plain", ir.T(ir.FP32, 1, 2), []float32{3, 4},
			func(b *ir.Builder, x *ir.Value) *ir.Value { return b.RMSNormPlain(x, 0) },
			Tensor{Shape: ir.Shape{1, 2}, Data: []float32{float32(3 / math.Sqrt(12.5)), float32(4 / math.Sqrt(12.5))}}},
	}
	// Results with StorageFormats where they differ from want: the norm's
	// FPU reads rsqrt(12.5) = 0.28284271 in SrcB as tf32, 0b1.0010000110 x
	// 2^-2 = 579/2048; reduce_tile reads 1 + 2^-11 as 1.
	wantOn := map[string]Tensor{
		"rms_norm_plain":    {Shape: ir.Shape{1, 2}, Data: []float32{3 * 579.0 / 2048, 4 * 579.0 / 2048}},
		"sum last dim fp32": {Shape: ir.Shape{1, 1}, Data: []float32{2}},
		// tcc's softplus program (ir/sfpu, 3.00 ulp at most) is 1 ulp above
		// softplus(-1) = 0.31326168752 (float32 0.31326169).
		"softplus": {Shape: ir.Shape{4}, Data: []float32{float32(math.Ln2), 25, 20, math.Float32frombits(0x3ea063d7)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g, x, y := oneOp(t, tc.in, tc.build)
			for _, opts := range []Options{DefaultOptions(), ExactOptions()} {
				res, err := Eval(g, map[*ir.Value]Tensor{x: {Shape: tc.in.Shape, Data: tc.data}}, opts)
				if err != nil {
					t.Fatal(err)
				}
				want := tc.want
				if w, ok := wantOn[tc.name]; ok && opts.StorageFormats {
					want = w
				}
				if diff := cmp.Diff(want, res[y]); diff != "" {
					t.Errorf("StorageFormats=%v (-want +got):\n%s", opts.StorageFormats, diff)
				}
			}
		})
	}
}

// kvGraph builds a KV-cache step: cache state [B, Hc, L, D] updated at pos
// with new [B, Hn, D], then sdpa_decode of q [B, Hq, D] against the new
// cache (used as both k and v).
func kvGraph(t *testing.T, B, Hc, Hn, Hq, L, D int) (g *ir.Graph, cache, nw, q, pos, upd, att *ir.Value) {
	t.Helper()
	b := ir.NewBuilder("kv")
	cache = b.State("k_cache", ir.T(ir.FP32, B, Hc, L, D))
	nw = b.Input("new", ir.T(ir.FP32, B, Hn, D))
	q = b.Input("q", ir.T(ir.FP32, B, Hq, D))
	pos = b.Input("pos", ir.T(ir.UInt32, 1))
	b.Region("attention", 0)
	upd = b.UpdateCache(cache, nw, pos)
	b.UpdateState(cache, upd)
	att = b.SDPADecode(q, upd, upd, pos, 1)
	b.Output(att)
	g, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	return g, cache, nw, q, pos, upd, att
}

// TestUpdateCacheWritesOnePosition checks the written row, that padding
// heads of new are ignored and that every other position is untouched.
func TestUpdateCacheWritesOnePosition(t *testing.T) {
	const B, Hc, Hn, L, D, p = 2, 2, 4, 5, 3, 3
	g, cache, nw, q, pos, upd, _ := kvGraph(t, B, Hc, Hn, Hc, L, D)
	cd := make([]float32, B*Hc*L*D)
	for i := range cd {
		cd[i] = float32(i)
	}
	nd := make([]float32, B*Hn*D)
	for i := range nd {
		nd[i] = -float32(i + 1)
	}
	env := map[*ir.Value]Tensor{
		cache: {Shape: ir.Shape{B, Hc, L, D}, Data: cd},
		nw:    {Shape: ir.Shape{B, Hn, D}, Data: nd},
		q:     {Shape: ir.Shape{B, Hc, D}, Data: make([]float32, B*Hc*D)},
		pos:   {Shape: ir.Shape{1}, Data: []float32{p}},
	}
	res, err := Eval(g, env, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	want := append([]float32(nil), cd...)
	for b := 0; b < B; b++ {
		for h := 0; h < Hc; h++ {
			for i := 0; i < D; i++ {
				want[((b*Hc+h)*L+p)*D+i] = nd[(b*Hn+h)*D+i]
			}
		}
	}
	if diff := cmp.Diff(want, res[upd].Data); diff != "" {
		t.Errorf("updated cache (-want +got):\n%s", diff)
	}
	// Hand-picked entries: user 1, head 1, position 3 gets new[1, 1, :] =
	// -(1*4+1)*3-1-i; position 2 keeps its index values.
	if got := res[upd].Data[((1*Hc+1)*L+3)*D : ((1*Hc+1)*L+4)*D]; !cmp.Equal(got, []float32{-16, -17, -18}) {
		t.Errorf("cache[1,1,3,:] = %v, want [-16 -17 -18]", got)
	}
	if got := res[upd].Data[((1*Hc+1)*L+2)*D]; got != float32(((1*Hc+1)*L+2)*D) {
		t.Errorf("cache[1,1,2,0] = %v, want it untouched", got)
	}
	if cd[p*D] != float32(p*D) {
		t.Errorf("Eval modified the caller's cache")
	}
	env[pos] = Tensor{Shape: ir.Shape{1}, Data: []float32{L}}
	if _, err := Eval(g, env, DefaultOptions()); err == nil || !strings.Contains(err.Error(), "pos 5") || !strings.Contains(err.Error(), "update_cache") {
		t.Errorf("pos = L: got %v, want an update_cache error naming pos 5", err)
	}
}

// TestSDPADecodeReadsOnlyUpToPos fills the cache after pos with NaN and
// huge values: the result must not change and must be finite.
func TestSDPADecodeReadsOnlyUpToPos(t *testing.T) {
	const B, H, L, D, p = 1, 2, 8, 4, 2
	g, cache, nw, q, pos, _, att := kvGraph(t, B, H, H, H, L, D)
	cd := make([]float32, B*H*L*D)
	for i := range cd {
		cd[i] = float32(math.Sin(float64(i)))
	}
	nd := []float32{0.5, -1, 0.25, 2, 1, 1, -1, 0}
	qd := []float32{1, 0.5, -0.5, 0.25, -1, 2, 0, 1}
	run := func(fill float32) []float32 {
		c := append([]float32(nil), cd...)
		for h := 0; h < H; h++ {
			for t := p + 1; t < L; t++ {
				for i := 0; i < D; i++ {
					c[(h*L+t)*D+i] = fill
				}
			}
		}
		env := map[*ir.Value]Tensor{
			cache: {Shape: ir.Shape{B, H, L, D}, Data: c},
			nw:    {Shape: ir.Shape{B, H, D}, Data: nd},
			q:     {Shape: ir.Shape{B, H, D}, Data: qd},
			pos:   {Shape: ir.Shape{1}, Data: []float32{p}},
		}
		res, err := Eval(g, env, ExactOptions())
		if err != nil {
			t.Fatal(err)
		}
		return res[att].Data
	}
	base := run(0)
	for _, fill := range []float32{float32(math.NaN()), 1e30} {
		if diff := cmp.Diff(base, run(fill)); diff != "" {
			t.Errorf("cache positions after pos filled with %v change the result (-zeros +filled):\n%s", fill, diff)
		}
	}
	// Head 0 by hand: keys at t = 0, 1 are the cache's, t = 2 is new[0, 0].
	kv := func(t int) []float64 {
		if t == p {
			return to64(nd[:D])
		}
		return to64(cd[t*D : (t+1)*D])
	}
	var w [p + 1]float64
	var total float64
	for t := range w {
		s := 0.0
		for i, kk := range kv(t) {
			s += float64(qd[i]) * kk
		}
		w[t] = math.Exp(s)
		total += w[t]
	}
	for i := 0; i < D; i++ {
		o := 0.0
		for t := range w {
			o += w[t] / total * kv(t)[i]
		}
		if got := float64(base[i]); math.Abs(got-o) > 1e-6*math.Max(1, math.Abs(o)) {
			t.Errorf("out[0, 0, %d] = %v, want %v", i, got, o)
		}
	}
}

// TestModelOpEvaluatorErrors calls the evaluators through EvalOp with
// operands that break the rules the builder would have checked.
func TestModelOpEvaluatorErrors(t *testing.T) {
	_, _, _, _, _, upd, att := kvGraph(t, 1, 1, 1, 1, 4, 2)
	cache := Tensor{Shape: ir.Shape{1, 1, 4, 2}, Data: make([]float32, 8)}
	row := Tensor{Shape: ir.Shape{1, 1, 2}, Data: make([]float32, 2)}
	tests := []struct {
		name string
		op   *ir.Op
		args []Tensor
		want []string
	}{
		{"update_cache pos past the cache", upd.Def, []Tensor{cache, row, {Shape: ir.Shape{1}, Data: []float32{4}}},
			[]string{"op update_cache", "rule decode-pos", "pos 4", "4-long cache"}},
		{"update_cache new too narrow", upd.Def, []Tensor{cache, {Shape: ir.Shape{1, 1, 3}, Data: make([]float32, 3)}, {Shape: ir.Shape{1}, Data: []float32{0}}},
			[]string{"rule cache-shape", "[1,1,3]"}},
		{"sdpa_decode k and v differ", att.Def, []Tensor{row, cache, {Shape: ir.Shape{1, 1, 3, 2}, Data: make([]float32, 6)}, {Shape: ir.Shape{1}, Data: []float32{0}}},
			[]string{"op sdpa_decode", "rule sdpa-rank"}},
		{"sdpa_decode pos past the cache", att.Def, []Tensor{row, cache, cache, {Shape: ir.Shape{1}, Data: []float32{9}}},
			[]string{"rule decode-pos", "pos 9"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := EvalOp(tc.op, tc.args, ExactOptions())
			if err == nil {
				t.Fatalf("got no error, want one containing %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
	// Layout ops: operands of the wrong rank for their attributes.
	x := Tensor{Shape: ir.Shape{2, 3}, Data: make([]float32, 6)}
	for _, tc := range []struct {
		name  string
		build func(b *ir.Builder, v *ir.Value) *ir.Value
		want  string
	}{
		{"slice", func(b *ir.Builder, v *ir.Value) *ir.Value { return b.Slice(v, []int{0, 0, 0}, []int{1, 1, 1}) }, "rule slice-rank"},
		{"pad", func(b *ir.Builder, v *ir.Value) *ir.Value { return b.Pad(v, []int{2, 3, 5}, 0) }, "rule pad-rank"},
		{"transpose", func(b *ir.Builder, v *ir.Value) *ir.Value { return b.Transpose(v, 0, 2) }, "rule axis"},
		{"sum", func(b *ir.Builder, v *ir.Value) *ir.Value { return b.Sum(v, 2) }, "rule axis"},
		{"repeat_interleave", func(b *ir.Builder, v *ir.Value) *ir.Value { return b.RepeatInterleave(v, 2, -3) }, "rule axis"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, y := oneOp(t, ir.T(ir.FP32, 2, 3, 4), tc.build)
			_, err := EvalOp(y.Def, []Tensor{x}, ExactOptions())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("operand %s: got %v, want an error containing %q", x.Shape, err, tc.want)
			}
		})
	}
}

// TestSDPADecodeLargeScores checks the softmax is stable where exp of a
// raw score overflows: scores 1000 and 500 give weights 1 and e^-500.
func TestSDPADecodeLargeScores(t *testing.T) {
	g, cache, nw, q, pos, _, att := kvGraph(t, 1, 1, 1, 1, 2, 1)
	env := map[*ir.Value]Tensor{
		cache: {Shape: ir.Shape{1, 1, 2, 1}, Data: []float32{1, 0}},
		nw:    {Shape: ir.Shape{1, 1, 1}, Data: []float32{0.5}},
		q:     {Shape: ir.Shape{1, 1, 1}, Data: []float32{1000}},
		pos:   {Shape: ir.Shape{1}, Data: []float32{1}},
	}
	res, err := Eval(g, env, ExactOptions())
	if err != nil {
		t.Fatal(err)
	}
	// k = v = [1, 0.5]: out = (1*1 + e^-500*0.5) / (1 + e^-500) = 1 in float32.
	if got := res[att].Data; !cmp.Equal(got, []float32{1}) {
		t.Errorf("out = %v, want [1]", got)
	}
}

// TestRotaryReadsProductsAsTF32: at storage formats rotary is the FPU's
// (rotaryFPU), which packs x*cos and rotate_half(x)*sin to fp32 and adds
// them as read back through the source registers, truncated to tf32. With
// x = (1.0078125, 1.5), cos = (1.1875, 1), sin = (1, 0): out[0] = x0*cos0
// - x1*sin0 = 1.19677734375 - 1.5 = -0.30322265625 exactly, but the FPU
// reads the product as 1.1962890625 (its 2^-11 bit dropped) and gets
// -0.3037109375, a bf16 tie (155.5 ulps of 2^-9) that the packer rounds
// away from zero to -0.3046875; the correctly rounded bf16 result would be
// -0.302734375. out[1] = x1*cos1 + x0*sin1 = 1.5 in every mode.
func TestRotaryReadsProductsAsTF32(t *testing.T) {
	for _, tc := range []struct {
		dt            ir.DType
		exact, device float32
	}{
		{ir.FP32, -0.30322265625, -0.3037109375},
		{ir.BF16, -0.30322265625, -0.3046875},
	} {
		t.Run(tc.dt.String(), func(t *testing.T) {
			b := ir.NewBuilder("rotary")
			x, c, s := b.Input("x", ir.T(tc.dt, 1, 2)), b.Input("cos", ir.T(tc.dt, 1, 2)), b.Input("sin", ir.T(tc.dt, 1, 2))
			b.Region("test", 0)
			y := b.Rotary(x, c, s)
			b.Output(y)
			g, err := b.Finish()
			if err != nil {
				t.Fatal(err)
			}
			env := map[*ir.Value]Tensor{
				x: {Shape: ir.Shape{1, 2}, Data: []float32{1.0078125, 1.5}},
				c: {Shape: ir.Shape{1, 2}, Data: []float32{1.1875, 1}},
				s: {Shape: ir.Shape{1, 2}, Data: []float32{1, 0}},
			}
			for _, m := range []struct {
				opts Options
				want float32
			}{{ExactOptions(), tc.exact}, {DefaultOptions(), tc.device}} {
				res, err := Eval(g, env, m.opts)
				if err != nil {
					t.Fatal(err)
				}
				if got, want := res[y].Data, []float32{m.want, 1.5}; !cmp.Equal(got, want) {
					t.Errorf("StorageFormats=%v: out = %v, want %v", m.opts.StorageFormats, got, want)
				}
			}
		})
	}
}
