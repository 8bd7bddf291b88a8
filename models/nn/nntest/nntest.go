// Package nntest is a test helper for model packages: a plain float64
// interpreter of graph-IR graphs (every op a model in models/ emits), run
// on all devices of the graph's mesh in lockstep so that collectives
// combine the devices' values.
//
// It is an oracle for checking that a model's graph computes the published
// equations and that its tensor-parallel split matches one device; it is
// not the reference evaluator (sim/ref), which reproduces Blackhole
// numerics: here nothing is rounded, typecasts and memory moves are
// identities, and block-float weights hold whatever values they are given.
package nntest

import (
	"fmt"
	"math"

	"github.com/tcc-dev/tcc/ir"
)

// Tensor is a dense row-major float64 tensor.
type Tensor struct {
	Shape ir.Shape
	Data  []float64
}

// New returns a zero tensor of the given shape.
func New(shape ...int) Tensor {
	s := ir.Shape(shape)
	return Tensor{Shape: s, Data: make([]float64, s.Numel())}
}

// FromF32 wraps float32 contents.
func FromF32(shape ir.Shape, d []float32) Tensor {
	t := Tensor{Shape: shape.Clone(), Data: make([]float64, len(d))}
	for i, v := range d {
		t.Data[i] = float64(v)
	}
	return t
}

// Env maps values to contents on one device.
type Env map[*ir.Value]Tensor

// Run evaluates g's ops in program order on every device: envs[d] holds
// device d's inputs, weights and states (len(envs) is the mesh's device
// count) and receives every op result. It returns the first error (an
// unsupported op, a missing operand, a shape mismatch).
func Run(g *ir.Graph, envs []Env) error {
	if len(envs) != g.Mesh.Devices() {
		return fmt.Errorf("nntest: %d device envs for mesh %s", len(envs), g.Mesh)
	}
	for _, op := range g.Ops() {
		in := make([][]Tensor, len(envs))
		for d, env := range envs {
			for _, v := range op.Operands {
				t, ok := env[v]
				if !ok {
					return fmt.Errorf("nntest: %s: operand %s (%q) has no value", op.Where(), v, v.Name)
				}
				if !t.Shape.Equal(v.Type.Shape) {
					return fmt.Errorf("nntest: %s: operand %s holds %s, type says %s", op.Where(), v, t.Shape, v.Type.Shape)
				}
				in[d] = append(in[d], t)
			}
		}
		outs, err := eval(op, in)
		if err != nil {
			return fmt.Errorf("nntest: %s: %w", op.Where(), err)
		}
		for d := range envs {
			if !outs[d].Shape.Equal(op.Result().Type.Shape) {
				return fmt.Errorf("nntest: %s: computed %s, type says %s", op.Where(), outs[d].Shape, op.Result().Type.Shape)
			}
			envs[d][op.Result()] = outs[d]
		}
	}
	return nil
}

// eval computes one op on every device.
func eval(op *ir.Op, in [][]Tensor) ([]Tensor, error) {
	out := make([]Tensor, len(in))
	switch op.Kind {
	case ir.OpAllReduce, ir.OpReduceScatter, ir.OpAllGather:
		return collective(op, in)
	}
	for d := range in {
		t, err := local(op, in[d])
		if err != nil {
			return nil, err
		}
		out[d] = t
	}
	return out, nil
}

func collective(op *ir.Op, in [][]Tensor) ([]Tensor, error) {
	n := len(in)
	if op.Int("devices") != n {
		return nil, fmt.Errorf("devices %d but %d devices run", op.Int("devices"), n)
	}
	out := make([]Tensor, n)
	switch op.Kind {
	case ir.OpAllReduce, ir.OpReduceScatter:
		sum := New(in[0][0].Shape...)
		for d := range in {
			for i, v := range in[d][0].Data {
				sum.Data[i] += v
			}
		}
		for d := range out {
			if op.Kind == ir.OpAllReduce {
				out[d] = sum
				continue
			}
			ax := axis(op.Int("axis"), sum.Shape.Rank())
			c := sum.Shape[ax] / n
			begin, end := make([]int, sum.Shape.Rank()), sum.Shape.Clone()
			begin[ax], end[ax] = d*c, (d+1)*c
			out[d] = slice(sum, begin, end)
		}
	case ir.OpAllGather:
		ax := axis(op.Int("axis"), in[0][0].Shape.Rank())
		all := in[0][0]
		for d := 1; d < n; d++ {
			all = concat(all, in[d][0], ax)
		}
		for d := range out {
			out[d] = all
		}
	}
	return out, nil
}

func axis(a, r int) int {
	if a < 0 {
		return a + r
	}
	return a
}

func local(op *ir.Op, x []Tensor) (Tensor, error) {
	switch op.Kind {
	case ir.OpAdd:
		return binary(x[0], x[1], func(a, b float64) float64 { return a + b }), nil
	case ir.OpSub:
		return binary(x[0], x[1], func(a, b float64) float64 { return a - b }), nil
	case ir.OpMul:
		return binary(x[0], x[1], func(a, b float64) float64 { return a * b }), nil
	case ir.OpAddScalar:
		c := op.Float("value")
		return unary(x[0], func(a float64) float64 { return a + c }), nil
	case ir.OpMulScalar:
		c := op.Float("value")
		return unary(x[0], func(a float64) float64 { return a * c }), nil
	case ir.OpSiLU:
		return unary(x[0], func(a float64) float64 { return a / (1 + math.Exp(-a)) }), nil
	case ir.OpSigmoid:
		return unary(x[0], func(a float64) float64 { return 1 / (1 + math.Exp(-a)) }), nil
	case ir.OpExp:
		return unary(x[0], math.Exp), nil
	case ir.OpRsqrt:
		return unary(x[0], func(a float64) float64 { return 1 / math.Sqrt(a) }), nil
	case ir.OpSquare:
		return unary(x[0], func(a float64) float64 { return a * a }), nil
	case ir.OpSoftplus:
		return unary(x[0], func(a float64) float64 {
			if a > 20 {
				return a
			}
			return math.Log1p(math.Exp(a))
		}), nil
	case ir.OpMean:
		s := reduce(x[0], x[0].Shape.Rank()-1)
		n := float64(x[0].Shape[x[0].Shape.Rank()-1])
		return unary(s, func(a float64) float64 { return a / n }), nil
	case ir.OpSum:
		return reduce(x[0], axis(op.Int("axis"), x[0].Shape.Rank())), nil
	case ir.OpArgmax:
		return argmax(x[0]), nil
	case ir.OpMatmul, ir.OpBMM:
		return matmul(x[0], x[1], op.Kind == ir.OpBMM), nil
	case ir.OpRMSNormComposed, ir.OpRMSNorm:
		return rmsNorm(x[0], &x[1], op.Float("eps"), op.Float("offset")), nil
	case ir.OpRMSNormPlain:
		return rmsNorm(x[0], nil, op.Float("eps"), 0), nil
	case ir.OpEmbedding:
		return embedding(x[0], x[1])
	case ir.OpTypecast, ir.OpToMemory:
		return x[0], nil
	case ir.OpReshape:
		return Tensor{Shape: ir.Shape(op.Ints("shape")).Clone(), Data: x[0].Data}, nil
	case ir.OpSlice:
		return slice(x[0], op.Ints("begin"), op.Ints("end")), nil
	case ir.OpConcat:
		return concat(x[0], x[1], axis(op.Int("axis"), x[0].Shape.Rank())), nil
	case ir.OpPad:
		return pad(x[0], op.Ints("shape"), op.Float("value")), nil
	case ir.OpRepeatInterleave:
		return repeatInterleave(x[0], op.Int("repeats"), axis(op.Int("axis"), x[0].Shape.Rank())), nil
	case ir.OpTranspose:
		r := x[0].Shape.Rank()
		return transpose(x[0], axis(op.Int("dim0"), r), axis(op.Int("dim1"), r)), nil
	case ir.OpRotary:
		return rotary(x[0], x[1], x[2]), nil
	case ir.OpUpdateCache:
		return updateCache(x[0], x[1], x[2])
	case ir.OpSDPADecode:
		return sdpaDecode(x[0], x[1], x[2], x[3], op.Float("scale"))
	case ir.OpCumsum:
		return cumsum(x[0], axis(op.Int("axis"), x[0].Shape.Rank())), nil
	case ir.OpTril:
		return tril(x[0], op.Int("diagonal")), nil
	case ir.OpTrilInverse:
		return trilInverse(x[0]), nil
	case ir.OpConvDepthwise:
		return convDepthwise(x[0], x[1]), nil
	case ir.OpFillCache:
		return fillCache(x[0], x[1], x[2])
	case ir.OpSDPAPrefill:
		return sdpaPrefill(x[0], x[1], x[2], x[3], op.Float("scale"))
	}
	return Tensor{}, fmt.Errorf("op %s is not supported by nntest", op.Name())
}

func unary(x Tensor, f func(float64) float64) Tensor {
	out := Tensor{Shape: x.Shape.Clone(), Data: make([]float64, len(x.Data))}
	for i, v := range x.Data {
		out.Data[i] = f(v)
	}
	return out
}

func strides(s ir.Shape) []int {
	st := make([]int, len(s))
	n := 1
	for i := len(s) - 1; i >= 0; i-- {
		st[i] = n
		n *= s[i]
	}
	return st
}

// index converts a flat index of shape s to per-dim indices in idx.
func index(flat int, s ir.Shape, idx []int) {
	for i := len(s) - 1; i >= 0; i-- {
		idx[i] = flat % s[i]
		flat /= s[i]
	}
}

// binary applies f with numpy broadcasting.
func binary(a, b Tensor, f func(x, y float64) float64) Tensor {
	r := max(a.Shape.Rank(), b.Shape.Rank())
	sa, sb := padShape(a.Shape, r), padShape(b.Shape, r)
	s := make(ir.Shape, r)
	for i := range s {
		s[i] = max(sa[i], sb[i])
	}
	out := New(s...)
	sta, stb := strides(sa), strides(sb)
	idx := make([]int, r)
	for i := range out.Data {
		index(i, s, idx)
		ia, ib := 0, 0
		for d := range idx {
			if sa[d] != 1 {
				ia += idx[d] * sta[d]
			}
			if sb[d] != 1 {
				ib += idx[d] * stb[d]
			}
		}
		out.Data[i] = f(a.Data[ia], b.Data[ib])
	}
	return out
}

func padShape(s ir.Shape, r int) ir.Shape {
	p := make(ir.Shape, r)
	for i := range p {
		p[i] = 1
	}
	copy(p[r-len(s):], s)
	return p
}

// reduce sums over axis ax, keeping it as size 1.
func reduce(x Tensor, ax int) Tensor {
	s := x.Shape.Clone()
	s[ax] = 1
	out := New(s...)
	idx := make([]int, len(s))
	st := strides(s)
	for i, v := range x.Data {
		index(i, x.Shape, idx)
		idx[ax] = 0
		o := 0
		for d := range idx {
			o += idx[d] * st[d]
		}
		out.Data[o] += v
	}
	return out
}

func argmax(x Tensor) Tensor {
	n := x.Shape[x.Shape.Rank()-1]
	s := x.Shape.Clone()
	s[len(s)-1] = 1
	out := New(s...)
	for r := range out.Data {
		best := 0
		for j := 1; j < n; j++ {
			if x.Data[r*n+j] > x.Data[r*n+best] {
				best = j
			}
		}
		out.Data[r] = float64(best)
	}
	return out
}

// matmul: a [.., M, K] x b [K, N] (weights) or b [.., K, N] (bmm, equal leading dims).
func matmul(a, b Tensor, batched bool) Tensor {
	ra := a.Shape.Rank()
	M, K := a.Shape[ra-2], a.Shape[ra-1]
	N := b.Shape[b.Shape.Rank()-1]
	s := a.Shape.Clone()
	s[ra-1] = N
	out := New(s...)
	batches := a.Shape.Numel() / (M * K)
	for bt := 0; bt < batches; bt++ {
		ao, oo, bo := bt*M*K, bt*M*N, 0
		if batched {
			bo = bt * K * N
		}
		for m := 0; m < M; m++ {
			for k := 0; k < K; k++ {
				av := a.Data[ao+m*K+k]
				if av == 0 {
					continue
				}
				row := b.Data[bo+k*N : bo+(k+1)*N]
				o := out.Data[oo+m*N : oo+(m+1)*N]
				for n, bv := range row {
					o[n] += av * bv
				}
			}
		}
	}
	return out
}

func rmsNorm(x Tensor, w *Tensor, eps, offset float64) Tensor {
	n := x.Shape[x.Shape.Rank()-1]
	out := New(x.Shape...)
	for r := 0; r < len(x.Data)/n; r++ {
		row := x.Data[r*n : (r+1)*n]
		ss := 0.0
		for _, v := range row {
			ss += v * v
		}
		inv := 1 / math.Sqrt(ss/float64(n)+eps)
		for j, v := range row {
			g := 1.0
			if w != nil {
				g = w.Data[j] + offset
			}
			out.Data[r*n+j] = v * inv * g
		}
	}
	return out
}

func embedding(ids, table Tensor) (Tensor, error) {
	V, H := table.Shape[0], table.Shape[1]
	out := New(append(ids.Shape.Clone(), H)...)
	for i, id := range ids.Data {
		r := int(id)
		if r < 0 || r >= V {
			return Tensor{}, fmt.Errorf("token id %d out of range [0, %d)", r, V)
		}
		copy(out.Data[i*H:(i+1)*H], table.Data[r*H:(r+1)*H])
	}
	return out, nil
}

func slice(x Tensor, begin, end []int) Tensor {
	s := make(ir.Shape, len(begin))
	for d := range s {
		s[d] = end[d] - begin[d]
	}
	out := New(s...)
	st := strides(x.Shape)
	idx := make([]int, len(s))
	for i := range out.Data {
		index(i, s, idx)
		o := 0
		for d := range idx {
			o += (idx[d] + begin[d]) * st[d]
		}
		out.Data[i] = x.Data[o]
	}
	return out
}

func concat(a, b Tensor, ax int) Tensor {
	s := a.Shape.Clone()
	s[ax] += b.Shape[ax]
	out := New(s...)
	idx := make([]int, len(s))
	sta, stb := strides(a.Shape), strides(b.Shape)
	for i := range out.Data {
		index(i, s, idx)
		src, st := a, sta
		if idx[ax] >= a.Shape[ax] {
			src, st = b, stb
			idx[ax] -= a.Shape[ax]
		}
		o := 0
		for d := range idx {
			o += idx[d] * st[d]
		}
		out.Data[i] = src.Data[o]
	}
	return out
}

func pad(x Tensor, shape []int, value float64) Tensor {
	out := New(shape...)
	idx := make([]int, len(shape))
	st := strides(x.Shape)
	for i := range out.Data {
		index(i, out.Shape, idx)
		o, in := 0, true
		for d := range idx {
			if idx[d] >= x.Shape[d] {
				in = false
				break
			}
			o += idx[d] * st[d]
		}
		if in {
			out.Data[i] = x.Data[o]
		} else {
			out.Data[i] = value
		}
	}
	return out
}

func repeatInterleave(x Tensor, r, ax int) Tensor {
	s := x.Shape.Clone()
	s[ax] *= r
	out := New(s...)
	idx := make([]int, len(s))
	st := strides(x.Shape)
	for i := range out.Data {
		index(i, s, idx)
		idx[ax] /= r
		o := 0
		for d := range idx {
			o += idx[d] * st[d]
		}
		out.Data[i] = x.Data[o]
	}
	return out
}

func transpose(x Tensor, d0, d1 int) Tensor {
	s := x.Shape.Clone()
	s[d0], s[d1] = s[d1], s[d0]
	out := New(s...)
	idx := make([]int, len(s))
	st := strides(x.Shape)
	for i := range out.Data {
		index(i, s, idx)
		idx[d0], idx[d1] = idx[d1], idx[d0]
		o := 0
		for d := range idx {
			o += idx[d] * st[d]
		}
		out.Data[i] = x.Data[o]
	}
	return out
}

func rotary(x, cos, sin Tensor) Tensor {
	R := x.Shape[x.Shape.Rank()-1]
	h := R / 2
	rot := New(x.Shape...)
	for r := 0; r < len(x.Data)/R; r++ {
		for i := 0; i < R; i++ {
			if i < h {
				rot.Data[r*R+i] = -x.Data[r*R+i+h]
			} else {
				rot.Data[r*R+i] = x.Data[r*R+i-h]
			}
		}
	}
	mul := func(a, b float64) float64 { return a * b }
	add := func(a, b float64) float64 { return a + b }
	return binary(binary(x, cos, mul), binary(rot, sin, mul), add)
}

func updateCache(cache, nw, posT Tensor) (Tensor, error) {
	B, Hc, L, D := cache.Shape[0], cache.Shape[1], cache.Shape[2], cache.Shape[3]
	Hn := nw.Shape[1]
	pos := int(posT.Data[0])
	if pos < 0 || pos >= L {
		return Tensor{}, fmt.Errorf("pos %d outside cache length %d", pos, L)
	}
	out := Tensor{Shape: cache.Shape.Clone(), Data: append([]float64(nil), cache.Data...)}
	for b := 0; b < B; b++ {
		for h := 0; h < Hc; h++ {
			copy(out.Data[((b*Hc+h)*L+pos)*D:][:D], nw.Data[(b*Hn+h)*D:][:D])
		}
	}
	return out, nil
}

func sdpaDecode(q, k, v, posT Tensor, scale float64) (Tensor, error) {
	B, Hq, D := q.Shape[0], q.Shape[1], q.Shape[2]
	Hkv, L := k.Shape[1], k.Shape[2]
	G := Hq / Hkv
	pos := int(posT.Data[0])
	if pos < 0 || pos >= L {
		return Tensor{}, fmt.Errorf("pos %d outside cache length %d", pos, L)
	}
	out := New(q.Shape...)
	for b := 0; b < B; b++ {
		for h := 0; h < Hq; h++ {
			qv := q.Data[(b*Hq+h)*D:][:D]
			base := (b*Hkv + h/G) * L * D
			sc := make([]float64, pos+1)
			mx := math.Inf(-1)
			for t := range sc {
				dot := 0.0
				for j, x := range qv {
					dot += x * k.Data[base+t*D+j]
				}
				sc[t] = scale * dot
				mx = math.Max(mx, sc[t])
			}
			z := 0.0
			for t := range sc {
				sc[t] = math.Exp(sc[t] - mx)
				z += sc[t]
			}
			o := out.Data[(b*Hq+h)*D:][:D]
			for t, p := range sc {
				for j := range o {
					o[j] += p / z * v.Data[base+t*D+j]
				}
			}
		}
	}
	return out, nil
}

func cumsum(x Tensor, ax int) Tensor {
	out := Tensor{Shape: x.Shape.Clone(), Data: append([]float64(nil), x.Data...)}
	st := strides(x.Shape)[ax]
	idx := make([]int, x.Shape.Rank())
	for i := range out.Data {
		index(i, x.Shape, idx)
		if idx[ax] > 0 {
			out.Data[i] += out.Data[i-st]
		}
	}
	return out
}

func tril(x Tensor, diag int) Tensor {
	r := x.Shape.Rank()
	m, n := x.Shape[r-2], x.Shape[r-1]
	out := Tensor{Shape: x.Shape.Clone(), Data: append([]float64(nil), x.Data...)}
	for i := range out.Data {
		row, col := (i/n)%m, i%n
		if col-row > diag {
			out.Data[i] = 0
		}
	}
	return out
}

// trilInverse inverts I + strict_lower(x) by forward substitution.
func trilInverse(x Tensor) Tensor {
	n := x.Shape[x.Shape.Rank()-1]
	out := New(x.Shape...)
	for m := 0; m < len(x.Data)/(n*n); m++ {
		a := x.Data[m*n*n : (m+1)*n*n]
		t := out.Data[m*n*n : (m+1)*n*n]
		// (I + L) T = I, row by row: T[i] = e_i - sum_{j<i} L[i,j] T[j].
		for i := 0; i < n; i++ {
			t[i*n+i] = 1
			for j := 0; j < i; j++ {
				l := a[i*n+j]
				for c := 0; c <= j; c++ {
					t[i*n+c] -= l * t[j*n+c]
				}
			}
		}
	}
	return out
}

func convDepthwise(x, w Tensor) Tensor {
	r := x.Shape.Rank()
	T, C, K := x.Shape[r-2], x.Shape[r-1], w.Shape[0]
	s := x.Shape.Clone()
	s[r-2] = T - K + 1
	out := New(s...)
	for b := 0; b < len(x.Data)/(T*C); b++ {
		for t := 0; t < T-K+1; t++ {
			for c := 0; c < C; c++ {
				acc := 0.0
				for j := 0; j < K; j++ {
					acc += w.Data[j*C+c] * x.Data[(b*T+t+j)*C+c]
				}
				out.Data[(b*(T-K+1)+t)*C+c] = acc
			}
		}
	}
	return out
}

func fillCache(cache, nw, posT Tensor) (Tensor, error) {
	B, H, L, D := cache.Shape[0], cache.Shape[1], cache.Shape[2], cache.Shape[3]
	S := nw.Shape[2]
	pos := int(posT.Data[0])
	if pos < 0 || pos+S > L {
		return Tensor{}, fmt.Errorf("pos %d + %d tokens outside cache length %d", pos, S, L)
	}
	out := Tensor{Shape: cache.Shape.Clone(), Data: append([]float64(nil), cache.Data...)}
	for bh := 0; bh < B*H; bh++ {
		copy(out.Data[(bh*L+pos)*D:(bh*L+pos+S)*D], nw.Data[bh*S*D:(bh+1)*S*D])
	}
	return out, nil
}

func sdpaPrefill(q, k, v, posT Tensor, scale float64) (Tensor, error) {
	B, Hq, S, D := q.Shape[0], q.Shape[1], q.Shape[2], q.Shape[3]
	Hkv, L := k.Shape[1], k.Shape[2]
	G := Hq / Hkv
	pos := int(posT.Data[0])
	if pos < 0 || pos+S > L {
		return Tensor{}, fmt.Errorf("pos %d + %d tokens outside cache length %d", pos, S, L)
	}
	out := New(q.Shape...)
	for b := 0; b < B; b++ {
		for h := 0; h < Hq; h++ {
			base := (b*Hkv + h/G) * L * D
			for s := 0; s < S; s++ {
				qv := q.Data[((b*Hq+h)*S+s)*D:][:D]
				n := pos + s + 1
				sc := make([]float64, n)
				mx := math.Inf(-1)
				for t := range sc {
					dot := 0.0
					for j, x := range qv {
						dot += x * k.Data[base+t*D+j]
					}
					sc[t] = scale * dot
					mx = math.Max(mx, sc[t])
				}
				z := 0.0
				for t := range sc {
					sc[t] = math.Exp(sc[t] - mx)
					z += sc[t]
				}
				o := out.Data[((b*Hq+h)*S+s)*D:][:D]
				for t, p := range sc {
					for j := range o {
						o[j] += p / z * v.Data[base+t*D+j]
					}
				}
			}
		}
	}
	return out, nil
}
