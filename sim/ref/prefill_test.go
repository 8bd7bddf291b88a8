package ref

import (
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tcc-dev/tcc/ir"
)

// Float64 references of the prefill ops (GDN chunk pieces, cache fill,
// causal attention), written from their Doc lines with explicit indices.

func cumsum64(x arr, axis int) []float64 {
	ax := posAxis(axis, len(x.shape))
	return gen64(x.shape, func(idx []int) float64 {
		j := append([]int(nil), idx...)
		s := 0.0
		for i := 0; i <= idx[ax]; i++ {
			j[ax] = i
			s += x.v[ravel(j, x.shape)]
		}
		return s
	})
}

func tril64(x arr, diag int) []float64 {
	r := len(x.shape)
	return gen64(x.shape, func(idx []int) float64 {
		if idx[r-1]-idx[r-2] <= diag {
			return x.v[ravel(idx, x.shape)]
		}
		return 0
	})
}

// trilInverse64 inverts I + strictly-lower(x) for each trailing matrix by
// Gauss-Jordan elimination (a generic inverse, not forward substitution).
func trilInverse64(x arr) []float64 {
	r := len(x.shape)
	n := x.shape[r-1]
	var out []float64
	for b := 0; b < len(x.v)/(n*n); b++ {
		m := make([][]float64, n) // [M | I]
		for i := range m {
			m[i] = make([]float64, 2*n)
			for j := 0; j < i; j++ {
				m[i][j] = x.v[b*n*n+i*n+j]
			}
			m[i][i] = 1
			m[i][n+i] = 1
		}
		for c := 0; c < n; c++ {
			piv := m[c][c]
			for j := range m[c] {
				m[c][j] /= piv
			}
			for i := range m {
				if i != c && m[i][c] != 0 {
					f := m[i][c]
					for j := range m[i] {
						m[i][j] -= f * m[c][j]
					}
				}
			}
		}
		for i := range m {
			out = append(out, m[i][n:]...)
		}
	}
	return out
}

func conv64(x, w arr) []float64 {
	r := len(x.shape)
	K := w.shape[0]
	out := append([]int(nil), x.shape...)
	out[r-2] -= K - 1
	return gen64(out, func(idx []int) float64 {
		j := append([]int(nil), idx...)
		c := idx[r-1]
		s := 0.0
		for k := 0; k < K; k++ {
			j[r-2] = idx[r-2] + k
			s += w.v[k*w.shape[1]+c] * x.v[ravel(j, x.shape)]
		}
		return s
	})
}

func fillCache64(cache, nw arr, pos int) []float64 {
	S := nw.shape[2]
	return gen64(cache.shape, func(idx []int) float64 {
		if s := idx[2] - pos; s >= 0 && s < S {
			return nw.v[ravel([]int{idx[0], idx[1], s, idx[3]}, nw.shape)]
		}
		return cache.v[ravel(idx, cache.shape)]
	})
}

func sdpaPrefill64(q, k, v arr, pos int, scale float64) []float64 {
	G := q.shape[1] / k.shape[1]
	D := q.shape[3]
	return gen64(q.shape, func(idx []int) float64 {
		b, h, s, i := idx[0], idx[1], idx[2], idx[3]
		w := make([]float64, pos+s+1)
		total := 0.0
		for t := range w {
			dot := 0.0
			for e := 0; e < D; e++ {
				dot += q.v[ravel([]int{b, h, s, e}, q.shape)] * k.v[ravel([]int{b, h / G, t, e}, k.shape)]
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

func prefillOpCases() []opCase {
	small := func(shape ...int) inSpec { return inSpec{dt: ir.BF16, shape: shape, lo: -0.5, hi: 0.5} }
	return []opCase{
		{name: "cumsum last axis", in: []inSpec{bf16In(2, 3, 40)},
			build: func(b *ir.Builder, in []*ir.Value) *ir.Value { return b.Cumsum(in[0], -1) },
			want:  func(in []arr) []float64 { return cumsum64(in[0], -1) }, onMaxRel: matmulOnMaxRel},
		{name: "cumsum axis 1", in: []inSpec{bf16In(2, 16, 8)},
			build: func(b *ir.Builder, in []*ir.Value) *ir.Value { return b.Cumsum(in[0], 1) },
			want:  func(in []arr) []float64 { return cumsum64(in[0], 1) }, onMaxRel: matmulOnMaxRel},
		{name: "cumsum axis 0 of 3 (no device program: float64)", in: []inSpec{bf16In(5, 3, 8)},
			build: func(b *ir.Builder, in []*ir.Value) *ir.Value { return b.Cumsum(in[0], 0) },
			want:  func(in []arr) []float64 { return cumsum64(in[0], 0) }},
		{name: "tril diagonal 0", in: []inSpec{bf16In(2, 5, 7)}, exact: true,
			build: func(b *ir.Builder, in []*ir.Value) *ir.Value { return b.Tril(in[0], 0) },
			want:  func(in []arr) []float64 { return tril64(in[0], 0) }},
		{name: "tril diagonal -1", in: []inSpec{bf16In(3, 6, 6)}, exact: true,
			build: func(b *ir.Builder, in []*ir.Value) *ir.Value { return b.Tril(in[0], -1) },
			want:  func(in []arr) []float64 { return tril64(in[0], -1) }},
		{name: "tril diagonal 2", in: []inSpec{bf16In(4, 3)}, exact: true,
			build: func(b *ir.Builder, in []*ir.Value) *ir.Value { return b.Tril(in[0], 2) },
			want:  func(in []arr) []float64 { return tril64(in[0], 2) }},
		{name: "tril_inverse 8x8", in: []inSpec{small(3, 8, 8)},
			build: func(b *ir.Builder, in []*ir.Value) *ir.Value { return b.TrilInverse(in[0]) },
			want:  func(in []arr) []float64 { return trilInverse64(in[0]) }, onMaxRel: trilInverseOnMaxRel},
		{name: "tril_inverse 32x32 fp32", in: []inSpec{{dt: ir.FP32, shape: []int{2, 32, 32}, lo: -0.1, hi: 0.1}},
			build:    func(b *ir.Builder, in []*ir.Value) *ir.Value { return b.TrilInverse(in[0]) },
			want:     func(in []arr) []float64 { return trilInverse64(in[0]) },
			onMaxRel: trilInverseOnMaxRel},
		{name: "conv_depthwise", in: []inSpec{bf16In(2, 7, 40), {dt: ir.BF16, shape: []int{4, 40}, weight: true, lo: -1, hi: 1}},
			build: func(b *ir.Builder, in []*ir.Value) *ir.Value { return b.ConvDepthwise(in[0], in[1]) },
			want:  func(in []arr) []float64 { return conv64(in[0], in[1]) }, onMaxRel: convOnMaxRel},
		{name: "conv_depthwise one output step", in: []inSpec{bf16In(3, 4, 16), {dt: ir.BF16, shape: []int{4, 16}, weight: true, lo: -1, hi: 1}},
			build: func(b *ir.Builder, in []*ir.Value) *ir.Value { return b.ConvDepthwise(in[0], in[1]) },
			want:  func(in []arr) []float64 { return conv64(in[0], in[1]) }, onMaxRel: convOnMaxRel},
		{name: "fill_cache", in: []inSpec{bf16In(2, 2, 16, 32), bf16In(2, 2, 5, 32), posIn(0, 12)}, exact: true,
			build: func(b *ir.Builder, in []*ir.Value) *ir.Value { return b.FillCache(in[0], in[1], in[2]) },
			want:  func(in []arr) []float64 { return fillCache64(in[0], in[1], int(in[2].v[0])) }},
		{name: "fill_cache whole cache", in: []inSpec{bf16In(1, 3, 8, 32), bf16In(1, 3, 8, 32), posIn(0, 1)}, exact: true,
			build: func(b *ir.Builder, in []*ir.Value) *ir.Value { return b.FillCache(in[0], in[1], in[2]) },
			want:  func(in []arr) []float64 { return fillCache64(in[0], in[1], int(in[2].v[0])) }},
		{name: "sdpa_prefill GQA 2 at an offset", in: []inSpec{bf16In(2, 4, 5, 32), bf16In(2, 2, 16, 32), bf16In(2, 2, 16, 32), posIn(0, 12)},
			build: func(b *ir.Builder, in []*ir.Value) *ir.Value {
				return b.SDPAPrefill(in[0], in[1], in[2], in[3], 1/math.Sqrt(32))
			},
			want: func(in []arr) []float64 {
				return sdpaPrefill64(in[0], in[1], in[2], int(in[3].v[0]), 1/math.Sqrt(32))
			},
			onMaxRel: sdpaOnMaxRel},
		{name: "sdpa_prefill causal from 0", in: []inSpec{bf16In(1, 2, 8, 16), bf16In(1, 2, 8, 16), bf16In(1, 2, 8, 16), posIn(0, 1)},
			build:    func(b *ir.Builder, in []*ir.Value) *ir.Value { return b.SDPAPrefill(in[0], in[1], in[2], in[3], 0.25) },
			want:     func(in []arr) []float64 { return sdpaPrefill64(in[0], in[1], in[2], int(in[3].v[0]), 0.25) },
			onMaxRel: sdpaOnMaxRel},
	}
}

func TestPrefillOpsAgainstFloat64(t *testing.T) {
	for ci, c := range prefillOpCases() {
		t.Run(c.name, func(t *testing.T) { checkOpCase(t, 2000+uint64(ci), c) })
	}
}

func TestPrefillOpHandValues(t *testing.T) {
	tests := []struct {
		name  string
		in    ir.TensorType
		data  []float32
		build func(b *ir.Builder, x *ir.Value) *ir.Value
		want  Tensor
	}{
		{"cumsum", ir.T(ir.FP32, 1, 3), []float32{1, 2, 3},
			func(b *ir.Builder, x *ir.Value) *ir.Value { return b.Cumsum(x, -1) },
			Tensor{Shape: ir.Shape{1, 3}, Data: []float32{1, 3, 6}}},
		{"tril 0", ir.T(ir.FP32, 2, 3), []float32{1, 2, 3, 4, 5, 6},
			func(b *ir.Builder, x *ir.Value) *ir.Value { return b.Tril(x, 0) },
			Tensor{Shape: ir.Shape{2, 3}, Data: []float32{1, 0, 0, 4, 5, 0}}},
		{"tril -1", ir.T(ir.FP32, 2, 3), []float32{1, 2, 3, 4, 5, 6},
			func(b *ir.Builder, x *ir.Value) *ir.Value { return b.Tril(x, -1) },
			Tensor{Shape: ir.Shape{2, 3}, Data: []float32{0, 0, 0, 4, 0, 0}}},
		// L = [[0,0,0],[2,0,0],[3,4,0]] (the 9s on and above the diagonal
		// are ignored): (I+L)^-1 = [[1,0,0],[-2,1,0],[2*4-3,-4,1]].
		{"tril_inverse", ir.T(ir.FP32, 3, 3), []float32{9, 9, 9, 2, 9, 9, 3, 4, 9},
			func(b *ir.Builder, x *ir.Value) *ir.Value { return b.TrilInverse(x) },
			Tensor{Shape: ir.Shape{3, 3}, Data: []float32{1, 0, 0, -2, 1, 0, 5, -4, 1}}},
		// out[t] = 10*x[t] + x[t+1].
		{"conv_depthwise", ir.T(ir.FP32, 3, 1), []float32{1, 2, 3},
			func(b *ir.Builder, x *ir.Value) *ir.Value {
				return b.ConvDepthwise(x, b.AddScalar(b.MulScalar(b.Slice(x, []int{0, 0}, []int{2, 1}), -9), 19))
			},
			Tensor{Shape: ir.Shape{2, 1}, Data: []float32{12, 23}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g, x, y := oneOp(t, tc.in, tc.build)
			for _, opts := range []Options{DefaultOptions(), ExactOptions()} {
				res, err := Eval(g, map[*ir.Value]Tensor{x: {Shape: tc.in.Shape, Data: tc.data}}, opts)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tc.want, res[y]); diff != "" {
					t.Errorf("StorageFormats=%v (-want +got):\n%s", opts.StorageFormats, diff)
				}
			}
		})
	}
}

// TestPrefillDeviceReads: with StorageFormats, cumsum and conv_depthwise
// read fp32 data as the device's source registers do (tf32; SrcA also
// drops tf32's last mantissa bit) and conv_depthwise's result passes
// through SrcA once more (copy_tile of its fp32 accumulator); without it
// they are plain float math.
func TestPrefillDeviceReads(t *testing.T) {
	const (
		e9  = 0x1p-9
		e10 = 0x1p-10
		e20 = 0x1p-20
	)
	tests := []struct {
		name          string
		in            ir.TensorType
		data          []float32
		build         func(b *ir.Builder, x *ir.Value) *ir.Value
		device, exact []float32
	}{
		// x is in0 of x @ U, read through SrcB: tf32 keeps 2^-10, not 2^-20.
		{"cumsum last axis", ir.T(ir.FP32, 1, 3), []float32{1 + e10, 1 + e20, 1},
			func(b *ir.Builder, x *ir.Value) *ir.Value { return b.Cumsum(x, -1) },
			[]float32{1 + e10, 2 + e10, 3 + e10}, []float32{1 + e10, 2 + e10 + e20, 3 + e10 + e20}},
		// x is in1 of L @ x, read through SrcA: 2^-10 is dropped as well.
		{"cumsum rows", ir.T(ir.FP32, 3, 1), []float32{1 + e10, 1 + e20, 1},
			func(b *ir.Builder, x *ir.Value) *ir.Value { return b.Cumsum(x, 0) },
			[]float32{1, 2, 3}, []float32{1 + e10, 2 + e10 + e20, 3 + e10 + e20}},
		// One tap w = x[0]: out[t] = x[0] * x[t]. (1+2^-9)^2 = 1+2^-8+2^-18
		// is exact in the fp32 accumulator, whose copy to DEST truncates it
		// to tf32; x[1] is read as 1.
		{"conv_depthwise", ir.T(ir.FP32, 2, 1), []float32{1 + e9, 1 + e20},
			func(b *ir.Builder, x *ir.Value) *ir.Value {
				return b.ConvDepthwise(x, b.Slice(x, []int{0, 0}, []int{1, 1}))
			},
			[]float32{1 + 2*e9, 1 + e9}, []float32{1 + 2*e9 + e9*e9, 1 + e9 + e20}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g, x, y := oneOp(t, tc.in, tc.build)
			for _, m := range []struct {
				opts Options
				want []float32
			}{{DefaultOptions(), tc.device}, {ExactOptions(), tc.exact}} {
				res, err := Eval(g, map[*ir.Value]Tensor{x: {Shape: tc.in.Shape, Data: tc.data}}, m.opts)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(m.want, res[y].Data); diff != "" {
					t.Errorf("StorageFormats=%v (-want +got):\n%s", m.opts.StorageFormats, diff)
				}
			}
		})
	}
}

func TestPrefillPositionErrors(t *testing.T) {
	b := ir.NewBuilder("prefill")
	cache := b.State("k_cache", ir.T(ir.FP32, 1, 1, 8, 2))
	nw := b.Input("new", ir.T(ir.FP32, 1, 1, 3, 2))
	pos := b.Input("pos", ir.T(ir.UInt32, 1))
	b.Region("attention", 0)
	kc := b.FillCache(cache, nw, pos)
	b.UpdateState(cache, kc)
	b.Output(b.SDPAPrefill(nw, kc, kc, pos, 1))
	g, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	env := map[*ir.Value]Tensor{
		cache: NewTensor(ir.Shape{1, 1, 8, 2}),
		nw:    {Shape: ir.Shape{1, 1, 3, 2}, Data: []float32{1, 2, 3, 4, 5, 6}},
		pos:   {Shape: ir.Shape{1}, Data: []float32{5}},
	}
	res, err := Eval(g, env, DefaultOptions())
	if err != nil {
		t.Fatalf("pos 5 + 3 positions fit 8: %v", err)
	}
	if diff := cmp.Diff([]float32{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6}, res[kc].Data); diff != "" {
		t.Errorf("filled cache (-want +got):\n%s", diff)
	}
	env[pos] = Tensor{Shape: ir.Shape{1}, Data: []float32{6}}
	if _, err := Eval(g, env, DefaultOptions()); err == nil || !strings.Contains(err.Error(), "op fill_cache") || !strings.Contains(err.Error(), "rule prefill-pos") || !strings.Contains(err.Error(), "[0, 5]") {
		t.Errorf("pos 6 + 3 positions past 8: got %v, want a fill_cache prefill-pos error", err)
	}
}
