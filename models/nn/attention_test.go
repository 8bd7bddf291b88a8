package nn

import (
	"fmt"
	"math"
	"math/rand"
	"strings"
	"testing"

	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/ir/numerics"
	"github.com/tcc-dev/tcc/sim/ref"
)

const testTheta = 1e4

// ropeAngle is the rotate-half RoPE angle of column i (of r rotary
// columns) at position pos: pos * theta^(-2*(i mod r/2)/r).
func ropeAngle(pos, i, r int) float64 {
	return float64(pos) * math.Pow(testTheta, -2*float64(i%(r/2))/float64(r))
}

// ropeRows returns rows cos or sin of the angles for positions pos..pos+n-1
// ([n, r] row-major; each row repeated reps times in a row).
func ropeRows(f func(float64) float64, pos, n, reps, r int) []float32 {
	var out []float32
	for p := pos; p < pos+n; p++ {
		for range reps {
			for i := 0; i < r; i++ {
				out = append(out, float32(f(ropeAngle(p, i, r))))
			}
		}
	}
	return out
}

// ropeRef returns cos and sin of the angle of column i at position p as
// the graph receives them: float32 tables, rounded to bf16 when the
// reference stores values in their formats (the tables are bf16 inputs).
func ropeRef(m mode) func(p, i, r int) (float64, float64) {
	return func(p, i, r int) (float64, float64) {
		c, s := float32(math.Cos(ropeAngle(p, i, r))), float32(math.Sin(ropeAngle(p, i, r)))
		if m.opts.StorageFormats {
			c, s = numerics.RoundBF16(c), numerics.RoundBF16(s)
		}
		return float64(c), float64(s)
	}
}

// attnRef is gated attention from the HF equations for S new tokens per
// user at positions pos..pos+S-1 (x [B, S, hidden]), with the caches
// w["s.k_cache"], w["s.v_cache"] [B, kv heads, L, D] holding earlier
// positions. Per token and q head h (kv head h/(Hq/Hkv)):
//
//	[q, gate] = x @ W_q (per head D query then D gate columns)
//	q = rope(rmsnorm(q) * (1 + q_norm)), k = rope(rmsnorm(x @ W_k) * (1 + k_norm)), v = x @ W_v
//	o = softmax_{t <= p}(q . k_t / sqrt(D)) v * sigmoid(gate)
//	y = concat_h(o) @ W_o
//
// with rope rotate-half on the first RotaryDim dims. It returns y and the
// caches with the new keys and values written.
func attnRef(d AttnDims, w map[string][]float64, x []float64, pos, S int, rope func(p, i, r int) (float64, float64)) (y, kc, vc []float64) {
	B, H, Hq, Hkv, D, R, L := d.Batch, d.Hidden, d.Heads, d.KVHeads, d.HeadDim, d.RotaryDim, d.MaxSeq
	wt := func(name string) []float64 { return w["l.self_attn."+name] }
	kc, vc = append([]float64(nil), w["s.k_cache"]...), append([]float64(nil), w["s.v_cache"]...)
	y = make([]float64, B*S*H)
	norm := func(v []float64, name string) []float64 {
		o := rmsRow(v, d.Eps)
		for i := range o {
			o[i] *= 1 + wt(name)[i]
		}
		return o
	}
	applyRope := func(v []float64, p int) {
		rot := make([]float64, R)
		for i := 0; i < R; i++ {
			if i < R/2 {
				rot[i] = -v[i+R/2]
			} else {
				rot[i] = v[i-R/2]
			}
		}
		for i := 0; i < R; i++ {
			c, s := rope(p, i, R)
			v[i] = v[i]*c + rot[i]*s
		}
	}
	row := func(c []float64, b, j, t int) []float64 { return c[((b*Hkv+j)*L+t)*D : ((b*Hkv+j)*L+t+1)*D] }
	for b := 0; b < B; b++ {
		for s := 0; s < S; s++ {
			p := pos + s
			xs := x[(b*S+s)*H : (b*S+s+1)*H]
			qg := vecMat(xs, wt("q_proj.weight"), Hq*2*D)
			k := vecMat(xs, wt("k_proj.weight"), Hkv*D)
			v := vecMat(xs, wt("v_proj.weight"), Hkv*D)
			for j := 0; j < Hkv; j++ {
				kj := norm(k[j*D:(j+1)*D], "k_norm.weight")
				applyRope(kj, p)
				copy(row(kc, b, j, p), kj)
				copy(row(vc, b, j, p), v[j*D:(j+1)*D])
			}
			o := make([]float64, Hq*D)
			for h := 0; h < Hq; h++ {
				q := norm(qg[h*2*D:h*2*D+D], "q_norm.weight")
				applyRope(q, p)
				j := h / (Hq / Hkv)
				score := make([]float64, p+1)
				best := math.Inf(-1)
				for t := range score {
					dot := 0.0
					for i, kv := range row(kc, b, j, t) {
						dot += q[i] * kv
					}
					score[t] = dot / math.Sqrt(float64(D))
					best = math.Max(best, score[t])
				}
				z := 0.0
				for t := range score {
					score[t] = math.Exp(score[t] - best)
					z += score[t]
				}
				for i := 0; i < D; i++ {
					acc := 0.0
					for t, pt := range score {
						acc += pt / z * row(vc, b, j, t)[i]
					}
					o[h*D+i] = acc * sigmoid(qg[h*2*D+D+i])
				}
			}
			copy(y[(b*S+s)*H:], vecMat(o, wt("o_proj.weight"), H))
		}
	}
	return y, kc, vc
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

func attnPrefillBlock(t *testing.T, d AttnDims, seq int) block {
	return buildBlock(t, 1, func(c Ctx) *ir.Value {
		x := c.B.Input("x", ir.T(ir.BF16, d.Batch, seq, d.Hidden))
		return GatedAttentionPrefill(c, x, DeclareAttention(c.B, "l.", d, c.TP), DeclareKVCache(c.B, "s", d, c.TP), DeclareRopePrefill(c.B, seq, d.RotaryDim), d)
	})
}

// attnWhole draws contents for every value of an attention block (decode
// when seq is 0, else prefill of seq tokens) at position pos.
func attnWhole(rng *rand.Rand, bl block, d AttnDims, pos, seq int) whole {
	w := whole{}
	for _, name := range bl.names() {
		v := bl.byName[name]
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
	// pos is the graph's: [1] in prefill, a word per user in decode
	// ([B], every user at pos).
	ps := bl.byName["pos"].Type.Shape
	pw := make([]float32, ps.Numel())
	for i := range pw {
		pw[i] = float32(pos)
	}
	w["pos"] = ref.Tensor{Shape: ps, Data: pw}
	n, reps := 1, d.Batch // decode: [B, R], every user at pos
	if seq > 0 {
		n, reps = seq, 1 // prefill: [S, 1, R]
	}
	w["rope.cos"] = ref.Tensor{Shape: bl.byName["rope.cos"].Type.Shape, Data: ropeRows(math.Cos, pos, n, reps, d.RotaryDim)}
	w["rope.sin"] = ref.Tensor{Shape: bl.byName["rope.sin"].Type.Shape, Data: ropeRows(math.Sin, pos, n, reps, d.RotaryDim)}
	return w
}

// cachePositions returns positions [from, to) of a [B, H, L, D] cache and
// the other positions, each as [B, H, n, D] row-major.
func cachePositions(c []float64, d AttnDims, from, to int) (in, out []float64) {
	L, D := d.MaxSeq, d.HeadDim
	for bh := 0; bh < len(c)/(L*D); bh++ {
		for t := 0; t < L; t++ {
			r := c[(bh*L+t)*D : (bh*L+t+1)*D]
			if t >= from && t < to {
				in = append(in, r...)
			} else {
				out = append(out, r...)
			}
		}
	}
	return in, out
}

// compareAttention compares an evaluation of an attention block writing
// positions [pos, pos+seq) with the equations: the output, the new cache
// rows, and (exactly) the cache rows that must stay as they were.
func compareAttention(t *testing.T, m mode, bl block, res map[*ir.Value]ref.Tensor, d AttnDims, pos, seq int) {
	t.Helper()
	in := bl.stored(res)
	y, kc, vc := attnRef(d, in, in["x"], pos, seq, ropeRef(m))
	m.compare(t, "y", y, res[bl.out].Data)
	for _, c := range []struct {
		name string
		want []float64
	}{{"s.k_cache", kc}, {"s.v_cache", vc}} {
		wantNew, wantOld := cachePositions(c.want, d, pos, pos+seq)
		gotNew, gotOld := cachePositions(f64(bl.update(res, c.name).Data), d, pos, pos+seq)
		m.compare(t, c.name+" new rows", wantNew, f32(gotNew))
		for i := range wantOld {
			if wantOld[i] != gotOld[i] {
				t.Fatalf("%s: untouched position value %d changed from %v to %v", c.name, i, wantOld[i], gotOld[i])
			}
		}
	}
}

func TestAttentionDecodeMatchesEquations(t *testing.T) {
	for _, pos := range []int{0, 3, 7} {
		for _, m := range modes {
			t.Run(fmt.Sprintf("pos%d/%s", pos, m.name), func(t *testing.T) {
				bl := attnBlock(t, testAttn, 1)
				w := attnWhole(rand.New(rand.NewSource(int64(pos))), bl, testAttn, pos, 0)
				compareAttention(t, m, bl, bl.eval1(t, w, m.opts), testAttn, pos, 1)
			})
		}
	}
}

// TestAttentionPrefillMatchesEquations prefills S tokens after pos cached
// ones: causal attention over the cache and the new tokens.
func TestAttentionPrefillMatchesEquations(t *testing.T) {
	for _, tc := range []struct{ seq, pos int }{{4, 3}, {8, 0}, {1, 5}} {
		for _, m := range modes {
			t.Run(fmt.Sprintf("seq%d_pos%d/%s", tc.seq, tc.pos, m.name), func(t *testing.T) {
				bl := attnPrefillBlock(t, testAttn, tc.seq)
				w := attnWhole(rand.New(rand.NewSource(int64(11+tc.pos))), bl, testAttn, tc.pos, tc.seq)
				compareAttention(t, m, bl, bl.eval1(t, w, m.opts), testAttn, tc.pos, tc.seq)
			})
		}
	}
}

// TestAttentionTensorParallel covers kv heads split (2 devices) and
// replicated (4 devices, two per kv head).
func TestAttentionTensorParallel(t *testing.T) {
	one := attnBlock(t, testAttn, 1)
	w := attnWhole(rand.New(rand.NewSource(9)), one, testAttn, 5, 0)
	for _, n := range []int{2, 4} {
		for _, m := range modes {
			t.Run(fmt.Sprintf("%s/%s", ir.Mesh{Rows: 1, Cols: n}, m.name), func(t *testing.T) {
				d := testAttn
				d.Heads /= n
				d.KVHeads = max(1, d.KVHeads/n)
				tpMatches(t, m, one, attnBlock(t, d, n), w, AttentionShares(testAttn, n))
			})
		}
	}
}
