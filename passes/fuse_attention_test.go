package passes

import (
	"fmt"
	mrand "math/rand"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/ir/longtest"
	"github.com/tcc-dev/tcc/ir/numerics"
	"github.com/tcc-dev/tcc/models"
	"github.com/tcc-dev/tcc/models/qwen27b"
	"github.com/tcc-dev/tcc/passes/rewrite"
	"github.com/tcc-dev/tcc/passes/rulestest"
	"github.com/tcc-dev/tcc/sim/ref"
	"golang.org/x/tools/txtar"
)

// attnSmallConfig is the small Qwen3.5-family config.
const attnSmallConfig = "../models/qwen27b/testdata/small.json"

// attnOptions returns options for the small config (small) or the
// embedded 27B config: batch 1, a 32-token cache, decode or (seq > 0) a
// prefill of seq tokens.
func attnOptions(t *testing.T, small bool, seq int) qwen27b.Options {
	t.Helper()
	a := models.Args{"config": "", "batch": "1", "max-seq": "32", "mode": "decode", "seq": "1"}
	if small {
		a["config"] = attnSmallConfig
	}
	if seq > 0 {
		a["mode"], a["seq"] = "prefill", fmt.Sprint(seq)
	}
	o, err := qwen27b.OptionsFrom(a)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// attnRun builds the decode graph of o on a 1xdevices mesh and runs the
// default pipeline with rules (nil: every registered rule).
func attnRun(t *testing.T, o qwen27b.Options, devices int, rules []*rewrite.Rule) (*ir.Graph, *qwen27b.Counts, *Result) {
	t.Helper()
	g, counts, err := qwen27b.BuildGraph(o, ir.Mesh{Rows: 1, Cols: devices})
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(g, Options{Rules: rules})
	if err != nil {
		t.Fatal(err)
	}
	return g, counts, res
}

// attnMixerKinds is the attention mixer after the attention family alone:
// the three projections, the prologue, SDPA + gate, the o-projection and,
// on more than one device, the all_reduce.
func attnMixerKinds(devices int, prefill bool) []string {
	k := []string{"matmul", "matmul", "matmul", "attn_prologue", "sdpa_decode_gated", "matmul"}
	if prefill {
		k[3], k[4] = "attn_prologue_prefill", "sdpa_prefill_gated"
	}
	if devices > 1 {
		k = append(k, "all_reduce")
	}
	return k
}

// attnCase is one model graph the attention rules must fuse.
type attnCase struct {
	small   bool
	devices int
	seq     int // 0: decode, else a prefill of seq tokens
}

func (c attnCase) String() string {
	cfg, mode := "27b", "decode"
	if c.small {
		cfg = "small"
	}
	if c.seq > 0 {
		mode = fmt.Sprintf("prefill%d", c.seq)
	}
	return fmt.Sprintf("%s/%s/1x%d", cfg, mode, c.devices)
}

// attnRuleNames are the prologue and SDPA rules of a mode.
func attnRuleNames(prefill bool) []string {
	if prefill {
		return []string{"FuseAttnProloguePrefill", "FuseSDPAPrefillGated"}
	}
	return []string{"FuseAttnPrologue", "FuseSDPADecodeGated"}
}

// TestAttentionFusesEveryLayer runs the attention family alone on the
// model (decode: small config on 1x1 and 1x2, the 27B config on 1x1, 1x2,
// 1x4 and 1x8; prefill: small config 1x1 and 1x2, 27B 1x2) and checks
// every attention layer: its prologue and SDPA rules fired once each, and
// the mixer is exactly the q/k/v projections, the prologue, SDPA + gate,
// the o-projection (and all_reduce), so the layer has (unfused mixer -
// fused mixer) fewer ops and nothing else in it changed. No other layer
// is changed.
func TestAttentionFusesEveryLayer(t *testing.T) {
	for _, tc := range []attnCase{
		{true, 1, 0}, {true, 2, 0}, {false, 1, 0}, {false, 2, 0}, {false, 4, 0}, {false, 8, 0},
		{true, 1, 6}, {true, 2, 6}, {false, 2, 32},
	} {
		t.Run(tc.String(), func(t *testing.T) {
			g, counts, res := attnRun(t, attnOptions(t, tc.small, tc.seq), tc.devices, FamilyRules("attention"))
			want := attnMixerKinds(tc.devices, tc.seq > 0)
			layers := 0
			for _, r := range g.Regions {
				if !r.IsLayer() {
					continue
				}
				lc := counts.Layers[r.Index]
				if r.Kind != "attention" {
					if len(r.Ops) != lc.Total() {
						t.Errorf("%s: %d ops, unfused %d: the attention rules changed a non-attention layer", r.Label(), len(r.Ops), lc.Total())
					}
					continue
				}
				layers++
				for _, rule := range attnRuleNames(tc.seq > 0) {
					if n := res.Rewrites.Count(rule, r); n != 1 {
						t.Errorf("%s: %s fired %d times, want 1", r.Label(), rule, n)
					}
				}
				if got, wantN := len(r.Ops), lc.Total()-lc.Mixer+len(want); got != wantN {
					t.Errorf("%s: %d ops, want %d (unfused %d with a %d-op mixer, fused mixer %d ops)", r.Label(), got, wantN, lc.Total(), lc.Mixer, len(want))
				}
				// the mixer starts at the first projection
				names := attnNames(r.Ops)
				first := slices.Index(names, "matmul")
				var mixer []string
				if first >= 0 {
					mixer = names[first:min(len(names), first+len(want))]
				}
				if diff := cmp.Diff(want, mixer); diff != "" {
					t.Errorf("%s: mixer ops (-want +got):\n%s", r.Label(), diff)
				}
				if r.Index == 3 {
					t.Logf("%s: mixer %d -> %d ops, layer %d -> %d ops", r.Label(), lc.Mixer, len(want), lc.Total(), len(r.Ops))
				}
			}
			if layers == 0 {
				t.Fatal("no attention layer")
			}
		})
	}
}

func attnNames(ops []*ir.Op) []string {
	var n []string
	for _, op := range ops {
		n = append(n, op.Name())
	}
	return n
}

// TestAttentionFiresInDefaultPipeline: with every registered family in
// its stage, each attention layer (small config decode 1x1 and 1x2 and
// prefill 1x2, 27B decode 1x2) still gets exactly one prologue and one
// SDPA + gate op, and no composed attention op (rotary, update_cache,
// fill_cache, sdpa_decode, sdpa_prefill) survives.
func TestAttentionFiresInDefaultPipeline(t *testing.T) {
	for _, tc := range []attnCase{{true, 1, 0}, {true, 2, 0}, {true, 2, 6}, {false, 2, 0}} {
		t.Run(tc.String(), func(t *testing.T) {
			g, _, res := attnRun(t, attnOptions(t, tc.small, tc.seq), tc.devices, nil)
			prologue, sdpa := ir.OpAttnPrologue, ir.OpSDPADecodeGated
			if tc.seq > 0 {
				prologue, sdpa = ir.OpAttnProloguePrefill, ir.OpSDPAPrefillGated
			}
			for _, r := range g.Regions {
				if r.Kind != "attention" {
					continue
				}
				n := map[ir.OpKind]int{}
				for _, op := range r.Ops {
					n[op.Kind]++
				}
				composed := n[ir.OpRotary] + n[ir.OpUpdateCache] + n[ir.OpFillCache] + n[ir.OpSDPADecode] + n[ir.OpSDPAPrefill]
				if n[prologue] != 1 || n[sdpa] != 1 || composed != 0 {
					t.Errorf("%s: %d %s, %d %s, %d composed attention ops; want 1, 1, 0: %v", r.Label(), n[prologue], prologue, n[sdpa], sdpa, composed, attnNames(r.Ops))
				}
				for _, rule := range attnRuleNames(tc.seq > 0) {
					if c := res.Rewrites.Count(rule, r); c != 1 {
						t.Errorf("%s: %s fired %d times, want 1", r.Label(), rule, c)
					}
				}
			}
		})
	}
}

// attnRandomArgs draws one value per operand of op: floats N(0, 1), the
// cache position (integer operands) uniform in [0, 16), so that it and
// the prefill tokens after it (at most 6) fit every test graph's 32-long
// caches.
func attnRandomArgs(op *ir.Op, rng *rand.Rand) []ref.Tensor { return rulestest.RandomArgs(op, rng, 16) }

// attnEvalPair evaluates the two graphs of rewrite.EquivalencePair(op) on
// args and returns their outputs.
func attnEvalPair(op *ir.Op, args []ref.Tensor, opts ref.Options) (fused, dec []ref.Tensor, err error) {
	fg, dg, err := rewrite.EquivalencePair(op)
	if err != nil {
		return nil, nil, err
	}
	eval := func(g *ir.Graph) ([]ref.Tensor, error) {
		env := map[*ir.Value]ref.Tensor{}
		for i, v := range g.Inputs {
			env[v] = args[i]
		}
		vals, err := ref.Eval(g, env, opts)
		if err != nil {
			return nil, err
		}
		var out []ref.Tensor
		for _, o := range g.Outputs {
			out = append(out, vals[o])
		}
		return out, nil
	}
	if fused, err = eval(fg); err != nil {
		return nil, nil, err
	}
	dec, err = eval(dg)
	return fused, dec, err
}

// TestAttentionEquivalence checks every attention rule's fused ops against
// their decompositions (rewrite.EquivalencePair, both graphs evaluated
// with sim/ref) on random inputs, with storage formats at the
// decomposition's rounding points (composedAttnOptions) and in exact math.
// The fused ops reproduce every bf16 rounding point of the composed chain
// (the normed q/k rows, the attention output and the sigmoid), so they
// must agree with PCC >= 0.9999 and a max relative error of at most 1e-6
// (in practice 0: the same float32 values). At the device's formats
// (DefaultOptions: each fused op as its program computes it) the prefill
// prologue must agree too: its element-wise RoPE is the composed rotary's
// FPU arithmetic. The decode prologue's RoPE matmul rounds
// y*cos + rotate_half(y)*sin once where the composed rotary adds tf32 reads
// of its two products, and the gated attentions' programs subtract the
// row maximum and normalise in another order than sdpa_decode's, so those
// differ from their decomposition at the device's formats (each is checked
// bit for bit against its own program in codegen/lower). Sources: the small
// config (decode on 1x1 and 1x2, prefill on 1x2) and every input of
// testdata/fuse_attention; every rule must be checked at least once.
func TestAttentionEquivalence(t *testing.T) {
	var graphs []*ir.Graph
	for _, tc := range []attnCase{{true, 1, 0}, {true, 2, 0}, {true, 2, 6}} {
		g, _, err := qwen27b.BuildGraph(attnOptions(t, tc.small, tc.seq), ir.Mesh{Rows: 1, Cols: tc.devices})
		if err != nil {
			t.Fatal(err)
		}
		g.Name = tc.String()
		graphs = append(graphs, g)
	}
	files, err := filepath.Glob("testdata/fuse_attention/*.txt")
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range files {
		a, err := txtar.ParseFile(path)
		if err != nil {
			t.Fatal(err)
		}
		g, err := ir.Parse(rulestest.ParseCase(t, path, a).Input)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		g.Name = filepath.Base(path)
		graphs = append(graphs, g)
	}
	checked := map[string]int{}
	worst := map[string]float64{}
	rng := rand.New(rand.NewPCG(3, 17))
	for _, g := range graphs {
		e, err := rewrite.NewEngine(FamilyRules("attention")...)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.Run(g); err != nil {
			t.Fatal(err)
		}
		for _, op := range g.Ops() {
			if op.Rule == "" || !op.Info().Fused {
				continue
			}
			args := attnRandomArgs(op, rng)
			modes := []struct {
				name string
				opts ref.Options
			}{{"formats", composedAttnOptions()}, {"exact", ref.ExactOptions()}}
			if op.Kind == ir.OpAttnProloguePrefill {
				modes = append(modes, struct {
					name string
					opts ref.Options
				}{"device formats", ref.DefaultOptions()})
			}
			for _, mode := range modes {
				fused, dec, err := attnEvalPair(op, args, mode.opts)
				if err != nil {
					t.Fatalf("%s %s: %v", g.Name, op.Where(), err)
				}
				for k := range fused {
					pcc := numerics.PCC(dec[k].Data, fused[k].Data)
					rel := numerics.MaxRelErr(dec[k].Data, fused[k].Data)
					if pcc < 0.9999 || rel > 1e-6 {
						t.Errorf("%s %s (%s) result %d, %s: fused vs decomposed PCC %.9f, max rel err %.3g; want >= 0.9999 and <= 1e-6", g.Name, op.Where(), op.Rule, k, mode.name, pcc, rel)
					}
					worst[op.Rule+" "+mode.name] = max(worst[op.Rule+" "+mode.name], rel)
				}
			}
			checked[op.Rule]++
		}
	}
	for _, r := range FamilyRules("attention") {
		if checked[r.Name] == 0 {
			t.Errorf("rule %s produced no fused op to check", r.Name)
			continue
		}
		t.Logf("%s: %d fused ops, every result PCC >= 0.9999; max rel err %.3g at storage formats, %.3g at the device's (0 if not compared), %.3g in exact math",
			r.Name, checked[r.Name], worst[r.Name+" formats"], worst[r.Name+" device formats"], worst[r.Name+" exact"])
	}
}

// attnGraphData draws per-device values for every declared value of g:
// weights and states with qwen27b's InitWeight, token ids, the position
// pos and the rope tables of the step (decode or prefill).
func attnGraphData(g *ir.Graph, o qwen27b.Options, pos int, seed int64) []map[*ir.Value]ref.Tensor {
	envs := make([]map[*ir.Value]ref.Tensor, g.Mesh.Devices())
	c := o.Config
	cos, sin := qwen27b.RopeTables(c.RotaryDim(), c.RopeTheta, pos, o.Batch)
	if o.Mode == qwen27b.Prefill {
		cos, sin = qwen27b.RopePrefillTables(c.RotaryDim(), c.RopeTheta, pos, o.Seq)
	}
	for d := range envs {
		env := map[*ir.Value]ref.Tensor{}
		rng := mrand.New(mrand.NewSource(seed + int64(d)))
		for _, list := range [][]*ir.Value{g.Weights, g.States} {
			for _, v := range list {
				env[v] = ref.Tensor{Shape: v.Type.Shape.Clone(), Data: qwen27b.Model{}.InitWeight(v, rng)}
			}
		}
		for _, v := range g.Inputs {
			t := ref.NewTensor(v.Type.Shape)
			switch v.Name {
			case "pos": // every user at pos
				for i := range t.Data {
					t.Data[i] = float32(pos)
				}
			case "rope.cos":
				copy(t.Data, cos)
			case "rope.sin":
				copy(t.Data, sin)
			default:
				for i := range t.Data {
					t.Data[i] = float32(rng.Intn(c.VocabSize))
				}
			}
			env[v] = t
		}
		envs[d] = env
	}
	return envs
}

// composedAttnOptions are the storage-format reference options with fused
// ops at their decomposition's rounding points (ref.Options.Composed): a
// rule must keep the composed path's arithmetic, while the decode
// prologue's program rounds its RoPE once (see TestAttentionEquivalence).
func composedAttnOptions() ref.Options {
	o := ref.DefaultOptions()
	o.Composed = true
	return o
}

// TestAttentionRulesKeepTheModel evaluates the small config's step with
// sim/ref at storage formats (composedAttnOptions: fused ops at their
// decomposition's rounding points), unfused and after the attention rules: on
// decode 1x2 both rules and either one alone (so disabling one still gives
// a correct graph), on prefill 1x2 both. The
// logits, the greedy tokens and every state update (the KV caches
// included) must be identical, since the fused ops reproduce the composed
// path's rounding points. The prefill case (~4 CPU-s) is a long check
// (TCC_LONG=1): by default the prefill rules' rewrites are checked rule by
// rule on the same small 1x2 prefill graph (TestAttentionEquivalence) and
// the fused prefill step against the unfused one on the reference
// (TestFusedMatchesUnfused).
func TestAttentionRulesKeepTheModel(t *testing.T) {
	for _, tc := range []struct {
		attnCase
		keep [][]string
		long bool
	}{
		{attnCase{true, 2, 0}, [][]string{attnRuleNames(false), {"FuseAttnPrologue"}, {"FuseSDPADecodeGated"}}, false},
		{attnCase{true, 2, 6}, [][]string{attnRuleNames(true)}, true},
	} {
		t.Run(tc.String(), func(t *testing.T) {
			if tc.long {
				longtest.Skip(t, "the small prefill step bit for bit after the attention rules (~4 CPU-s)")
			}
			t.Parallel()
			o := attnOptions(t, tc.small, tc.seq)
			g0, _, err := qwen27b.BuildGraph(o, ir.Mesh{Rows: 1, Cols: tc.devices})
			if err != nil {
				t.Fatal(err)
			}
			eval := func(g *ir.Graph) []map[*ir.Value]ref.Tensor {
				vals, err := ref.EvalMesh(g, attnGraphData(g, o, 5, 9), composedAttnOptions())
				if err != nil {
					t.Fatal(err)
				}
				return vals
			}
			v0 := eval(g0)
			for ki, keep := range tc.keep {
				if ki > 0 && !longtest.Enabled() {
					continue // one rule alone: ~1 CPU-s each, with TCC_LONG=1
				}
				var rules []*rewrite.Rule
				for _, r := range FamilyRules("attention") {
					if slices.Contains(keep, r.Name) {
						rules = append(rules, r)
					}
				}
				g1, _, res := attnRun(t, o, tc.devices, rules)
				for _, name := range keep {
					if res.Rewrites.Total(name) == 0 {
						t.Fatalf("%s did not fire", name)
					}
				}
				v1 := eval(g1)
				states := map[string]*ir.Value{}
				for s, v := range g1.StateUpdates {
					states[s.Name] = v
				}
				for d := range v0 {
					for i := range g0.Outputs {
						a, b := v0[d][g0.Outputs[i]], v1[d][g1.Outputs[i]]
						if !slices.Equal(a.Data, b.Data) {
							t.Errorf("rules %v: device %d output %d differs after fusion: PCC %.9f, max rel err %.3g", keep, d, i, numerics.PCC(a.Data, b.Data), numerics.MaxRelErr(a.Data, b.Data))
						}
					}
					for s, v := range g0.StateUpdates {
						a, b := v0[d][v], v1[d][states[s.Name]]
						if !slices.Equal(a.Data, b.Data) {
							t.Errorf("rules %v: device %d state %s differs after fusion: PCC %.9f, max rel err %.3g", keep, d, s.Name, numerics.PCC(a.Data, b.Data), numerics.MaxRelErr(a.Data, b.Data))
						}
					}
				}
			}
		})
	}
}
