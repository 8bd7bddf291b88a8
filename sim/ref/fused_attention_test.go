package ref

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/ir/numerics"
)

// attnPosType is the [1] uint32 cache position.
var attnPosType = ir.TensorType{Shape: ir.Shape{1}, DType: ir.UInt32, Layout: ir.RowMajorLayout, Mem: ir.DRAM, Dist: ir.Replicated}

// prologueGraph builds one attn_prologue (prefill: attn_prologue_prefill)
// op over declared values of the given shapes, all of dtype dt; it returns
// the graph and its declared values in operand order.
func prologueGraph(t *testing.T, prefill bool, dt ir.DType, qg, kv, norm, table, cache ir.Shape, eps, offset float64) (*ir.Graph, []*ir.Value) {
	t.Helper()
	b := ir.NewBuilder("prologue")
	ins := []*ir.Value{
		b.Input("qg", ir.T(dt, qg...)),
		b.Input("k", ir.T(dt, kv...)),
		b.Input("v", ir.T(dt, kv...)),
		b.Weight("q_norm", ir.T(dt, norm...)),
		b.Weight("k_norm", ir.T(dt, norm...)),
		b.Input("cos", ir.T(dt, table...)),
		b.Input("sin", ir.T(dt, table...)),
		b.State("k_cache", ir.T(dt, cache...)),
		b.State("v_cache", ir.T(dt, cache...)),
		b.Input("pos", attnPosType),
	}
	b.Region("attention", 0)
	var res []*ir.Value
	if prefill {
		res = b.AttnProloguePrefill(ins[0], ins[1], ins[2], ins[3], ins[4], ins[5], ins[6], ins[7], ins[8], ins[9], eps, offset)
	} else {
		res = b.AttnPrologue(ins[0], ins[1], ins[2], ins[3], ins[4], ins[5], ins[6], ins[7], ins[8], ins[9], eps, offset)
	}
	b.Output(res...)
	g, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	return g, ins
}

func evalOutputs(t *testing.T, g *ir.Graph, ins []*ir.Value, data [][]float32, opts Options) [][]float32 {
	t.Helper()
	env := map[*ir.Value]Tensor{}
	for i, v := range ins {
		env[v] = Tensor{Shape: v.Type.Shape.Clone(), Data: data[i]}
	}
	vals, err := Eval(g, env, opts)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]float32
	for _, o := range g.Outputs {
		out = append(out, vals[o].Data)
	}
	return out
}

func near(t *testing.T, what string, want, got []float32, tol float64) {
	t.Helper()
	if len(want) != len(got) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range want {
		if math.Abs(float64(want[i]-got[i])) > tol {
			t.Errorf("%s[%d] = %v, want %v (tolerance %g)\nall: %v", what, i, got[i], want[i], tol, got)
			return
		}
	}
}

// TestAttnPrologueByHand: one user, one q and one kv head, D = R = 2,
// eps 0, zero weights used as (1 + w), a 90 degree rotation (cos 0, sin
// 1), cache length 2 written at position 1. q row (3, 4) normalises to
// (3, 4)/sqrt(12.5) and rotates to (-4, 3)/sqrt(12.5); the gate is
// (5, 6); k (1, 0) becomes (0, sqrt 2); v (7, 8) is copied.
func TestAttnPrologueByHand(t *testing.T) {
	g, ins := prologueGraph(t, false, ir.FP32, ir.Shape{1, 1, 4}, ir.Shape{1, 1, 2}, ir.Shape{2}, ir.Shape{1, 2}, ir.Shape{1, 1, 2, 2}, 0, 1)
	data := [][]float32{{3, 4, 5, 6}, {1, 0}, {7, 8}, {0, 0}, {0, 0}, {0, 0}, {1, 1}, {9, 9, 9, 9}, {9, 9, 9, 9}, {1}}
	// Exact math: the hand values; the device's tf32 reads are modelled at
	// storage formats and checked by TestAttnPrologueRoundsLikeTheComposedPath.
	out := evalOutputs(t, g, ins, data, ExactOptions())
	r := math.Sqrt(12.5)
	near(t, "q", []float32{float32(-4 / r), float32(3 / r)}, out[0], 1e-6)
	near(t, "gate", []float32{5, 6}, out[1], 0)
	near(t, "k_cache", []float32{9, 9, 0, math.Sqrt2}, out[2], 1e-6)
	near(t, "v_cache", []float32{9, 9, 7, 8}, out[3], 0)
}

// TestAttnProloguePrefillByHand: two tokens at positions 0 and 1 with
// their own tables (token 0: identity, token 1: a 90 degree rotation);
// q is returned heads-first [B,H,S,D], the gate tokens-first [B,S,H,D].
func TestAttnProloguePrefillByHand(t *testing.T) {
	g, ins := prologueGraph(t, true, ir.FP32, ir.Shape{1, 2, 4}, ir.Shape{1, 2, 2}, ir.Shape{2}, ir.Shape{2, 1, 2}, ir.Shape{1, 1, 3, 2}, 0, 1)
	data := [][]float32{
		{3, 4, 5, 6, 0, 2, 9, 8}, // qg: token 0 q (3,4) gate (5,6); token 1 q (0,2) gate (9,8)
		{1, 0, 0, 1},             // k
		{7, 8, 1, 2},             // v
		{0, 0}, {0, 0},
		{1, 1, 0, 0}, // cos rows of tokens 0 and 1
		{0, 0, 1, 1}, // sin
		{9, 9, 9, 9, 9, 9}, {9, 9, 9, 9, 9, 9},
		{0},
	}
	out := evalOutputs(t, g, ins, data, ExactOptions())
	r, s2 := float32(math.Sqrt(12.5)), float32(math.Sqrt2)
	near(t, "q", []float32{3 / r, 4 / r, -s2, 0}, out[0], 1e-6)
	near(t, "gate", []float32{5, 6, 9, 8}, out[1], 0)
	near(t, "k_cache", []float32{s2, 0, -s2, 0, 9, 9}, out[2], 1e-6)
	near(t, "v_cache", []float32{7, 8, 1, 2, 9, 9}, out[3], 0)
}

// TestAttnPrologueRoundsLikeTheComposedPath: with bf16 values and storage
// formats, the normed rows are rounded to bf16 before RoPE (as the
// composed rms_norm stores them) and the rotated values again; in exact
// math neither rounding happens. The two expectations differ, so either
// rounding point missing fails one of the comparisons.
func TestAttnPrologueRoundsLikeTheComposedPath(t *testing.T) {
	const D, R = 32, 16
	g, ins := prologueGraph(t, false, ir.BF16, ir.Shape{1, 1, 2 * D}, ir.Shape{1, 1, D}, ir.Shape{D}, ir.Shape{1, R}, ir.Shape{1, 1, 2, D}, 1e-6, 1)
	wave := func(n int, f float64) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = numerics.RoundBF16(float32(math.Sin(f*float64(i+1)) * 1.7))
		}
		return x
	}
	data := [][]float32{wave(2*D, 1.3), wave(D, 0.7), wave(D, 0.9), wave(D, 0.11), wave(D, 0.13),
		wave(R, 0.37), wave(R, 0.41), make([]float32, 2*D), make([]float32, 2*D), {0}}
	// The normed rows are the composed rms_norm's (normRows, which models
	// the device's reads at storage formats), then rounded as stored.
	want := func(round func(float32) float32, opts Options) []float32 {
		x, w, cos, sin := data[0][:D], data[3], data[5], data[6]
		n := normRows(Tensor{Shape: ir.Shape{1, D}, Data: x}, w, 1e-6, 1, RowSplit{}, opts).Data
		for i := range n {
			n[i] = round(n[i])
		}
		out := append([]float32(nil), n...)
		for i := range R {
			rh := float64(n[(i+R/2)%R])
			if i < R/2 {
				rh = -rh
			}
			out[i] = round(float32(float64(n[i])*float64(cos[i]) + rh*float64(sin[i])))
		}
		return out
	}
	formats, exact := want(numerics.RoundBF16, DefaultOptions()), want(func(x float32) float32 { return x }, ExactOptions())
	if slices.Equal(formats, exact) {
		t.Fatal("test data does not distinguish the rounding points")
	}
	once := want(func(x float32) float32 { return x }, DefaultOptions())
	for i := range once {
		once[i] = numerics.RoundBF16(once[i])
	}
	if slices.Equal(formats, once) {
		t.Fatal("test data does not distinguish rounding the normed rows from rounding only the result")
	}
	near(t, "q at storage formats", formats, evalOutputs(t, g, ins, data, DefaultOptions())[0], 0)
	near(t, "q in exact math", exact, evalOutputs(t, g, ins, data, ExactOptions())[0], 0)
}

// sdpaGatedGraph builds one sdpa_decode_gated (prefill:
// sdpa_prefill_gated) op in fp32.
func sdpaGatedGraph(t *testing.T, prefill bool, q, cache, gate ir.Shape, scale float64) (*ir.Graph, []*ir.Value) {
	t.Helper()
	b := ir.NewBuilder("sdpa")
	ins := []*ir.Value{
		b.Input("q", ir.T(ir.FP32, q...)),
		b.Input("k", ir.T(ir.FP32, cache...)),
		b.Input("v", ir.T(ir.FP32, cache...)),
		b.Input("pos", attnPosType),
		b.Input("gate", ir.T(ir.FP32, gate...)),
	}
	b.Region("attention", 0)
	if prefill {
		b.Output(b.SDPAPrefillGated(ins[0], ins[1], ins[2], ins[3], ins[4], scale))
	} else {
		b.Output(b.SDPADecodeGated(ins[0], ins[1], ins[2], ins[3], ins[4], scale))
	}
	g, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	return g, ins
}

// TestSDPAGatedByHand: keys 0 and ln 3 give softmax weights 1/4 and 3/4,
// so the values 4 and 8 average to 7; sigmoid(0) halves it. Decode: one
// query at position 1 with two heads (the second gated by sigmoid(ln 3) =
// 3/4) sharing one kv head. Prefill: two tokens at positions 0 and 1; the
// first sees only key 0 (value 4). In exact math the results are exact
// to float32; at the storage formats the device's programs (the fused
// one, and with Composed the composed sdpa's) read the fp32 scores,
// probabilities and factors as tf32 (up to 2^-10 relative each).
func TestSDPAGatedByHand(t *testing.T) {
	ln3 := float32(math.Log(3))
	composed := DefaultOptions()
	composed.Composed = true
	for _, mode := range []struct {
		name string
		opts Options
		tol  float64
	}{
		{"exact", ExactOptions(), 1e-5},
		{"formats", DefaultOptions(), 0.02},
		{"formats composed", composed, 0.02},
	} {
		g, ins := sdpaGatedGraph(t, false, ir.Shape{1, 2, 1}, ir.Shape{1, 1, 2, 1}, ir.Shape{1, 2, 1}, 1)
		out := evalOutputs(t, g, ins, [][]float32{{1, 1}, {0, ln3}, {4, 8}, {1}, {0, ln3}}, mode.opts)
		near(t, "decode "+mode.name, []float32{3.5, 5.25}, out[0], mode.tol)

		g, ins = sdpaGatedGraph(t, true, ir.Shape{1, 1, 2, 1}, ir.Shape{1, 1, 2, 1}, ir.Shape{1, 2, 1, 1}, 1)
		out = evalOutputs(t, g, ins, [][]float32{{1, 1}, {0, ln3}, {4, 8}, {0}, {0, 0}}, mode.opts)
		near(t, "prefill "+mode.name, []float32{2, 3.5}, out[0], mode.tol)
	}
}

// TestFusedAttentionErrors: malformed operands give errors naming the
// rule, not panics.
func TestFusedAttentionErrors(t *testing.T) {
	g, _ := prologueGraph(t, false, ir.FP32, ir.Shape{1, 1, 4}, ir.Shape{1, 1, 2}, ir.Shape{2}, ir.Shape{1, 2}, ir.Shape{1, 1, 2, 2}, 0, 1)
	op := g.Regions[0].Ops[0]
	args := []Tensor{NewTensor(ir.Shape{1, 1, 4}), NewTensor(ir.Shape{1, 1, 2}), NewTensor(ir.Shape{1, 1, 2}), NewTensor(ir.Shape{2}), NewTensor(ir.Shape{2}),
		NewTensor(ir.Shape{1, 2}), NewTensor(ir.Shape{1, 2}), NewTensor(ir.Shape{1, 1, 2, 2}), NewTensor(ir.Shape{1, 1, 2, 2}), {Shape: ir.Shape{1}, Data: []float32{2}}}
	if _, err := EvalOp(op, args, ExactOptions()); err == nil || !strings.Contains(err.Error(), "decode-pos") {
		t.Errorf("position 2 of a 2-long cache: got %v, want a decode-pos error", err)
	}
	args[9].Data[0] = 0
	args[5] = NewTensor(ir.Shape{1, 3})
	if _, err := runOp(op, args, ExactOptions()); err == nil || !strings.Contains(err.Error(), "prologue-rope") {
		t.Errorf("odd rotary width: got %v, want a prologue-rope error", err)
	}
	g, _ = sdpaGatedGraph(t, true, ir.Shape{1, 1, 2, 1}, ir.Shape{1, 1, 2, 1}, ir.Shape{1, 2, 1, 1}, 1)
	op = g.Regions[0].Ops[0]
	args = []Tensor{NewTensor(ir.Shape{1, 1, 2, 1}), NewTensor(ir.Shape{1, 1, 2, 1}), NewTensor(ir.Shape{1, 1, 2, 1}), {Shape: ir.Shape{1}, Data: []float32{0}}, NewTensor(ir.Shape{1, 1, 2, 1})}
	if _, err := runOp(op, args, ExactOptions()); err == nil || !strings.Contains(err.Error(), "sdpa-gate") {
		t.Errorf("gate heads-first: got %v, want an sdpa-gate error", err)
	}
}
