package lower_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/tcc-dev/tcc/ir/longtest"

	"github.com/tcc-dev/tcc/codegen/cpp"
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/ir/numerics"
	"github.com/tcc-dev/tcc/models/config"
	"github.com/tcc-dev/tcc/models/qwen27b"
	"github.com/tcc-dev/tcc/passes"
	"github.com/tcc-dev/tcc/runtime"
	"github.com/tcc-dev/tcc/sim/ref"
)

// Tests of the fused attention lowerings (attn_prologue,
// sdpa_decode_gated) on the simulator against ref.EvalOp at the small
// config's shapes (real fused ops: the decode graph through the default
// pass pipeline, meshes 1x1 and 1x2) and at the 27B per-device shape of
// mesh 1x2 (12 q heads, 2 kv heads, head dim 256, 64 rotary dims, a
// 128-long cache).

// fusedSmallGraph is the small config's decode graph on a 1 x cols mesh
// after the default pipeline (fused, placed).
func fusedSmallGraph(t *testing.T, cols int) *ir.Graph {
	t.Helper()
	c, err := config.Load("../../models/qwen27b/testdata/small.json")
	if err != nil {
		t.Fatal(err)
	}
	o := qwen27b.DefaultOptions()
	o.Config = c
	g, _, err := qwen27b.BuildGraph(o, ir.Mesh{Rows: 1, Cols: cols})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := passes.Default().Run(g, passes.Options{}); err != nil {
		t.Fatal(err)
	}
	return g
}

// attnStateAlias maps every state's new value to the state (the in-place
// updates codegen.Compile sets up).
func attnStateAlias(g *ir.Graph) map[*ir.Value]*ir.Value {
	a := map[*ir.Value]*ir.Value{}
	for s, nv := range g.StateUpdates {
		if nv != s {
			a[nv] = s
		}
	}
	return a
}

// attnFirstOf returns the first op of kind k in g.
func attnFirstOf(t *testing.T, g *ir.Graph, k ir.OpKind) *ir.Op {
	t.Helper()
	for _, op := range g.Ops() {
		if op.Kind == k {
			return op
		}
	}
	t.Fatalf("graph %q has no %s op", g.Name, k)
	return nil
}

// attnGraph builds the attention ops of one layer for B users, H q
// heads, Hkv kv heads of dim D, R rotary dims and an L-long cache, with
// the caches as state updated in place by the prologue; it returns the
// graph, the sdpa_decode_gated op and the attn_prologue op.
func attnGraph(t *testing.T, B, H, Hkv, D, R, L int) (*ir.Graph, *ir.Op, *ir.Op) {
	t.Helper()
	return attnGraphPos(t, B, H, Hkv, D, R, L, 1)
}

// attnGraphPos is attnGraph with pos [posN] (1, or B: a position per
// user).
func attnGraphPos(t *testing.T, B, H, Hkv, D, R, L, posN int) (*ir.Graph, *ir.Op, *ir.Op) {
	t.Helper()
	b := ir.NewBuilder("attn")
	b.Region("attention", 3)
	pos := b.Input("pos", ir.TensorType{Shape: ir.Shape{posN}, DType: ir.UInt32, Layout: ir.RowMajorLayout, Mem: ir.DRAM, Dist: ir.Replicated})
	qg := b.Input("qg", ir.T(ir.BF16, B, 1, H*2*D))
	k := b.Input("k", ir.T(ir.BF16, B, 1, Hkv*D))
	v := b.Input("v", ir.T(ir.BF16, B, 1, Hkv*D))
	qn := b.Weight("q_norm.weight", ir.T(ir.BF16, D))
	kn := b.Weight("k_norm.weight", ir.T(ir.BF16, D))
	cos := b.Input("rope.cos", ir.T(ir.BF16, B, R))
	sin := b.Input("rope.sin", ir.T(ir.BF16, B, R))
	kc := b.State("k_cache", ir.T(ir.BF16, B, Hkv, L, D))
	vc := b.State("v_cache", ir.T(ir.BF16, B, Hkv, L, D))
	res := b.AttnPrologue(qg, k, v, qn, kn, cos, sin, kc, vc, pos, 1e-6, 1)
	b.UpdateState(kc, res[2])
	b.UpdateState(vc, res[3])
	out := b.SDPADecodeGated(res[0], res[2], res[3], pos, res[1], 1/math.Sqrt(float64(D)))
	b.Output(out)
	g, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	return g, out.Def, res[0].Def
}

// attn27B is attnGraph at the 27B per-device shape of mesh 1x2: 12 q
// heads, 2 kv heads, head dim 256, 64 rotary dims, a 128-long cache.
func attn27B(t *testing.T) (*ir.Graph, *ir.Op, *ir.Op) { return attnGraph(t, 1, 12, 2, 256, 64, 128) }

// attnPrefillGraph is attnGraph for a prefill of S tokens per user:
// attn_prologue_prefill and sdpa_prefill_gated.
func attnPrefillGraph(t *testing.T, B, S, H, Hkv, D, R, L int) (*ir.Graph, *ir.Op, *ir.Op) {
	t.Helper()
	return attnPrefillGraphOf(t, ir.BF16, B, S, H, Hkv, D, R, L)
}

// attnPrefillGraphOf is attnPrefillGraph with activations, tables and
// caches of dtype dt (the norm weights stay bf16).
func attnPrefillGraphOf(t *testing.T, dt ir.DType, B, S, H, Hkv, D, R, L int) (*ir.Graph, *ir.Op, *ir.Op) {
	t.Helper()
	b := ir.NewBuilder("attn_prefill")
	b.Region("attention", 3)
	pos := b.Input("pos", ir.TensorType{Shape: ir.Shape{1}, DType: ir.UInt32, Layout: ir.RowMajorLayout, Mem: ir.DRAM, Dist: ir.Replicated})
	qg := b.Input("qg", ir.T(dt, B, S, H*2*D))
	k := b.Input("k", ir.T(dt, B, S, Hkv*D))
	v := b.Input("v", ir.T(dt, B, S, Hkv*D))
	qn := b.Weight("q_norm.weight", ir.T(ir.BF16, D))
	kn := b.Weight("k_norm.weight", ir.T(ir.BF16, D))
	cos := b.Input("rope.cos", ir.T(dt, S, 1, R))
	sin := b.Input("rope.sin", ir.T(dt, S, 1, R))
	kc := b.State("k_cache", ir.T(dt, B, Hkv, L, D))
	vc := b.State("v_cache", ir.T(dt, B, Hkv, L, D))
	res := b.AttnProloguePrefill(qg, k, v, qn, kn, cos, sin, kc, vc, pos, 1e-6, 1)
	b.UpdateState(kc, res[2])
	b.UpdateState(vc, res[3])
	out := b.SDPAPrefillGated(res[0], res[2], res[3], pos, res[1], 1/math.Sqrt(float64(D)))
	b.Output(out)
	g, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	return g, out.Def, res[0].Def
}

// fusedSmallPrefillGraph is the small config's prefill graph of seq tokens
// on a 1 x cols mesh after the default pipeline.
func fusedSmallPrefillGraph(t *testing.T, cols, seq int) *ir.Graph {
	t.Helper()
	c, err := config.Load("../../models/qwen27b/testdata/small.json")
	if err != nil {
		t.Fatal(err)
	}
	o := qwen27b.DefaultOptions()
	o.Config, o.Mode, o.Seq = c, qwen27b.Prefill, seq
	g, _, err := qwen27b.BuildGraph(o, ir.Mesh{Rows: 1, Cols: cols})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := passes.Default().Run(g, passes.Options{}); err != nil {
		t.Fatal(err)
	}
	return g
}

// attnGrid2 is Blackhole with a 2x1 worker grid: several work items per
// core.
func attnGrid2() *target.Target {
	t := *target.Blackhole()
	t.GridX, t.GridY = 2, 1
	return &t
}

// attnData draws test values for operand v of op: pos as given, RoPE
// tables cos/sin of random angles, norm weights N(0, 0.1) (the model
// applies 1 + w), caches N(0, 0.5), everything else N(0, 1); rounded to
// bf16 (and block-float caches to their dtype) so the device and the
// reference start from the same values.
func attnData(rng *rand.Rand, v *ir.Value, pos int) []float32 {
	n := v.Type.Shape.Numel()
	out := make([]float32, n)
	name := v.Name
	for i := range out {
		var x float64
		switch {
		case v.Type.DType == ir.UInt32:
			x = float64(pos)
		case strings.HasSuffix(name, "cos"):
			x = math.Cos(rng.Float64() * 2 * math.Pi)
		case strings.HasSuffix(name, "sin"):
			x = math.Sin(rng.Float64() * 2 * math.Pi)
		case v.Kind == ir.KindWeight:
			x = 0.1 * rng.NormFloat64()
		case v.Kind == ir.KindState:
			x = 0.5 * rng.NormFloat64()
		default:
			x = rng.NormFloat64()
		}
		out[i] = numerics.RoundBF16(float32(x))
	}
	if v.Type.DType.IsBlockFloat() { // a bfp8_b cache: the values it can hold
		q, err := ref.Store(v.Type.DType, ref.Tensor{Shape: v.Type.Shape, Data: out})
		if err != nil {
			panic(err)
		}
		return q.Data
	}
	return out
}

// attnRunResult is one lowered op run on the simulator.
type attnRunResult struct {
	prog *kir.Program
	in   []ref.Tensor // operand values
	got  [][]float32  // result values read back
	// steps is the simulator's instruction count.
	steps int64
}

// attnRun lowers op for tgt with alias (nil: no in-place results), uploads
// data (per operand), runs it on a fresh simulated device and reads every
// result back.
func attnRun(t *testing.T, tgt *target.Target, op *ir.Op, alias map[*ir.Value]*ir.Value, data [][]float32) attnRunResult {
	t.Helper()
	ctx := lower.NewContext(tgt)
	ctx.Alias = alias
	p, err := lower.Lower(op, ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := kir.Validate(p, tgt); err != nil {
		t.Fatal(err)
	}
	m, err := runtime.Open("sim", ir.Mesh{Rows: 1, Cols: 1})
	if err != nil {
		t.Fatal(err)
	}
	shapes := map[string]ir.Shape{}
	for _, v := range append(append([]*ir.Value(nil), op.Operands...), op.Results...) {
		shapes[ctx.BufferName(v)] = v.Type.Shape
	}
	for _, b := range p.Buffers {
		if err := m.Alloc(runtime.Tensor{Buffer: b, Shape: shapes[b.Name]}); err != nil {
			t.Fatal(err)
		}
	}
	r := attnRunResult{prog: p}
	for i, v := range op.Operands {
		if err := m.Upload(0, ctx.BufferName(v), data[i]); err != nil {
			t.Fatal(err)
		}
		r.in = append(r.in, ref.Tensor{Shape: v.Type.Shape, Data: data[i]})
	}
	st, err := m.Launch(0, p)
	if err != nil {
		t.Fatalf("%s: %v", op.Where(), err)
	}
	r.steps = st.Steps
	for _, v := range op.Results {
		got, err := m.Download(0, ctx.BufferName(v))
		if err != nil {
			t.Fatal(err)
		}
		r.got = append(r.got, got)
	}
	return r
}

// attnCheckClose fails unless got matches want with PCC >= 0.999 and logs the
// PCC, the max relative error and the share of elements that differ.
func attnCheckClose(t *testing.T, what string, want, got []float32) {
	t.Helper()
	pcc, rel := numerics.PCC(want, got), numerics.MaxRelErr(want, got)
	diff := 0
	for i := range want {
		if want[i] != got[i] {
			diff++
		}
	}
	t.Logf("%s: PCC %.6f, max rel err %.3g, %d of %d elements differ from the reference", what, pcc, rel, diff, len(want))
	if pcc < 0.999 {
		t.Errorf("%s: PCC %.6f, want >= 0.999", what, pcc)
	}
}

// attnCheckExact fails at the first element where got differs from want.
func attnCheckExact(t *testing.T, what string, want, got []float32) {
	t.Helper()
	for i := range want {
		if want[i] != got[i] {
			t.Errorf("%s: element %d is %v, want %v (exact)", what, i, got[i], want[i])
			return
		}
	}
}

// attnCheckCache checks a cache result [B,H,L,D]: rows outside positions
// pos..pos+n-1 equal the input cache exactly (untouched), rows inside match
// the reference (exactly when exact, else by PCC).
func attnCheckCache(t *testing.T, what string, shape ir.Shape, pos, n int, in, want, got []float32, exact bool) {
	t.Helper()
	L, D := shape[2], shape[3]
	var wantRow, gotRow []float32
	for row := 0; row < shape[0]*shape[1]*L; row++ {
		w, g, old := want[row*D:(row+1)*D], got[row*D:(row+1)*D], in[row*D:(row+1)*D]
		if p := row % L; p >= pos && p < pos+n {
			wantRow, gotRow = append(wantRow, w...), append(gotRow, g...)
			continue
		}
		for i := range g {
			if g[i] != old[i] {
				t.Fatalf("%s: row %d (position %d) element %d changed from %v to %v; only positions %d..%d may change", what, row, row%L, i, old[i], g[i], pos, pos+n-1)
			}
		}
	}
	if exact {
		attnCheckExact(t, what+" rows written", wantRow, gotRow)
	} else {
		attnCheckClose(t, what+" rows written", wantRow, gotRow)
	}
}

// testPrologue runs attn_prologue or attn_prologue_prefill op at pos
// against the reference at the same formats, which models both programs'
// arithmetic (the norm's FPU reads, the decode RoPE matmul's one
// rounding, the prefill's element-wise RoPE with tf32 reads of its fp32
// products): every result must match bit for bit.
func testPrologue(t *testing.T, tgt *target.Target, op *ir.Op, alias map[*ir.Value]*ir.Value, pos int, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 17))
	data := make([][]float32, len(op.Operands))
	for i, v := range op.Operands {
		data[i] = attnData(rng, v, pos)
	}
	r := attnRun(t, tgt, op, alias, data)
	want, err := ref.EvalOp(op, r.in, ref.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %d cores, %d simulator steps", r.prog.Name, len(r.prog.Cores()), r.steps)
	attnCheckExact(t, "q", want[0].Data, r.got[0])
	attnCheckExact(t, "gate", want[1].Data, r.got[1])
	n := 1 // tokens per user
	if op.Kind == ir.OpAttnProloguePrefill {
		n = op.Operands[0].Type.Shape[1]
	}
	attnCheckCache(t, "k_cache", op.Operands[7].Type.Shape, pos, n, data[7], want[2].Data, r.got[2], true)
	attnCheckCache(t, "v_cache", op.Operands[8].Type.Shape, pos, n, data[8], want[3].Data, r.got[3], true)
}

// testSDPA runs sdpa_decode_gated or sdpa_prefill_gated op at pos against
// the reference. Both programs run an online softmax over chunks of the
// cache (flash decoding, flash attention), which rounds in its own order:
// the result must match within checkFlash's bounds. Cache rows past the
// last visible position (pos, or pos+S-1 in prefill) are stale: NaN, which
// the kernel must never let reach the result (it clears them, rather than
// only masking their scores, since 0 x NaN is NaN).
func testSDPA(t *testing.T, tgt *target.Target, op *ir.Op, pos int, seed uint64) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 29))
	data := make([][]float32, len(op.Operands))
	for i, v := range op.Operands {
		data[i] = attnData(rng, v, pos)
	}
	data[3] = []float32{float32(pos)} // exact (attnData rounds to bf16)
	last := pos
	if op.Kind == ir.OpSDPAPrefillGated {
		last += op.Operands[0].Type.Shape[2] - 1
	}
	for _, c := range []int{1, 2} {
		s := op.Operands[c].Type.Shape
		L, D := s[2], s[3]
		for i := range data[c] {
			if (i/D)%L > last {
				data[c][i] = float32(math.NaN())
			}
		}
	}
	r := attnRun(t, tgt, op, nil, data)
	checkFlash(t, op, r)
}

// sdpaGatedOp is a lone sdpa_decode_gated (S == 0) or sdpa_prefill_gated
// op of dtype dt for B users, H q heads, Hkv kv heads of dim D and an
// L-long cache, at math fidelity fid.
func sdpaGatedOp(t *testing.T, dt ir.DType, B, S, H, Hkv, D, L int, fid string) *ir.Op {
	t.Helper()
	return sdpaGatedOpPos(t, dt, B, S, H, Hkv, D, L, fid, 1)
}

// sdpaGatedOpPos is sdpaGatedOp with pos [posN] (1, or B in decode: a
// position per user).
func sdpaGatedOpPos(t *testing.T, dt ir.DType, B, S, H, Hkv, D, L int, fid string, posN int) *ir.Op {
	t.Helper()
	b := ir.NewBuilder("sdpa_gated")
	pos := b.Input("pos", ir.TensorType{Shape: ir.Shape{posN}, DType: ir.UInt32, Layout: ir.RowMajorLayout, Mem: ir.DRAM, Dist: ir.Replicated})
	kc := b.Input("k_cache", ir.T(dt, B, Hkv, L, D))
	vc := b.Input("v_cache", ir.T(dt, B, Hkv, L, D))
	var out *ir.Value
	if S == 0 {
		out = b.SDPADecodeGated(b.Input("q", ir.T(dt, B, H, D)), kc, vc, pos, b.Input("gate", ir.T(dt, B, H, D)), 1/math.Sqrt(float64(D)))
	} else {
		out = b.SDPAPrefillGated(b.Input("q", ir.T(dt, B, H, S, D)), kc, vc, pos, b.Input("gate", ir.T(dt, B, S, H, D)), 1/math.Sqrt(float64(D)))
	}
	out.Def.Attrs[ir.FidelityAttr] = fid
	b.Output(out)
	if _, err := b.Finish(); err != nil {
		t.Fatal(err)
	}
	return out.Def
}

// TestSDPAGatedFormatsOnSim: the gated attentions with fp32 operands (the
// FPU reads q, the caches and the fp32 intermediates as tf32; the gate is
// copied exactly) and at lower fidelities match the reference bit for bit.
func TestSDPAGatedFormatsOnSim(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name               string
		dt                 ir.DType
		B, S, H, Hkv, D, L int
		fid                string
		pos                int
	}{
		{"decode_fp32_hifi4", ir.FP32, 2, 0, 6, 2, 64, 64, "HiFi4", 40},
		{"decode_bf16_lofi", ir.BF16, 1, 0, 4, 1, 64, 96, "LoFi", 70},
		{"prefill_fp32_hifi2", ir.FP32, 1, 33, 4, 2, 64, 128, "HiFi2", 30},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			op := sdpaGatedOp(t, tc.dt, tc.B, tc.S, tc.H, tc.Hkv, tc.D, tc.L, tc.fid)
			testSDPA(t, target.Blackhole(), op, tc.pos, 17)
		})
	}
}

func TestAttnPrologueOnSim(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		cols    int
		pos     int
		inPlace bool
	}{
		{"small_1x1_pos37", 1, 37, true},
		{"small_1x2_pos127", 2, 127, true},
		{"small_1x1_pos0_copy", 1, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := fusedSmallGraph(t, tc.cols)
			op := attnFirstOf(t, g, ir.OpAttnPrologue)
			var alias map[*ir.Value]*ir.Value
			if tc.inPlace {
				alias = attnStateAlias(g)
				if alias[op.Results[2]] != op.Operands[7] || alias[op.Results[3]] != op.Operands[8] {
					t.Fatalf("the cache results of %s are not the caches' state updates", op.Where())
				}
			}
			testPrologue(t, target.Blackhole(), op, alias, tc.pos, uint64(tc.cols*1000+tc.pos))
		})
	}
	for _, tc := range attnDecodeCases {
		for _, inPlace := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s_inplace_%v", tc.name, inPlace), func(t *testing.T) {
				t.Parallel()
				g, _, op := attnGraph(t, tc.B, tc.H, tc.Hkv, tc.D, tc.R, tc.L)
				var alias map[*ir.Value]*ir.Value
				if inPlace {
					alias = attnStateAlias(g)
				}
				testPrologue(t, tc.tgt(), op, alias, tc.pos, 7)
			})
		}
	}
}

// attnDecodeCases are attention shapes beyond the model's: the 27B per-device
// shape, batches with several items per core, more than 32 heads (two
// tile rows), full and tile-sized rotary dims, a cache length that is not
// whole tiles, q items of groups of heads (decodeHeadGroups) one of which
// spans both bands of tile rows.
var attnDecodeCases = []struct {
	name               string
	B, H, Hkv, D, R, L int
	pos                int
	tgt                func() *target.Target
}{
	{"27b_1x2_pos100", 1, 12, 2, 256, 64, 128, 100, target.Blackhole},
	{"b3_h40_kv8_r32_grid2", 3, 40, 8, 32, 32, 64, 40, attnGrid2},
	{"b2_h4_kv2_fullrope_l40", 2, 4, 2, 64, 64, 40, 39, target.Blackhole},
	{"b2_h18_kv2_groups_of_6", 2, 18, 2, 64, 64, 64, 33, target.Blackhole}, // heads 12..17: a group across tile rows 15/16
}

func TestSDPADecodeGatedOnSim(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cols int
		pos  int
	}{
		{"small_1x1_pos37", 1, 37},
		{"small_1x2_pos0", 2, 0},
		{"small_1x2_pos127", 2, 127},
		{"small_1x2_pos52", 2, 52}, // rows 21.. of the tile holding pos cleared: faces 2 and 3 only
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := fusedSmallGraph(t, tc.cols)
			testSDPA(t, target.Blackhole(), attnFirstOf(t, g, ir.OpSDPADecodeGated), tc.pos, uint64(tc.cols*1000+tc.pos))
		})
	}
	for _, tc := range attnDecodeCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, op, _ := attnGraph(t, tc.B, tc.H, tc.Hkv, tc.D, tc.R, tc.L)
			testSDPA(t, tc.tgt(), op, tc.pos, 11)
		})
	}
}

// TestFusedAttentionErrors checks that shapes the lowerings cannot handle
// are refused with the rule named.
func TestFusedAttentionErrors(t *testing.T) {
	b := ir.NewBuilder("bad")
	b.Region("attention", 0)
	const D, R = 48, 16 // head dim not whole tiles
	pos := b.Input("pos", ir.TensorType{Shape: ir.Shape{1}, DType: ir.UInt32, Layout: ir.RowMajorLayout, Mem: ir.DRAM, Dist: ir.Replicated})
	res := b.AttnPrologue(b.Input("qg", ir.T(ir.BF16, 1, 1, 2*2*D)), b.Input("k", ir.T(ir.BF16, 1, 1, D)), b.Input("v", ir.T(ir.BF16, 1, 1, D)),
		b.Weight("qn", ir.T(ir.BF16, D)), b.Weight("kn", ir.T(ir.BF16, D)), b.Input("cos", ir.T(ir.BF16, 1, R)), b.Input("sin", ir.T(ir.BF16, 1, R)),
		b.State("kc", ir.T(ir.BF16, 1, 1, 32, D)), b.State("vc", ir.T(ir.BF16, 1, 1, 32, D)), pos, 1e-6, 1)
	out := b.SDPADecodeGated(res[0], res[2], res[3], pos, res[1], 0.1)
	b.Output(out)
	if _, err := b.Finish(); err != nil {
		t.Fatal(err)
	}
	ctx := lower.NewContext(target.Blackhole())
	for _, tc := range []struct {
		op   *ir.Op
		rule string
	}{{res[0].Def, "rule prologue-head-dim"}, {out.Def, "rule sdpa-tiles"}} {
		_, err := lower.Lower(tc.op, ctx)
		if err == nil || !strings.Contains(err.Error(), tc.rule) || !strings.Contains(err.Error(), tc.op.Name()) {
			t.Errorf("Lower(%s) = %v, want an error naming the op and %q", tc.op.Name(), err, tc.rule)
		}
	}
}

// TestFusedAttentionKernelsCompile lowers the fused attention ops of the
// small decode graphs (1x1, 1x2, in place and not), the 27B shape and the
// prefill shapes, validates every program and runs the g++ syntax check on
// every kernel.
func TestFusedAttentionKernelsCompile(t *testing.T) {
	tgt := target.Blackhole()
	var progs []*kir.Program
	add := func(op *ir.Op, alias map[*ir.Value]*ir.Value) {
		progs = append(progs, lower.LowerValid(t, tgt, op, alias))
	}
	for _, cols := range []int{1, 2} {
		g := fusedSmallGraph(t, cols)
		add(attnFirstOf(t, g, ir.OpAttnPrologue), attnStateAlias(g))
		add(attnFirstOf(t, g, ir.OpAttnPrologue), nil)
		add(attnFirstOf(t, g, ir.OpSDPADecodeGated), attnStateAlias(g))
	}
	g, sdpa, pro := attn27B(t)
	add(pro, attnStateAlias(g))
	add(sdpa, attnStateAlias(g))
	for _, tc := range attnPrefillCases {
		g, sdpa, pro := attnPrefillGraph(t, tc.B, tc.S, tc.H, tc.Hkv, tc.D, tc.R, tc.L)
		add(pro, attnStateAlias(g))
		add(pro, nil)
		add(sdpa, attnStateAlias(g))
	}
	dir := t.TempDir()
	sources := map[string]cpp.Source{}
	for i, p := range progs {
		lower.WriteKernels(t, dir, fmt.Sprintf("p%d", i), p, sources)
	}
	longtest.Skip(t, "the g++ syntax check of every fused attention kernel (~3 CPU-s; the lowering and validation above run in every suite)")
	lower.CheckKernelSyntax(t, "fused attention kernels", dir, sources, true)
}

func TestSDPAPrefillGatedOnSim(t *testing.T) {
	t.Parallel()
	t.Run("small_1x2_s32_pos0", func(t *testing.T) {
		t.Parallel()
		g := fusedSmallPrefillGraph(t, 2, 32)
		testSDPA(t, target.Blackhole(), attnFirstOf(t, g, ir.OpSDPAPrefillGated), 0, 5)
	})
	for _, tc := range attnPrefillCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if tc.name == "27b_1x2_s32_pos37" {
				longtest.Skip(t, "the 27B's shape on the full grid; small_1x2_s32_pos0 and the 2-core case run by default (~3 CPU-s)")
			}
			_, op, _ := attnPrefillGraph(t, tc.B, tc.S, tc.H, tc.Hkv, tc.D, tc.R, tc.L)
			testSDPA(t, tc.tgt(), op, tc.pos, 13)
		})
	}
}

// attnPrefillCases are prefill shapes: the 27B per-device shape of mesh 1x2
// with 32 tokens at a position that is not tile aligned, and two tile
// rows of tokens (the second partial) for two users on a 2-core grid.
var attnPrefillCases = []struct {
	name                  string
	B, S, H, Hkv, D, R, L int
	pos                   int
	tgt                   func() *target.Target
}{
	{"27b_1x2_s32_pos37", 1, 32, 12, 2, 256, 64, 128, 37, target.Blackhole},
	{"b2_s40_h4_kv2_pos50_grid2", 2, 40, 4, 2, 64, 16, 128, 50, attnGrid2},
}

func TestAttnProloguePrefillOnSim(t *testing.T) {
	t.Parallel()
	t.Run("small_1x2_s32_pos37", func(t *testing.T) {
		t.Parallel()
		g := fusedSmallPrefillGraph(t, 2, 32)
		op := attnFirstOf(t, g, ir.OpAttnProloguePrefill)
		testPrologue(t, target.Blackhole(), op, attnStateAlias(g), 37, 3)
	})
	// fp32 data: the normed rows are fp32 values, which the rotate-half
	// matmul and the multiplies read as tf32; 48 rotary dims of 64 leave
	// columns 48..63 of the second rotary tile to pass through the
	// multiply by cos = 1 (SrcA drops their low bits) and the rest as is.
	t.Run("fp32_b2_s8_h2_kv1_r48_pos3", func(t *testing.T) {
		t.Parallel()
		g, _, op := attnPrefillGraphOf(t, ir.FP32, 2, 8, 2, 1, 96, 48, 32)
		testPrologue(t, attnGrid2(), op, attnStateAlias(g), 3, 11)
	})
	// a tile-aligned position: every k and v item's cache tile row is
	// whole but the last item's, which has no tokens (written nowhere)
	t.Run("b2_s40_h4_kv2_pos64_grid2_copied", func(t *testing.T) {
		t.Parallel()
		_, _, op := attnPrefillGraph(t, 2, 40, 4, 2, 64, 16, 128)
		testPrologue(t, attnGrid2(), op, nil, 64, 5)
	})
	for _, tc := range attnPrefillCases {
		for _, inPlace := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s_inplace_%v", tc.name, inPlace), func(t *testing.T) {
				t.Parallel()
				g, _, op := attnPrefillGraph(t, tc.B, tc.S, tc.H, tc.Hkv, tc.D, tc.R, tc.L)
				var alias map[*ir.Value]*ir.Value
				if inPlace {
					alias = attnStateAlias(g)
				}
				testPrologue(t, tc.tgt(), op, alias, tc.pos, 9)
			})
		}
	}
}

// TestAttentionLayerChained runs the prologue and the attention of one
// layer back to back on one simulated device, as a decode (or prefill)
// step does: the prologue writes the caches in place (their state
// buffers) and the attention reads them there. The output and the caches
// are compared with ref.Eval of the two-op graph (the caches bit for bit).
func TestAttentionLayerChained(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		build func(t *testing.T) (*ir.Graph, *ir.Op, *ir.Op)
		pos   int
	}{
		{"27b_decode_pos100", attn27B, 100},
		{"prefill_s40_pos50", func(t *testing.T) (*ir.Graph, *ir.Op, *ir.Op) {
			return attnPrefillGraph(t, 2, 40, 4, 2, 64, 16, 128)
		}, 50},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g, sdpa, pro := tc.build(t)
			tgt := target.Blackhole()
			ctx := lower.NewContext(tgt)
			ctx.Alias = attnStateAlias(g)
			m, err := runtime.Open("sim", ir.Mesh{Rows: 1, Cols: 1})
			if err != nil {
				t.Fatal(err)
			}
			allocated := map[string]bool{}
			var progs []*kir.Program
			for _, op := range []*ir.Op{pro, sdpa} {
				p, err := lower.Lower(op, ctx)
				if err != nil {
					t.Fatal(err)
				}
				progs = append(progs, p)
				shapes := map[string]ir.Shape{}
				for _, v := range append(append([]*ir.Value(nil), op.Operands...), op.Results...) {
					shapes[ctx.BufferName(v)] = v.Type.Shape
				}
				for _, b := range p.Buffers {
					if !allocated[b.Name] {
						allocated[b.Name] = true
						if err := m.Alloc(runtime.Tensor{Buffer: b, Shape: shapes[b.Name]}); err != nil {
							t.Fatal(err)
						}
					}
				}
			}
			rng := rand.New(rand.NewPCG(21, 1))
			env := map[*ir.Value]ref.Tensor{}
			for _, list := range [][]*ir.Value{g.Inputs, g.Weights, g.States} {
				for _, v := range list {
					data := attnData(rng, v, tc.pos)
					env[v] = ref.Tensor{Shape: v.Type.Shape, Data: data}
					if err := m.Upload(0, ctx.BufferName(v), data); err != nil {
						t.Fatal(err)
					}
				}
			}
			want, err := ref.Eval(g, env, ref.DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range progs {
				if _, err := m.Launch(0, p); err != nil {
					t.Fatalf("%s: %v", p.Name, err)
				}
			}
			got, err := m.Download(0, ctx.BufferName(sdpa.Result()))
			if err != nil {
				t.Fatal(err)
			}
			attnCheckClose(t, "attention output", want[sdpa.Result()].Data, got)
			n := 1
			if pro.Kind == ir.OpAttnProloguePrefill {
				n = pro.Operands[0].Type.Shape[1]
			}
			for i, name := range []string{"k_cache", "v_cache"} {
				state, nv := pro.Operands[7+i], pro.Results[2+i]
				gotC, err := m.Download(0, ctx.BufferName(state))
				if err != nil {
					t.Fatal(err)
				}
				attnCheckCache(t, name, state.Type.Shape, tc.pos, n, env[state].Data, want[nv].Data, gotC, true)
			}
		})
	}
}

// TestDecodePrologueCores checks that the decode prologue of the 27B's
// per-device shape at B=1 runs its q and gate items as groups of heads,
// one item a core: 3 q, 1 k, 3 gate, 1 v items on 8 cores (all 12 heads
// in one q item would be the program's long pole on 4 cores).
func TestDecodePrologueCores(t *testing.T) {
	g, _, op := attnGraph(t, 1, 12, 2, 256, 64, 128)
	ctx := lower.NewContext(target.Blackhole())
	ctx.Alias = attnStateAlias(g)
	p, err := lower.Lower(op, ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(p.Cores()), 8; got != want {
		t.Errorf("%s runs on %d cores, want %d", p.Name, got, want)
	}
}
