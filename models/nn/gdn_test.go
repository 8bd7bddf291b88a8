package nn

import (
	"fmt"
	"math"
	"math/rand"
	"strings"
	"testing"

	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/sim/ref"
)

// gdnOut is the float64 Gated DeltaNet mixer over S tokens per user.
type gdnOut struct {
	conv      []float64 // [B, S, C]: silu(causal conv) of the in-projected q|k|v
	o         []float64 // [B, S, Hv, Dv]: S^T q, before the output norm
	y         []float64 // [B, S, hidden]: the mixer output
	convState []float64 // [B, K-1, C]: the last K-1 in-projected inputs
	rec       []float64 // [B, Hv, Dk, Dv]: S after the last token
}

// gdnRef runs the Gated DeltaNet equations of reference/qwen27b.md token by
// token (the recurrent form, never the chunked one) over x [B, S, hidden],
// starting from the states w["s.conv"] and w["s.recurrent"]. Weights are
// w["l.linear_attn.*"] in the IR layout ([in, out] projections, conv taps
// [K, C] with tap K-1 on the newest input). Per token and value head h
// (key head h/G):
//
//	qkv   = conv_silu(x @ W_qkv)
//	q, k  = l2norm(q) * Dk^-0.5, l2norm(k)
//	beta  = sigmoid(x @ W_b);  g = -exp(A_log) * softplus(x @ W_a + dt_bias)
//	S     = S * exp(g);  delta = (v - S^T k) * beta;  S = S + k ⊗ delta
//	o     = S^T q
//	y     = (rmsnorm(o) * norm.weight * silu(x @ W_z)) @ W_out
func gdnRef(d GDNDims, w map[string][]float64, x []float64, S int) gdnOut {
	B, H, Hk, Hv, Dk, Dv, K := d.Batch, d.Hidden, d.KeyHeads, d.ValueHeads, d.KeyDim, d.ValueDim, d.ConvKernel
	C, kw, vw := d.Channels(), d.KeyWidth(), d.ValueWidth()
	G := Hv / Hk
	wt := func(name string) []float64 { return w["l.linear_attn."+name] }
	taps, aLog, dtBias, normW := wt("conv1d.weight"), wt("A_log"), wt("dt_bias"), wt("norm.weight")
	out := gdnOut{
		conv:      make([]float64, B*S*C),
		o:         make([]float64, B*S*Hv*Dv),
		y:         make([]float64, B*S*H),
		convState: make([]float64, B*(K-1)*C),
		rec:       append([]float64(nil), w["s.recurrent"]...),
	}
	for b := 0; b < B; b++ {
		// The conv window: the K-1 kept inputs, then one row per new token.
		var win [][]float64
		for j := 0; j < K-1; j++ {
			win = append(win, w["s.conv"][(b*(K-1)+j)*C:(b*(K-1)+j+1)*C])
		}
		for s := 0; s < S; s++ {
			xs := x[(b*S+s)*H : (b*S+s+1)*H]
			win = append(win, vecMat(xs, wt("in_proj_qkv.weight"), C))
			z := vecMat(xs, wt("in_proj_z.weight"), vw)
			a := vecMat(xs, wt("in_proj_a.weight"), Hv)
			bb := vecMat(xs, wt("in_proj_b.weight"), Hv)
			cv := out.conv[(b*S+s)*C : (b*S+s+1)*C]
			for c := 0; c < C; c++ {
				acc := 0.0
				for j := 0; j < K; j++ {
					acc += taps[j*C+c] * win[s+j][c]
				}
				cv[c] = silu(acc)
			}
			gated := make([]float64, vw)
			for h := 0; h < Hv; h++ {
				kh := h / G
				q := l2Row(cv[kh*Dk:(kh+1)*Dk], d.Eps)
				for i := range q {
					q[i] /= math.Sqrt(float64(Dk))
				}
				k := l2Row(cv[kw+kh*Dk:kw+(kh+1)*Dk], d.Eps)
				v := cv[2*kw+h*Dv : 2*kw+(h+1)*Dv]
				beta := sigmoid(bb[h])
				g := -math.Exp(aLog[h]) * softplus(a[h]+dtBias[h])
				St := out.rec[(b*Hv+h)*Dk*Dv : (b*Hv+h+1)*Dk*Dv] // St[i*Dv+j] = S[k=i, v=j]
				for i := range St {
					St[i] *= math.Exp(g)
				}
				for j := 0; j < Dv; j++ {
					mem := 0.0 // (S^T k)[j]
					for i := 0; i < Dk; i++ {
						mem += St[i*Dv+j] * k[i]
					}
					delta := (v[j] - mem) * beta
					for i := 0; i < Dk; i++ {
						St[i*Dv+j] += k[i] * delta
					}
				}
				oh := out.o[((b*S+s)*Hv+h)*Dv : ((b*S+s)*Hv+h+1)*Dv]
				for j := 0; j < Dv; j++ {
					for i := 0; i < Dk; i++ {
						oh[j] += St[i*Dv+j] * q[i]
					}
				}
				n := rmsRow(oh, d.Eps)
				for j := range n {
					gated[h*Dv+j] = n[j] * normW[j] * silu(z[h*Dv+j])
				}
			}
			copy(out.y[(b*S+s)*H:], vecMat(gated, wt("out_proj.weight"), H))
		}
		for j := 0; j < K-1; j++ {
			copy(out.convState[(b*(K-1)+j)*C:], win[S+j])
		}
	}
	return out
}

// gdnWhole draws contents for every value of a GDN block. A_log is drawn
// around -1 (per-token decays exp(g) mostly between 0.5 and 0.98) so that
// the state carried across steps and chunks weighs in the outputs.
func gdnWhole(rng *rand.Rand, bl block) whole {
	w := whole{}
	for _, name := range bl.names() {
		v := bl.byName[name]
		s := v.Type.Shape
		switch {
		case strings.HasSuffix(name, "A_log"):
			w[name] = randTensor(rng, s, -1, 0.7)
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

func gdnPrefillBlock(t *testing.T, d GDNDims, seq int) block {
	return buildBlock(t, 1, func(c Ctx) *ir.Value {
		x := c.B.Input("x", ir.T(ir.BF16, d.Batch, seq, d.Hidden))
		return GDNPrefill(c, x, DeclareGDN(c.B, "l.", d, c.TP), DeclareGDNState(c.B, "s", d, c.TP), d)
	})
}

// compareGDN compares one evaluation of a GDN block with the equations:
// the conv output (the last SiLU of the "conv" part), the recurrence output
// (the operand of the output norm), the mixer output and both states.
func compareGDN(t *testing.T, m mode, bl block, res map[*ir.Value]ref.Tensor, want gdnOut) {
	t.Helper()
	var conv *ir.Value // the part's last SiLU (the prefill's state update may follow it)
	for _, op := range bl.partOps(t, "conv") {
		if op.Kind == ir.OpSiLU {
			conv = op.Result()
		}
	}
	if conv == nil {
		t.Fatal("the conv part has no silu")
	}
	m.compare(t, "conv output", want.conv, res[conv].Data)
	var o *ir.Value
	for _, op := range bl.partOps(t, "norm_gate") {
		if op.Kind == ir.OpRMSNorm {
			o = op.Operands[0]
			break
		}
	}
	m.compare(t, "recurrence output", want.o, res[o].Data)
	m.compare(t, "y", want.y, res[bl.out].Data)
	m.compare(t, "conv state", want.convState, bl.update(res, "s.conv").Data)
	m.compare(t, "recurrent state", want.rec, bl.update(res, "s.recurrent").Data)
}

// TestGDNDecodeMatchesEquations runs three decode steps of the GDN graph,
// feeding its state updates back, against the recurrence in float64
// carrying its own states, in both reference modes.
func TestGDNDecodeMatchesEquations(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			bl := gdnBlock(t, testGDN, 1)
			rng := rand.New(rand.NewSource(1))
			w := gdnWhole(rng, bl)
			var conv, rec []float64 // the float64 chain's states
			for step := 0; step < 3; step++ {
				w["x"] = randTensor(rng, bl.byName["x"].Type.Shape, 0, 1)
				res := bl.eval1(t, w, m.opts)
				in := bl.stored(res)
				if step > 0 {
					in["s.conv"], in["s.recurrent"] = conv, rec
				}
				want := gdnRef(testGDN, in, in["x"], 1)
				t.Run(fmt.Sprint("step", step), func(t *testing.T) { compareGDN(t, m, bl, res, want) })
				conv, rec = want.convState, want.rec
				w["s.conv"], w["s.recurrent"] = bl.update(res, "s.conv"), bl.update(res, "s.recurrent")
			}
		})
	}
}

// TestGDNPrefillMatchesEquations checks the chunked WY form of the delta
// rule and the conv over a sequence against the token-by-token recurrence:
// one partial chunk, whole chunks, several chunks with zero padding, and
// the default chunk length with padding.
func TestGDNPrefillMatchesEquations(t *testing.T) {
	for _, tc := range []struct{ seq, chunk int }{{3, 0}, {8, 4}, {10, 4}, {70, 0}} {
		for _, m := range modes {
			t.Run(fmt.Sprintf("seq%d_chunk%d/%s", tc.seq, tc.chunk, m.name), func(t *testing.T) {
				d := testGDN
				d.Chunk = tc.chunk
				bl := gdnPrefillBlock(t, d, tc.seq)
				w := gdnWhole(rand.New(rand.NewSource(int64(tc.seq))), bl)
				res := bl.eval1(t, w, m.opts)
				in := bl.stored(res)
				compareGDN(t, m, bl, res, gdnRef(d, in, in["x"], tc.seq))
			})
		}
	}
}

// TestGDNTensorParallel checks the GDN split (q|k|v blocks, heads, the
// out_proj all_reduce) on 2 and 4 devices against one device.
func TestGDNTensorParallel(t *testing.T) {
	whole := testGDN
	whole.KeyHeads, whole.ValueHeads = 4, 12
	one := gdnBlock(t, whole, 1)
	w := gdnWhole(rand.New(rand.NewSource(2)), one)
	for _, n := range []int{2, 4} {
		for _, m := range modes {
			t.Run(fmt.Sprintf("%s/%s", ir.Mesh{Rows: 1, Cols: n}, m.name), func(t *testing.T) {
				d := whole
				d.KeyHeads, d.ValueHeads = d.KeyHeads/n, d.ValueHeads/n
				tpMatches(t, m, one, gdnBlock(t, d, n), w, GDNShares(whole, n))
			})
		}
	}
}
