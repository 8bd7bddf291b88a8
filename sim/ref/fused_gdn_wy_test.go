package ref

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/ir/longtest"
	"github.com/tcc-dev/tcc/ir/numerics"
)

// gdnWYGraph builds the GDN prefill's WY products over [B, H, N, 32, D]
// operands of dtype f, composed as models/nn.GDNPrefill writes them
// (kb = kx * beta; A = (kb k^T) * gamma; T = tril_inverse(A); u = T (v *
// beta); wk = T (kb * eg)) or fused into one gdn_chunk_wy; withQ adds
// input q and outputs qg = q * eg and qk = (q k^T) * gamma (fused:
// gdn_chunk_prep). With expG (and withQ) input eg is the log decays g:
// composed eg = exp(g), fused gdn_chunk_prep with exp_g = 1. Outputs u,
// wk (qg, qk). With decay (and expG) input gamma is g's row form [B, H,
// N, 1, L]: composed gamma = tril(exp(g - row)), fused decay = 1. With
// rows (and decay) inputs eg and gamma are [B, H, N, L] (both g):
// composed reshaped to the column and row forms, fused rows = 1; with
// rows[1] too input beta is [B, N*L, H] tokens first: composed transposed
// and reshaped, fused beta_seq = 1.
func gdnWYGraph(t *testing.T, B, H, N, dk, dv int, f ir.DType, fused, withQ, expG, decay bool, rows ...bool) *ir.Graph {
	t.Helper()
	const L = 32
	b := ir.NewBuilder("gdn_chunk_wy")
	in := func(name string, s ...int) *ir.Value { return b.Input(name, ir.T(f, s...)) }
	kx, k, v := in("kx", B, H, N, L, dk), in("k", B, H, N, L, dk), in("v", B, H, N, L, dv)
	byRows, betaSeq := len(rows) > 0 && rows[0], len(rows) > 1 && rows[1]
	betaShape := []int{B, H, N, L, 1}
	if betaSeq {
		betaShape = []int{B, N * L, H}
	}
	beta := in("beta", betaShape...)
	var eg, gamma *ir.Value
	if byRows {
		eg, gamma = in("eg", B, H, N, L), in("g_row", B, H, N, L)
	} else if eg = in("eg", B, H, N, L, 1); decay {
		gamma = in("g_row", B, H, N, 1, L)
	} else {
		gamma = in("gamma", B, H, N, L, L)
	}
	var q *ir.Value
	if withQ {
		q = in("q", B, H, N, L, dk)
	}
	b.Region("gdn", 0)
	switch {
	case fused && betaSeq:
		b.Output(b.GDNChunkPrep(kx, k, v, beta, eg, gamma, q, ir.With("exp_g", 1), ir.With("decay", 1), ir.With("rows", 1), ir.With("beta_seq", 1))...)
	case fused && byRows:
		b.Output(b.GDNChunkPrep(kx, k, v, beta, eg, gamma, q, ir.With("exp_g", 1), ir.With("decay", 1), ir.With("rows", 1))...)
	case fused && decay:
		b.Output(b.GDNChunkPrep(kx, k, v, beta, eg, gamma, q, ir.With("exp_g", 1), ir.With("decay", 1))...)
	case fused && expG:
		b.Output(b.GDNChunkPrep(kx, k, v, beta, eg, gamma, q, ir.With("exp_g", 1))...)
	case expG:
		if betaSeq {
			beta = b.Reshape(b.Transpose(beta, 1, 2), []int{B, H, N, L, 1})
		}
		if byRows {
			eg, gamma = b.Reshape(eg, []int{B, H, N, L, 1}), b.Reshape(gamma, []int{B, H, N, 1, L})
		}
		if decay {
			gamma = b.Tril(b.Exp(b.Sub(eg, gamma)), 0)
		}
		eg = b.Exp(eg)
	}
	switch {
	case fused && expG:
	case fused && withQ:
		b.Output(b.GDNChunkPrep(kx, k, v, beta, eg, gamma, q)...)
	case fused:
		b.Output(b.GDNChunkWY(kx, k, v, beta, eg, gamma)...)
	default:
		kb := b.Mul(kx, beta)
		tr := b.TrilInverse(b.Mul(b.BMM(kb, b.Transpose(k, -1, -2)), gamma))
		outs := []*ir.Value{b.BMM(tr, b.Mul(v, beta)), b.BMM(tr, b.Mul(kb, eg))}
		if withQ {
			outs = append(outs, b.Mul(q, eg), b.Mul(b.BMM(q, b.Transpose(k, -1, -2)), gamma))
		}
		b.Output(outs...)
	}
	g, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// gdnWYData draws operands like the model's (inputs in gdnWYGraph's
// order): k rows l2-normalised and scaled by 1/sqrt(Dk) (kx = k, as the
// model's two reshapes of one norm), v N(0, 0.5), beta in (0, 1), g per
// chunk a running sum of negative log decays with eg = exp(g) and gamma =
// tril(exp(g_i - g_j)).
func gdnWYData(rng *rand.Rand, g *ir.Graph) [][]float32 {
	data := make([][]float32, len(g.Inputs))
	for i, v := range g.Inputs {
		data[i] = make([]float32, v.Type.Shape.Numel())
	}
	ks := g.Inputs[1].Type.Shape
	dk := ks[4]
	for row := range len(data[1]) / dk {
		r := data[1][row*dk : (row+1)*dk]
		var ss float64
		for j := range r {
			x := rng.NormFloat64()
			r[j] = float32(x)
			ss += x * x
		}
		for j := range r {
			r[j] = float32(float64(r[j]) / math.Sqrt(ss) / math.Sqrt(float64(dk)) * 4)
		}
	}
	copy(data[0], data[1])
	if len(data) > 6 { // q: rows like k's
		for j := range data[6] {
			data[6][j] = data[1][(j+dk)%len(data[1])] * 1.5
		}
	}
	for j := range data[2] {
		data[2][j] = float32(rng.NormFloat64() * 0.5)
	}
	const L = 32
	for c := range len(data[3]) / L {
		var gs [L]float64
		acc := 0.0
		for i := range L {
			data[3][c*L+i] = float32(rng.Float64())
			acc -= math.Abs(rng.NormFloat64()) * 0.1
			gs[i] = acc
			data[4][c*L+i] = float32(math.Exp(acc))
		}
		for i := range L {
			for j := 0; j <= i && len(data[5]) > len(data[4]); j++ { // gamma (not g's row form)
				data[5][(c*L+i)*L+j] = float32(math.Exp(gs[i] - gs[j]))
			}
		}
	}
	return data
}

// TestGDNChunkWYEqualsComposed: gdn_chunk_wy and gdn_chunk_prep equal
// the composed chains they replace bit for bit on random model-like
// operands, at storage formats (Composed or not) and in exact math, over
// 128 tokens (2,048 under TCC_LONG) and over small shapes with several
// users.
func TestGDNChunkWYEqualsComposed(t *testing.T) {
	long := 4 // 128 tokens; 2,048 (~26 CPU-s in all) under TCC_LONG
	if longtest.Enabled() {
		long = 64
	}
	cases := []struct {
		name            string
		B, H, N, dk, dv int
		withQ, expG     bool
		decay, rows     bool
		betaSeq         bool
	}{
		{"long", 1, 1, long, 64, 64, false, false, false, false, false},
		{"users2 dk32 dv64", 2, 3, 2, 32, 64, false, false, false, false, false},
		{"27b head dims", 1, 1, 2, 128, 128, false, false, false, false, false},
		{"prep users2 dk32 dv64", 2, 3, 2, 32, 64, true, false, false, false, false},
		{"prep exp_g users2 dk32 dv64", 2, 3, 2, 32, 64, true, true, false, false, false},
		{"prep decay long", 1, 1, long, 64, 64, true, true, true, false, false},
		{"prep decay users2 dk32 dv64", 2, 3, 2, 32, 64, true, true, true, false, false},
		{"prep rows users2 dk32 dv64", 2, 3, 2, 32, 64, true, true, true, true, false},
		{"prep beta_seq users2 H3", 2, 3, 2, 32, 64, true, true, true, true, true},
	}
	opts := map[string]Options{"storage": DefaultOptions(), "composed": {StorageFormats: true, Fidelity: ir.HiFi4, Composed: true}, "exact": ExactOptions()}
	for _, c := range cases {
		composed := gdnWYGraph(t, c.B, c.H, c.N, c.dk, c.dv, ir.FP32, false, c.withQ, c.expG, c.decay, c.rows, c.betaSeq)
		fused := gdnWYGraph(t, c.B, c.H, c.N, c.dk, c.dv, ir.FP32, true, c.withQ, c.expG, c.decay, c.rows, c.betaSeq)
		data := gdnWYData(rand.New(rand.NewPCG(5, uint64(c.N))), composed)
		if c.expG { // input eg is g
			for i, e := range data[4] {
				data[4][i] = float32(math.Log(float64(e)))
			}
		}
		if c.decay { // input gamma is g's row form: g's values
			data[5] = append([]float32(nil), data[4]...)
		}
		for _, on := range []string{"storage", "composed", "exact"} {
			o := opts[on]
			t.Run(c.name+"/"+on, func(t *testing.T) {
				want, got := evalOutputs(t, composed, composed.Inputs, data, o), evalOutputs(t, fused, fused.Inputs, data, o)
				for r, name := range []string{"u", "wk", "qg", "qk"}[:len(want)] {
					n := 0
					for i, w := range want[r] {
						if math.Float32bits(w) != math.Float32bits(got[r][i]) {
							if n++; n <= 3 {
								t.Errorf("%s[%d] = %g, composed %g", name, i, got[r][i], w)
							}
						}
					}
					t.Logf("%s %s: PCC %.7f, %d of %d elements differ", name, composed.Outputs[r].Type.Shape, numerics.PCC(want[r], got[r]), n, len(want[r]))
					if n > 0 {
						t.Errorf("%s: %d of %d elements differ from the composed chain; want bit for bit", name, n, len(want[r]))
					}
				}
			})
		}
	}
}

// TestGDNChunkGroupEqualsRepeat: gdn_chunk_prep with q_group = 3 (q per
// key head [B, H/3, N, L, Dk]) or k_group = 3 (kx and k per key head),
// and gdn_chunk_scan with k_group = 3, equal the same op on
// repeat_interleave(x, 3, axis 1) of the grouped operands bit for bit
// (value head h reads key head h/3; the other operands have H heads).
func TestGDNChunkGroupEqualsRepeat(t *testing.T) {
	const B, H, G, N, L, D = 1, 6, 3, 1, 32, 32
	cases := []struct {
		name    string
		grouped []string // the operands given per key head
		scan    bool
	}{
		{"prep_q_group", []string{"q"}, false},
		{"prep_k_group", []string{"kx", "k"}, false},
		{"scan_k_group", []string{"k"}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			build := func(grouped bool) *ir.Graph {
				b := ir.NewBuilder("gdn_chunk_group")
				in := func(name string, s ...int) *ir.Value {
					if slices.Contains(c.grouped, name) {
						s[1] /= G
						v := b.Input(name, ir.T(ir.FP32, s...))
						if grouped {
							return v
						}
						return b.RepeatInterleave(v, G, 1)
					}
					return b.Input(name, ir.T(ir.FP32, s...))
				}
				var rs []*ir.Value
				attrs := []ir.Option{}
				if grouped && slices.Contains(c.grouped, "q") {
					attrs = append(attrs, ir.With("q_group", G))
				}
				if grouped && slices.Contains(c.grouped, "k") {
					attrs = append(attrs, ir.With("k_group", G))
				}
				if c.scan {
					u, wk, qg := in("u", B, H, N, L, D), in("wk", B, H, N, L, D), in("qg", B, H, N, L, D)
					qk, k, g, st := in("qk", B, H, N, L, L), in("k", B, H, N, L, D), in("g", B, H, N, L), in("state", B, H, 1, D, D)
					rs = b.GDNChunkScan(u, wk, qg, qk, k, g, st, 0, N, attrs...)
				} else {
					kx, k, v := in("kx", B, H, N, L, D), in("k", B, H, N, L, D), in("v", B, H, N, L, D)
					beta, g := in("beta", B, N*L, H), in("g", B, H, N, L)
					q := in("q", B, H, N, L, D)
					rs = b.GDNChunkPrep(kx, k, v, beta, g, g, q, append(attrs, ir.With("exp_g", 1), ir.With("decay", 1), ir.With("rows", 1), ir.With("beta_seq", 1))...)
				}
				b.Output(rs...)
				gr, err := b.Finish()
				if err != nil {
					t.Fatal(err)
				}
				return gr
			}
			grouped, repeated := build(true), build(false)
			rng := rand.New(rand.NewPCG(7, 3))
			data := make([][]float32, len(grouped.Inputs))
			for i, v := range grouped.Inputs {
				data[i] = make([]float32, v.Type.Shape.Numel())
				for j := range data[i] {
					switch v.Name {
					case "beta":
						data[i][j] = float32(rng.Float64())
					case "g":
						data[i][j] = float32(-0.05 * float64(j%L) * rng.Float64())
					default:
						data[i][j] = float32(rng.NormFloat64() * 0.2)
					}
				}
			}
			want := evalOutputs(t, repeated, repeated.Inputs, data, DefaultOptions())
			got := evalOutputs(t, grouped, grouped.Inputs, data, DefaultOptions())
			for r := range want {
				n := 0
				for i, w := range want[r] {
					if math.Float32bits(w) != math.Float32bits(got[r][i]) {
						n++
					}
				}
				if n > 0 {
					t.Errorf("result %d: %d of %d elements differ from the op on the repeated operands; want bit for bit", r, n, len(want[r]))
				}
			}
		})
	}
}
