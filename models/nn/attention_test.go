package nn

import (
	"math"
	"math/rand"
	"strings"
	"testing"

	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/models/nn/nntest"
)

const testTheta = 1e4

// ropeTable is cos or sin(pos * theta^(-2*(i mod R/2)/R)) for i < R, one row
// per user.
func ropeTable(f func(float64) float64, batch, r, pos int) nntest.Tensor {
	t := nntest.New(batch, r)
	for b := 0; b < batch; b++ {
		for i := 0; i < r; i++ {
			t.Data[b*r+i] = float64(float32(f(float64(pos) * math.Pow(testTheta, -2*float64(i%(r/2))/float64(r)))))
		}
	}
	return t
}

// attnRef is one decode step of gated attention from the HF equations on
// whole tensors: it returns y [B*hidden] and the new k and v caches.
func attnRef(d AttnDims, w whole, x, kc, vc []float64, pos int) (y, nk, nv []float64) {
	B, H, Hq, Hkv, D, R, L := d.Batch, d.Hidden, d.Heads, d.KVHeads, d.HeadDim, d.RotaryDim, d.MaxSeq
	nk, nv = append([]float64(nil), kc...), append([]float64(nil), vc...)
	y = make([]float64, B*H)
	norm := func(v []float64, wn string) []float64 {
		o := rmsRow(v, d.Eps)
		for i := range o {
			o[i] *= 1 + w[wn].Data[i]
		}
		return o
	}
	rope := func(v []float64) {
		rot := make([]float64, R)
		for i := 0; i < R; i++ {
			if i < R/2 {
				rot[i] = -v[i+R/2]
			} else {
				rot[i] = v[i-R/2]
			}
		}
		for i := 0; i < R; i++ {
			a := float64(pos) * math.Pow(testTheta, -2*float64(i%(R/2))/float64(R))
			cos, sin := float64(float32(math.Cos(a))), float64(float32(math.Sin(a))) // the inputs are float32
			v[i] = v[i]*cos + rot[i]*sin
		}
	}
	for b := 0; b < B; b++ {
		xb := x[b*H : (b+1)*H]
		qg := vecMat(xb, w["l.self_attn.q_proj.weight"].Data, Hq*2*D)
		k := vecMat(xb, w["l.self_attn.k_proj.weight"].Data, Hkv*D)
		v := vecMat(xb, w["l.self_attn.v_proj.weight"].Data, Hkv*D)
		for j := 0; j < Hkv; j++ {
			kj := norm(k[j*D:(j+1)*D], "l.self_attn.k_norm.weight")
			rope(kj)
			copy(nk[((b*Hkv+j)*L+pos)*D:], kj)
			copy(nv[((b*Hkv+j)*L+pos)*D:], v[j*D:(j+1)*D])
		}
		o := make([]float64, Hq*D)
		for h := 0; h < Hq; h++ {
			q := norm(qg[h*2*D:h*2*D+D], "l.self_attn.q_norm.weight")
			rope(q)
			j := h / (Hq / Hkv)
			p := make([]float64, pos+1)
			z := 0.0
			for t := range p {
				dot := 0.0
				for i := 0; i < D; i++ {
					dot += q[i] * nk[((b*Hkv+j)*L+t)*D+i]
				}
				p[t] = math.Exp(dot / math.Sqrt(float64(D)))
				z += p[t]
			}
			for i := 0; i < D; i++ {
				acc := 0.0
				for t := range p {
					acc += p[t] / z * nv[((b*Hkv+j)*L+t)*D+i]
				}
				o[h*D+i] = acc * sigmoid(qg[h*2*D+D+i])
			}
		}
		copy(y[b*H:], vecMat(o, w["l.self_attn.o_proj.weight"].Data, H))
	}
	return y, nk, nv
}

var testAttn = AttnDims{Batch: 2, Hidden: 32, Heads: 8, KVHeads: 2, HeadDim: 16, RotaryDim: 8, MaxSeq: 8, Eps: 1e-6}

func attnBlock(t *testing.T, d AttnDims, devices int) block {
	return buildBlock(t, devices, func(c Ctx) *ir.Value {
		x := c.B.Input("x", ir.T(ir.BF16, d.Batch, 1, d.Hidden))
		w := DeclareAttention(c.B, "l.", d, c.TP)
		kv := DeclareKVCache(c.B, "s", d, c.TP)
		rope := DeclareRope(c.B, d.Batch, d.RotaryDim)
		return GatedAttentionDecode(c, x, w, kv, rope, d)
	})
}

func attnWhole(rng *rand.Rand, bl block, d AttnDims, pos int) whole {
	w := whole{}
	for name, v := range bl.byName {
		s := v.Type.Shape
		switch {
		case strings.HasSuffix(name, "norm.weight"):
			w[name] = randTensor(rng, s, 0, 0.1)
		case v.Kind == ir.KindWeight:
			w[name] = randTensor(rng, s, 0, 1/math.Sqrt(float64(s[0])))
		default:
			w[name] = randTensor(rng, s, 0, 1)
		}
	}
	w["pos"] = nntest.Tensor{Shape: ir.Shape{1}, Data: []float64{float64(pos)}}
	w["rope.cos"] = ropeTable(math.Cos, d.Batch, d.RotaryDim, pos)
	w["rope.sin"] = ropeTable(math.Sin, d.Batch, d.RotaryDim, pos)
	return w
}

func TestAttentionDecodeMatchesEquations(t *testing.T) {
	for _, pos := range []int{0, 3, 7} {
		bl := attnBlock(t, testAttn, 1)
		w := attnWhole(rand.New(rand.NewSource(int64(pos))), bl, testAttn, pos)
		envs := bl.envs(t, w, func(string) Share { return Replicate })
		if err := nntest.Run(bl.g, envs); err != nil {
			t.Fatal(err)
		}
		y, nk, nv := attnRef(testAttn, w, w["x"].Data, w["s.k_cache"].Data, w["s.v_cache"].Data, pos)
		closeTo(t, "y", y, envs[0][bl.out].Data, 1e-9)
		closeTo(t, "k cache", nk, envs[0][bl.g.StateUpdates[bl.byName["s.k_cache"]]].Data, 1e-9)
		closeTo(t, "v cache", nv, envs[0][bl.g.StateUpdates[bl.byName["s.v_cache"]]].Data, 1e-9)
	}
}

// TestAttentionTensorParallel covers kv heads split (2 devices) and
// replicated (4 devices, two per kv head).
func TestAttentionTensorParallel(t *testing.T) {
	one := attnBlock(t, testAttn, 1)
	w := attnWhole(rand.New(rand.NewSource(9)), one, testAttn, 5)
	for _, n := range []int{2, 4} {
		t.Run(ir.Mesh{Rows: 1, Cols: n}.String(), func(t *testing.T) {
			d := testAttn
			d.Heads /= n
			d.KVHeads = max(1, d.KVHeads/n)
			tpMatches(t, one, attnBlock(t, d, n), w, AttentionShares(testAttn, n))
		})
	}
}

func mlpBlock(t *testing.T, hidden, inter, devices int) block {
	return buildBlock(t, devices, func(c Ctx) *ir.Value {
		x := c.B.Input("x", ir.T(ir.BF16, 2, 1, hidden))
		w := DeclareMLP(c.B, "l.", hidden, inter, c.TP)
		return c.TP.Gather(c.B, SwiGLU(c, x, w))
	})
}

// TestSwiGLU checks the MLP against down(silu(x gate) * (x up)) and its
// split over devices, with a reduce_scatter (hidden 64) and with the
// all_reduce fallback (hidden 48 does not split into whole tiles).
func TestSwiGLU(t *testing.T) {
	for _, hidden := range []int{64, 48} {
		one := mlpBlock(t, hidden, 128, 1)
		rng := rand.New(rand.NewSource(3))
		w := whole{}
		for name, v := range one.byName {
			w[name] = randTensor(rng, v.Type.Shape, 0, 1/math.Sqrt(float64(v.Type.Shape[0])))
		}
		envs := one.envs(t, w, func(string) Share { return Replicate })
		if err := nntest.Run(one.g, envs); err != nil {
			t.Fatal(err)
		}
		want := make([]float64, 0, 2*hidden)
		for b := 0; b < 2; b++ {
			xb := w["x"].Data[b*hidden : (b+1)*hidden]
			g := vecMat(xb, w["l.mlp.gate_proj.weight"].Data, 128)
			u := vecMat(xb, w["l.mlp.up_proj.weight"].Data, 128)
			for i := range g {
				g[i] = silu(g[i]) * u[i]
			}
			want = append(want, vecMat(g, w["l.mlp.down_proj.weight"].Data, hidden)...)
		}
		closeTo(t, "mlp", want, envs[0][one.out].Data, 1e-12)
		many := mlpBlock(t, hidden, 64, 2)
		tpMatches(t, one, many, w, MLPShares(2))
		var names []string
		for _, op := range many.g.Ops() {
			names = append(names, op.Name())
		}
		got := strings.Join(names, " ")
		wantOps := map[int]string{
			64: "to_memory matmul silu matmul mul matmul reduce_scatter all_gather",
			48: "to_memory matmul silu matmul mul matmul all_reduce",
		}[hidden]
		if got != wantOps {
			t.Errorf("hidden %d ops = %q, want %q", hidden, got, wantOps)
		}
	}
}
