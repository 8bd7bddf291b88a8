package passes

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/ir/longtest"
	"github.com/tcc-dev/tcc/ir/numerics"
	"github.com/tcc-dev/tcc/models/config"
	"github.com/tcc-dev/tcc/models/qwen27b"
	"github.com/tcc-dev/tcc/passes/rewrite"
	"github.com/tcc-dev/tcc/sim/ref"
)

const gdnSmallConfig = "../models/qwen27b/testdata/small.json"

// gdnDecodeGraph builds the decode graph of the small config (small) or
// the 27B on a 1xdevices mesh with batch users.
func gdnDecodeGraph(t *testing.T, small bool, devices, batch int) (*ir.Graph, *qwen27b.Counts) {
	t.Helper()
	o := qwen27b.DefaultOptions()
	o.Batch = batch
	if small {
		c, err := config.Load(gdnSmallConfig)
		if err != nil {
			t.Fatal(err)
		}
		o.Config = c
	}
	g, counts, err := qwen27b.BuildGraph(o, ir.Mesh{Rows: 1, Cols: devices})
	if err != nil {
		t.Fatal(err)
	}
	return g, counts
}

// gdnRegions returns the graph's GDN layer regions in order.
func gdnRegions(g *ir.Graph) []*ir.Region {
	var rs []*ir.Region
	for _, r := range g.Regions {
		if r.Kind == "gdn" {
			rs = append(rs, r)
		}
	}
	return rs
}

// TestGDNRulesFireOnEveryLayer runs the pipeline with the gdn family (and
// then with every family, stopping after fuse-blocks) on the decode graph
// and checks that both rules fire once on every GDN layer and that each
// mixer is left with 4 in-projection matmuls, gdn_conv_gates,
// gdn_recurrence, the out-projection and (on more than one device) the
// all_reduce.
func TestGDNRulesFireOnEveryLayer(t *testing.T) {
	cases := []struct {
		small          bool
		devices, batch int
		before         int // mixer ops per GDN layer before fusion
	}{
		{true, 1, 1, 62}, {true, 2, 1, 63}, {true, 4, 1, 63}, {true, 2, 3, 63},
		{false, 1, 1, 62}, {false, 2, 1, 63}, {false, 4, 1, 63},
	}
	for _, c := range cases {
		for _, all := range []bool{false, true} {
			name := fmt.Sprintf("27B/1x%d/batch%d", c.devices, c.batch)
			if c.small {
				name = fmt.Sprintf("small/1x%d/batch%d", c.devices, c.batch)
			}
			// pack-rows off: the counts are of the fused ops, without the
			// reshapes it adds at B > 1.
			opts := Options{Rules: FamilyRules("gdn"), Disable: []string{"pack-rows"}}
			if all {
				name += "/all-block-rules"
				opts = Options{Disable: []string{"fuse-layout", "fuse", "pack-rows"}}
			}
			t.Run(name, func(t *testing.T) {
				g, counts := gdnDecodeGraph(t, c.small, c.devices, c.batch)
				before := map[*ir.Region]int{}
				for _, r := range g.Regions {
					before[r] = len(r.Ops)
				}
				res, err := Run(g, opts)
				if err != nil {
					t.Fatal(err)
				}
				want := 7
				if c.devices > 1 {
					want = 8
				}
				layers := 0
				for i, l := range counts.Layers {
					if l.Kind != config.GDN {
						continue
					}
					layers++
					var r *ir.Region
					for _, rr := range g.Regions {
						if rr.Kind == "gdn" && rr.Index == i {
							r = rr
						}
					}
					if l.Mixer != c.before {
						t.Errorf("layer %d: %d mixer ops before fusion, want %d", i, l.Mixer, c.before)
					}
					if !all {
						if got := l.Mixer - (before[r] - len(r.Ops)); got != want {
							t.Errorf("layer %d: %d mixer ops after fusion, want %d", i, got, want)
						}
					}
					kinds := map[string]int{}
					for _, op := range r.Ops {
						kinds[op.Name()]++
					}
					for _, k := range []string{"concat", "slice", "sum", "repeat_interleave", "typecast", "bmm", "rms_norm_plain", "softplus", "sigmoid", "exp", "sub"} {
						if kinds[k] != 0 {
							t.Errorf("layer %d: %d %s ops left after fusion", i, kinds[k], k)
						}
					}
					if kinds["gdn_conv_gates"] != 1 || kinds["gdn_recurrence"] != 1 {
						t.Errorf("layer %d: %d gdn_conv_gates and %d gdn_recurrence, want one each", i, kinds["gdn_conv_gates"], kinds["gdn_recurrence"])
					}
					for _, rule := range []string{"FuseGDNConvGates", "FuseGDNRecurrence"} {
						if n := res.Rewrites.ByLayer(rule)[i]; n != 1 {
							t.Errorf("layer %d: %s fired %d times, want 1", i, rule, n)
						}
					}
				}
				if layers == 0 || layers != len(gdnRegions(g)) {
					t.Fatalf("%d GDN layers counted, %d GDN regions", layers, len(gdnRegions(g)))
				}
			})
		}
	}
}

// gdnAgreement is PCC and the largest absolute difference relative to the
// largest magnitude of want.
func gdnAgreement(want, got []float32) (pcc, rel float64) {
	var scale, worst float64
	for i := range want {
		scale = max(scale, math.Abs(float64(want[i])))
		worst = max(worst, math.Abs(float64(got[i]-want[i])))
	}
	if scale > 0 {
		rel = worst / scale
	}
	return numerics.PCC(want, got), rel
}

// gdnRandom fills a tensor of shape s with seeded normal values times sd.
func gdnRandom(rng *rand.Rand, s ir.Shape, sd float64) ref.Tensor {
	t := ref.NewTensor(s)
	for i := range t.Data {
		t.Data[i] = float32(rng.NormFloat64() * sd)
	}
	return t
}

// TestGDNFusedOpsEquivalent checks every fused GDN op of the first GDN
// layer (small config and 27B, on 1x1, 1x2 and 1x4, batch 1 and 3) against
// its decomposition on the same seeded random inputs, at the device's
// storage formats (ref.DefaultOptions with Composed: the decomposition's
// rounding points, not the recurrence program's FPU reads) and in exact math
// (ref.ExactOptions). On one device rewrite.EquivalencePair gives the two
// standalone graphs and ref.Eval runs both; on a mesh the decomposition's
// values carry the head-folding distributions the model recorded, which
// EquivalencePair's re-inference cannot rebuild, so ref.EvalOp and
// ref.EvalDecompositionWith are compared instead. The fused ops reproduce
// the composed chain's rounding points and evaluation order, so the
// results must agree to PCC >= 0.9999 and in fact be bit-identical; the
// figures are logged.
func TestGDNFusedOpsEquivalent(t *testing.T) {
	cases := []struct {
		small          bool
		devices, batch int
	}{{true, 1, 1}, {true, 1, 3}, {true, 2, 1}, {true, 4, 2}, {false, 1, 1}, {false, 2, 1}}
	for _, c := range cases {
		if !c.small && c.devices == 1 && !longtest.Enabled() {
			continue // the 27B's 48 heads on one device (~1 CPU-s): its 1x2 shard runs by default; TCC_LONG=1 runs it
		}
		g, _ := gdnDecodeGraph(t, c.small, c.devices, c.batch)
		if _, err := Run(g, Options{Rules: FamilyRules("gdn")}); err != nil {
			t.Fatal(err)
		}
		size := "27B"
		if c.small {
			size = "small"
		}
		for _, op := range gdnRegions(g)[0].Ops {
			if !op.Info().Fused {
				continue
			}
			for _, mode := range []string{"storage", "exact"} {
				opts := ref.DefaultOptions()
				opts.Composed = true // the decomposition's rounding points, not the program's FPU reads
				if mode == "exact" {
					opts = ref.ExactOptions()
				}
				name := fmt.Sprintf("%s/1x%d/batch%d/%s/%s", size, c.devices, c.batch, op.Rule, mode)
				t.Run(name, func(t *testing.T) { checkGDNEquivalent(t, op, c.devices == 1, opts) })
			}
		}
	}
}

// gdnInputs returns seeded random operands for op: normal values, the
// recurrent state ([B,H,Dk,Dv]) scaled by 0.1.
func gdnInputs(op *ir.Op) []ref.Tensor {
	rng := rand.New(rand.NewPCG(7, uint64(op.Kind)))
	var args []ref.Tensor
	for _, v := range op.Operands {
		sd := 1.0
		if v.Type.Shape.Rank() == 4 {
			sd = 0.1
		}
		args = append(args, gdnRandom(rng, v.Type.Shape, sd))
	}
	return args
}

func checkGDNEquivalent(t *testing.T, op *ir.Op, pair bool, opts ref.Options) {
	args := gdnInputs(op)
	var want, got []ref.Tensor
	if pair {
		fused, dec, err := rewrite.EquivalencePair(op)
		if err != nil {
			t.Fatal(err)
		}
		fenv, denv := map[*ir.Value]ref.Tensor{}, map[*ir.Value]ref.Tensor{}
		for i, v := range fused.Inputs {
			fenv[v], denv[dec.Inputs[i]] = args[i], args[i]
		}
		fv, err := ref.Eval(fused, fenv, opts)
		if err != nil {
			t.Fatal(err)
		}
		dv, err := ref.Eval(dec, denv, opts)
		if err != nil {
			t.Fatal(err)
		}
		for k := range fused.Outputs {
			want, got = append(want, dv[dec.Outputs[k]]), append(got, fv[fused.Outputs[k]])
		}
	} else {
		var err error
		if got, err = ref.EvalOp(op, args, opts); err != nil {
			t.Fatal(err)
		}
		if want, err = ref.EvalDecompositionWith(op, args, opts); err != nil {
			t.Fatal(err)
		}
	}
	for k := range want {
		pcc, rel := gdnAgreement(want[k].Data, got[k].Data)
		t.Logf("%s result %d %s: PCC %.7f, max rel err %.3g", op.Name(), k, want[k].Shape, pcc, rel)
		if !(pcc >= 0.9999) {
			t.Errorf("%s result %d: PCC %.7f < 0.9999 (max rel err %.3g)", op.Name(), k, pcc, rel)
		}
		if rel != 0 {
			t.Errorf("%s result %d differs from its decomposition (max rel err %.3g): the evaluator no longer mirrors the composed ops' rounding points or order", op.Name(), k, rel)
		}
	}
}

// TestGDNFusedModelMatchesUnfused evaluates the whole small decode graph
// on one device unfused and with the gdn rules applied, on the same
// seeded weights, states and tokens at the device's storage formats: the
// logits, the next tokens and every new state must agree (the fused ops
// reproduce the rounding points, so exactly).
func TestGDNFusedModelMatchesUnfused(t *testing.T) {
	unfused, _ := gdnDecodeGraph(t, true, 1, 2)
	fusedG, _ := gdnDecodeGraph(t, true, 1, 2)
	res, err := Run(fusedG, Options{Rules: FamilyRules("gdn")})
	if err != nil {
		t.Fatal(err)
	}
	if res.Rewrites.Total("FuseGDNRecurrence") == 0 || res.Rewrites.Total("FuseGDNConvGates") == 0 {
		t.Fatal("the gdn rules did not fire")
	}
	data := func(g *ir.Graph) map[*ir.Value]ref.Tensor {
		env := map[*ir.Value]ref.Tensor{}
		for _, list := range [][]*ir.Value{g.Inputs, g.Weights, g.States} {
			for _, v := range list {
				rng := rand.New(rand.NewPCG(11, uint64(len(v.Name))*1000003+uint64(v.Type.Shape.Numel())))
				switch {
				case v.Name == "tokens":
					x := ref.NewTensor(v.Type.Shape)
					for i := range x.Data {
						x.Data[i] = float32(3 + 5*i)
					}
					env[v] = x
				case v.Name == "pos":
					env[v] = ref.NewTensor(v.Type.Shape)
				default:
					env[v] = gdnRandom(rng, v.Type.Shape, 0.1)
				}
			}
		}
		return env
	}
	opts := ref.DefaultOptions()
	opts.Composed = true // the fused recurrence at its decomposition's rounding points
	uv, err := ref.Eval(unfused, data(unfused), opts)
	if err != nil {
		t.Fatal(err)
	}
	fv, err := ref.Eval(fusedG, data(fusedG), opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range unfused.Outputs {
		pcc, rel := gdnAgreement(uv[unfused.Outputs[i]].Data, fv[fusedG.Outputs[i]].Data)
		t.Logf("output %d: PCC %.7f, max rel err %.3g", i, pcc, rel)
		if rel != 0 {
			t.Errorf("output %d differs: PCC %.7f, max rel err %.3g", i, pcc, rel)
		}
	}
	byName := map[string]*ir.Value{}
	for _, s := range fusedG.States {
		byName[s.Name] = s
	}
	for _, s := range unfused.States {
		fs := byName[s.Name]
		pcc, rel := gdnAgreement(uv[unfused.StateUpdates[s]].Data, fv[fusedG.StateUpdates[fs]].Data)
		if rel != 0 {
			t.Errorf("state %s differs: PCC %.7f, max rel err %.3g", s.Name, pcc, rel)
		}
	}
}

// gdnPrefillGraph builds the small config's prefill graph of seq tokens
// per user on a 1xdevices mesh (--max-seq 128, or seq when longer).
func gdnPrefillGraph(t *testing.T, devices, seq int) *ir.Graph {
	t.Helper()
	c, err := config.Load(gdnSmallConfig)
	if err != nil {
		t.Fatal(err)
	}
	o := qwen27b.DefaultOptions()
	o.Config, o.Mode, o.Seq, o.MaxSeq = c, qwen27b.Prefill, seq, max(128, seq)
	g, _, err := qwen27b.BuildGraph(o, ir.Mesh{Rows: 1, Cols: devices})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestGDNChunkStepFiresOnEveryChunk runs the default pipeline on the small
// config's prefill and checks that every GDN layer's loop over its N
// chunks became N gdn_chunk_step ops (no bmm, transpose or exp left
// outside them but the chunk preparation's, its k k^T and q k^T reading
// k untransposed) and that FuseGDNChunkScan then made them and the
// concat of their outputs one gdn_chunk_scan of chunks 0..N-1 (N > 1;
// one chunk stays one step, no concat), and that each fused step or scan
// equals its decomposition bit for bit on seeded random inputs, at
// storage formats and in exact math.
func TestGDNChunkStepFiresOnEveryChunk(t *testing.T) {
	for _, c := range []struct{ devices, seq, chunks int }{{1, 64, 2}, {2, 64, 2}, {2, 70, 3}, {1, 32, 1}} {
		t.Run(fmt.Sprintf("1x%d/seq%d", c.devices, c.seq), func(t *testing.T) {
			g := gdnPrefillGraph(t, c.devices, c.seq)
			res, err := Run(g, Options{})
			if err != nil {
				t.Fatal(err)
			}
			regions := gdnRegions(g)
			if want, got := c.chunks*len(regions), res.Rewrites.Total("FuseGDNChunkStep"); got != want {
				t.Errorf("FuseGDNChunkStep fired %d times, want %d (%d chunks x %d GDN layers)", got, want, c.chunks, len(regions))
			}
			if want, got := max(c.chunks-1, 0)*len(regions), res.Rewrites.Total("FuseGDNChunkScan"); got != want {
				t.Errorf("FuseGDNChunkScan fired %d times, want %d (%d chunks x %d GDN layers)", got, want, c.chunks, len(regions))
			}
			for i, r := range regions {
				var steps []any
				bmm, transposedB, decayed, concats := 0, 0, 0, 0
				for _, op := range r.Ops {
					switch op.Kind {
					case ir.OpGDNChunkStep:
						steps = append(steps, op.Int("chunk"))
					case ir.OpGDNChunkScan:
						steps = append(steps, fmt.Sprintf("scan %d+%d", op.Int("first"), op.Int("count")))
					case ir.OpBMM, ir.OpBMMScaleB:
						bmm++
					case ir.OpBMMTransposeB:
						bmm++
						transposedB++
					case ir.OpBMMTransposeBMul:
						bmm++
						transposedB++
						decayed++
					case ir.OpGDNChunkPrep: // (beta k) k^T * Γ, T (beta v), T (beta k exp(g)), q k^T * Γ
						bmm += 4
						transposedB += 2
						decayed += 2
					case ir.OpConcat:
						concats++
					}
				}
				// None: the conv reads the state and qkv apart
				// (FuseConvDepthwiseStateChain), the scan writes the joined
				// outputs.
				if concats != 0 {
					t.Errorf("GDN layer %d: %d concats, want none", i, concats)
				}
				if transposedB != 2 || decayed != 2 {
					t.Errorf("GDN layer %d: %d bmm_transpose_b, %d of them bmm_transpose_b_mul, want k k^T and q k^T, both times the decays", i, transposedB, decayed)
				}
				want := []any{0}
				if c.chunks > 1 {
					want = []any{fmt.Sprintf("scan 0+%d", c.chunks)}
				}
				if fmt.Sprint(steps) != fmt.Sprint(want) {
					t.Errorf("GDN layer %d: chunk steps and scans %v, want %v", i, steps, want)
				}
				if bmm != 4 { // k k^T, q k^T (bmm_transpose_b), T (beta v), T (beta k exp(g))
					t.Errorf("GDN layer %d: %d bmm left, want the chunk preparation's 4", i, bmm)
				}
			}
			for _, op := range regions[0].Ops {
				if op.Kind != ir.OpGDNChunkStep && op.Kind != ir.OpGDNChunkScan {
					continue
				}
				for _, mode := range []string{"storage", "exact"} {
					opts := ref.DefaultOptions()
					if mode == "exact" {
						opts = ref.ExactOptions()
					}
					t.Run(fmt.Sprintf("%s/%s", op.Kind, mode), func(t *testing.T) { checkGDNEquivalent(t, op, c.devices == 1, opts) })
				}
			}
		})
	}
}

// TestGDNPrefillBMMFusions runs the default pipeline on the small config's
// prefill of 128 tokens (4 chunks; 2,048 tokens, 64 chunks, under
// TCC_LONG: ~12 CPU-s, the storage-format FPU multiplies) on 1x1 and of 96
// (3 chunks) on 1x2 and checks that FuseBMMTransposeBMul took both decayed products of every
// GDN layer, (beta k) k^T * Γ and q k^T * Γ (no mul of a bmm_transpose_b
// left), and FuseBMMScaleB both products of T, T (beta v) and T (beta k
// exp(g)) (no bmm of a mul left), FuseUnaryMul the norm gate silu(z) *
// o, FuseNormLayoutGate that gate with the norm of o and its head merge,
// FuseGDNChunkWY the WY products of every layer (k * beta, (beta k)
// k^T * Γ, its inverse T and both products of T) and FuseGDNChunkPrep
// those with the query side (q exp(g), q k^T * Γ), and that each fused op
// of the first layer equals its decomposition
// bit for bit on seeded random inputs over all the tokens, at storage
// formats and in exact math (the agreement is logged).
func TestGDNPrefillBMMFusions(t *testing.T) {
	long := 128
	if longtest.Enabled() {
		long = 2048
	}
	for _, c := range []struct{ devices, seq int }{{1, long}, {2, 96}} {
		devices := c.devices
		t.Run(fmt.Sprintf("1x%d/seq%d", devices, c.seq), func(t *testing.T) {
			g := gdnPrefillGraph(t, devices, c.seq)
			res, err := Run(g, Options{})
			require.NoError(t, err)
			regions := gdnRegions(g)
			require.NotEmpty(t, regions)
			for _, rule := range []struct {
				name string
				per  int
			}{{"FuseBMMTransposeBMul", 2}, {"FuseBMMScaleB", 2}, {"FuseUnaryMul", 1}, {"FuseNormLayoutGate", 1}, {"FuseGDNChunkWY", 1}, {"FuseGDNChunkPrep", 1}} {
				if want, got := rule.per*len(regions), res.Rewrites.Total(rule.name); got != want {
					t.Errorf("%s fired %d times, want %d (%d x %d GDN layers)", rule.name, got, want, rule.per, len(regions))
				}
			}
			for i, r := range regions {
				for _, op := range r.Ops {
					if op.Kind == ir.OpMul && op.Operands[0].Def != nil && op.Operands[0].Def.Kind == ir.OpBMMTransposeB {
						t.Errorf("GDN layer %d: %s still multiplies a bmm_transpose_b", i, op.Name())
					}
					if op.Kind == ir.OpBMM && op.Operands[1].Def != nil && op.Operands[1].Def.Kind == ir.OpMul {
						t.Errorf("GDN layer %d: %s still reads a mul", i, op.Name())
					}
				}
			}
			n := 0
			for _, op := range regions[0].Ops {
				if op.Kind != ir.OpBMMTransposeBMul && op.Kind != ir.OpBMMScaleB && op.Kind != ir.OpNormLayoutGate && op.Kind != ir.OpGDNChunkPrep {
					continue
				}
				n++
				if op.Kind == ir.OpNormLayoutGate {
					require.Equal(t, c.seq, op.Result().Type.Shape[1], "tokens of %s", op.Name())
				} else {
					require.Equal(t, c.seq/32, op.Result().Type.Shape[2], "chunks of %s", op.Name())
				}
				for _, mode := range []string{"storage", "exact"} {
					opts := ref.DefaultOptions()
					if mode == "exact" {
						opts = ref.ExactOptions()
					}
					t.Run(fmt.Sprintf("%s%d/%s", op.Kind, n, mode), func(t *testing.T) { checkGDNEquivalent(t, op, devices == 1, opts) })
				}
			}
			// The gated norm (FuseNormLayoutGate took the norm gate's
			// unary_mul with the norm and its head merge) and the chunk preparation (FuseGDNChunkWY took
			// (beta k) k^T * Γ and both bmm_scale_b, FuseGDNChunkPrep q k^T
			// * Γ and q exp(g)).
			require.Equal(t, 2, n, "norm_layout_gate and gdn_chunk_prep ops in the first GDN layer")
		})
	}
}
