package nn

import (
	"math"
	"math/rand"
	"strings"
	"testing"

	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/models/nn/nntest"
)

// block is a one-block test graph on a 1xN mesh.
type block struct {
	g      *ir.Graph
	tally  *Tally
	out    *ir.Value
	byName map[string]*ir.Value
}

func buildBlock(t *testing.T, devices int, emit func(c Ctx) *ir.Value) block {
	t.Helper()
	b := ir.NewBuilder("block")
	b.G.Mesh = ir.Mesh{Rows: 1, Cols: devices}
	b.Region("layer", 0)
	c := Ctx{B: b, TP: TP{Devices: devices}, Tally: NewTally(b.G)}
	out := emit(c)
	b.Output(out)
	g, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	bl := block{g: g, tally: c.Tally, out: out, byName: map[string]*ir.Value{}}
	for _, list := range [][]*ir.Value{g.Inputs, g.Weights, g.States} {
		for _, v := range list {
			bl.byName[v.Name] = v
		}
	}
	return bl
}

// whole holds one-device contents by value name.
type whole map[string]nntest.Tensor

func randTensor(rng *rand.Rand, shape ir.Shape, mean, std float64) nntest.Tensor {
	t := nntest.New(shape...)
	for i := range t.Data {
		// float32-exact, so cutting shares through float32 loses nothing
		t.Data[i] = float64(float32(mean + std*rng.NormFloat64()))
	}
	return t
}

// envs cuts whole contents into per-device environments of bl; shareOf maps
// a value name to its share (inputs are replicated).
func (bl block) envs(t *testing.T, w whole, shareOf func(name string) Share) []nntest.Env {
	t.Helper()
	n := bl.g.Mesh.Devices()
	envs := make([]nntest.Env, n)
	for d := range envs {
		envs[d] = nntest.Env{}
		for name, v := range bl.byName {
			src, ok := w[name]
			if !ok {
				t.Fatalf("no contents for %q", name)
			}
			sh := Replicate
			if v.Kind != ir.KindInput {
				sh = shareOf(name)
			}
			f32 := make([]float32, len(src.Data))
			for i, x := range src.Data {
				f32[i] = float32(x)
			}
			part, shape, err := sh.Cut(f32, src.Shape, d, n)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if !shape.Equal(v.Type.Shape) {
				t.Fatalf("%s: share %s, declared %s", name, shape, v.Type.Shape)
			}
			envs[d][v] = nntest.FromF32(shape, part)
		}
	}
	return envs
}

func closeTo(t *testing.T, what string, want, got []float64, tol float64) {
	t.Helper()
	if len(want) != len(got) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	scale := 1e-30
	for _, v := range want {
		scale = math.Max(scale, math.Abs(v))
	}
	for i := range want {
		if math.Abs(want[i]-got[i]) > tol*scale {
			t.Fatalf("%s[%d] = %v, want %v (scale %v)", what, i, got[i], want[i], scale)
		}
	}
}

func sigmoid(x float64) float64 { return 1 / (1 + math.Exp(-x)) }
func silu(x float64) float64    { return x * sigmoid(x) }

// vecMat returns x @ W for W [len(x), n] row-major.
func vecMat(x, w []float64, n int) []float64 {
	out := make([]float64, n)
	for k, xv := range x {
		for j := 0; j < n; j++ {
			out[j] += xv * w[k*n+j]
		}
	}
	return out
}

func rmsRow(x []float64, eps float64) []float64 {
	ss := 0.0
	for _, v := range x {
		ss += v * v
	}
	inv := 1 / math.Sqrt(ss/float64(len(x))+eps)
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = v * inv
	}
	return out
}

// gdnRef is one decode step of the Gated DeltaNet mixer written from the
// published equations (reference/qwen27b.md), on whole tensors in the IR
// weight layout. It returns y [B*H] and the new conv and recurrent states.
func gdnRef(d GDNDims, w whole, x, conv, rec []float64) (y, newConv, newRec []float64) {
	B, H, Hk, Hv, Dk, Dv, K := d.Batch, d.Hidden, d.KeyHeads, d.ValueHeads, d.KeyDim, d.ValueDim, d.ConvKernel
	C, kw, vw := d.Channels(), d.KeyWidth(), d.ValueWidth()
	newConv = make([]float64, len(conv))
	newRec = append([]float64(nil), rec...)
	y = make([]float64, B*H)
	for b := 0; b < B; b++ {
		xb := x[b*H : (b+1)*H]
		qkv := vecMat(xb, w["l.linear_attn.in_proj_qkv.weight"].Data, C)
		z := vecMat(xb, w["l.linear_attn.in_proj_z.weight"].Data, vw)
		a := vecMat(xb, w["l.linear_attn.in_proj_a.weight"].Data, Hv)
		bb := vecMat(xb, w["l.linear_attn.in_proj_b.weight"].Data, Hv)
		taps := w["l.linear_attn.conv1d.weight"].Data // [K, C]
		cv := make([]float64, C)
		for c := 0; c < C; c++ {
			acc := taps[(K-1)*C+c] * qkv[c]
			for j := 0; j < K-1; j++ {
				acc += taps[j*C+c] * conv[(b*(K-1)+j)*C+c]
			}
			cv[c] = silu(acc)
			for j := 0; j < K-2; j++ {
				newConv[(b*(K-1)+j)*C+c] = conv[(b*(K-1)+j+1)*C+c]
			}
			newConv[(b*(K-1)+K-2)*C+c] = qkv[c]
		}
		o := make([]float64, vw)
		for h := 0; h < Hv; h++ {
			kh := h / (Hv / Hk)
			l2 := func(v []float64) []float64 {
				ss := 0.0
				for _, e := range v {
					ss += e * e
				}
				inv := 1 / math.Sqrt(ss+d.Eps)
				out := make([]float64, len(v))
				for i, e := range v {
					out[i] = e * inv
				}
				return out
			}
			q := l2(cv[kh*Dk : (kh+1)*Dk])
			for i := range q {
				q[i] /= math.Sqrt(float64(Dk))
			}
			k := l2(cv[kw+kh*Dk : kw+(kh+1)*Dk])
			v := cv[2*kw+h*Dv : 2*kw+(h+1)*Dv]
			beta := sigmoid(bb[h])
			sp := a[h] + w["l.linear_attn.dt_bias"].Data[h]
			if sp <= 20 {
				sp = math.Log1p(math.Exp(sp))
			}
			g := -math.Exp(w["l.linear_attn.A_log"].Data[h]) * sp
			S := newRec[(b*Hv+h)*Dk*Dv : (b*Hv+h+1)*Dk*Dv]
			for i := range S {
				S[i] *= math.Exp(g)
			}
			for j := 0; j < Dv; j++ {
				mem := 0.0
				for i := 0; i < Dk; i++ {
					mem += S[i*Dv+j] * k[i]
				}
				delta := (v[j] - mem) * beta
				for i := 0; i < Dk; i++ {
					S[i*Dv+j] += k[i] * delta
				}
			}
			oh := make([]float64, Dv)
			for j := 0; j < Dv; j++ {
				for i := 0; i < Dk; i++ {
					oh[j] += S[i*Dv+j] * q[i]
				}
			}
			oh = rmsRow(oh, d.Eps)
			for j := range oh {
				o[h*Dv+j] = oh[j] * w["l.linear_attn.norm.weight"].Data[j] * silu(z[h*Dv+j])
			}
		}
		copy(y[b*H:], vecMat(o, w["l.linear_attn.out_proj.weight"].Data, H))
	}
	return y, newConv, newRec
}

func gdnWhole(rng *rand.Rand, bl block) whole {
	w := whole{}
	for name, v := range bl.byName {
		s := v.Type.Shape
		switch {
		case strings.HasSuffix(name, "A_log"):
			w[name] = randTensor(rng, s, 1, 0.5)
		case strings.HasSuffix(name, "norm.weight"):
			w[name] = randTensor(rng, s, 1, 0.1)
		case s.Rank() == 2 && v.Kind == ir.KindWeight:
			w[name] = randTensor(rng, s, 0, 1/math.Sqrt(float64(s[0])))
		default:
			w[name] = randTensor(rng, s, 0, 1)
		}
	}
	return w
}

var testGDN = GDNDims{Batch: 2, Hidden: 32, KeyHeads: 2, ValueHeads: 4, KeyDim: 8, ValueDim: 16, ConvKernel: 4, StateDType: ir.FP32, Eps: 1e-6}

func gdnBlock(t *testing.T, d GDNDims, devices int) block {
	return buildBlock(t, devices, func(c Ctx) *ir.Value {
		x := c.B.Input("x", ir.T(ir.BF16, d.Batch, 1, d.Hidden))
		w := DeclareGDN(c.B, "l.", d, c.TP)
		st := DeclareGDNState(c.B, "s", d, c.TP)
		return GDNDecode(c, x, w, st, d)
	})
}

// TestGDNDecodeMatchesEquations runs two decode steps of the GDN graph and
// of a direct implementation of the equations and compares outputs and
// both states.
func TestGDNDecodeMatchesEquations(t *testing.T) {
	bl := gdnBlock(t, testGDN, 1)
	rng := rand.New(rand.NewSource(1))
	w := gdnWhole(rng, bl)
	conv, rec := w["s.conv"].Data, w["s.recurrent"].Data
	for step := 0; step < 2; step++ {
		w["x"] = randTensor(rng, bl.byName["x"].Type.Shape, 0, 1)
		w["s.conv"] = nntest.Tensor{Shape: w["s.conv"].Shape, Data: conv}
		w["s.recurrent"] = nntest.Tensor{Shape: w["s.recurrent"].Shape, Data: rec}
		envs := bl.envs(t, w, func(string) Share { return Replicate })
		if err := nntest.Run(bl.g, envs); err != nil {
			t.Fatal(err)
		}
		y, nc, nr := gdnRef(testGDN, w, w["x"].Data, conv, rec)
		closeTo(t, "y", y, envs[0][bl.out].Data, 1e-5)
		closeTo(t, "conv state", nc, envs[0][bl.g.StateUpdates[bl.byName["s.conv"]]].Data, 1e-5)
		closeTo(t, "recurrent state", nr, envs[0][bl.g.StateUpdates[bl.byName["s.recurrent"]]].Data, 1e-5)
		conv, rec = nc, nr
	}
}

// shareByName looks a value's share up by the suffix after the block's
// weight prefix "l." or state name "s".
func shareByName(shares map[string]Share) func(string) Share {
	return func(name string) Share {
		key := strings.TrimPrefix(name, "l.")
		if strings.HasPrefix(name, "s.") {
			key = name[1:]
		}
		if s, ok := shares[key]; ok {
			return s
		}
		return Replicate
	}
}

// tpMatches evaluates a block built for one device and for n devices on the
// same whole contents and checks that every device's output equals the
// one-device output and that every updated state is its share of the
// one-device update.
func tpMatches(t *testing.T, one, many block, w whole, shares map[string]Share) {
	t.Helper()
	e1 := one.envs(t, w, func(string) Share { return Replicate })
	if err := nntest.Run(one.g, e1); err != nil {
		t.Fatal(err)
	}
	shareOf := shareByName(shares)
	en := many.envs(t, w, shareOf)
	if err := nntest.Run(many.g, en); err != nil {
		t.Fatal(err)
	}
	n := many.g.Mesh.Devices()
	for d := 0; d < n; d++ {
		closeTo(t, "output", e1[0][one.out].Data, en[d][many.out].Data, 1e-9)
		for _, s := range many.g.States {
			upd := e1[0][one.g.StateUpdates[one.byName[s.Name]]]
			f32 := make([]float32, len(upd.Data))
			for i, v := range upd.Data {
				f32[i] = float32(v)
			}
			want, _, err := shareOf(s.Name).Cut(f32, upd.Shape, d, n)
			if err != nil {
				t.Fatal(err)
			}
			got := en[d][many.g.StateUpdates[s]].Data
			wf := make([]float64, len(want))
			for i, v := range want {
				wf[i] = float64(v)
			}
			closeTo(t, s.Name, wf, got, 1e-5)
		}
	}
}

// TestGDNTensorParallel checks the GDN split (q|k|v blocks, heads, the
// out_proj all_reduce) against one device on 2 and 4 devices.
func TestGDNTensorParallel(t *testing.T) {
	whole := testGDN
	whole.KeyHeads, whole.ValueHeads = 4, 12
	one := gdnBlock(t, whole, 1)
	w := gdnWhole(rand.New(rand.NewSource(2)), one)
	for _, n := range []int{2, 4} {
		t.Run(ir.Mesh{Rows: 1, Cols: n}.String(), func(t *testing.T) {
			d := whole
			d.KeyHeads, d.ValueHeads = d.KeyHeads/n, d.ValueHeads/n
			tpMatches(t, one, gdnBlock(t, d, n), w, GDNShares(whole, n))
		})
	}
}
