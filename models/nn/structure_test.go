package nn

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tcc-dev/tcc/ir"
)

func opNames(g *ir.Graph) string {
	var s []string
	for _, op := range g.Ops() {
		s = append(s, op.Name())
	}
	return strings.Join(s, " ")
}

// TestGDNDecodeSequence pins the GDN mixer's op sequence and its parts (on
// two devices, fp32 state, GQA): the sequence that models/qwen27b's doc
// compares with the composed path.
func TestGDNDecodeSequence(t *testing.T) {
	d := testGDN
	d.KeyHeads, d.ValueHeads = 1, 2
	bl := gdnBlock(t, d, 2)
	want := strings.Join([]string{
		"matmul matmul matmul matmul",               // in_proj
		"concat slice mul sum silu",                 // conv
		"slice slice slice reshape reshape reshape", // split
		"repeat_interleave repeat_interleave reshape reshape reshape",
		"sigmoid reshape exp mul_scalar add softplus mul reshape", // gates
		"typecast typecast typecast typecast typecast",            // recurrence
		"rms_norm_plain mul_scalar rms_norm_plain mul_scalar mul_scalar",
		"reshape reshape reshape reshape reshape",
		"to_memory exp mul bmm sub reshape to_memory to_memory bmm mul add bmm",
		"to_memory",                         // state_copy
		"reshape rms_norm reshape silu mul", // norm_gate
		"matmul all_reduce",                 // out_proj
	}, " ")
	if got := opNames(bl.g); got != want {
		t.Errorf("ops:\n got %s\nwant %s", got, want)
	}
	wantParts := []Part{{"in_proj", 4}, {"conv", 5}, {"split", 11}, {"gates", 8}, {"recurrence", 27}, {"state_copy", 1}, {"norm_gate", 5}, {"out_proj", 2}}
	if diff := cmp.Diff(wantParts, bl.tally.Parts); diff != "" {
		t.Errorf("parts (-want +got):\n%s", diff)
	}
	// Without GQA and with a bf16 state the repeats and typecasts go.
	d.KeyHeads, d.StateDType = 2, ir.BF16
	bl = gdnBlock(t, d, 1)
	if got := bl.tally.Sum(); got != 63-2-5-1 {
		t.Errorf("bf16, no GQA, one device: %d ops, want %d", got, 63-2-5-1)
	}
}

func TestAttentionDecodeSequence(t *testing.T) {
	bl := attnBlock(t, testAttn, 2)
	rope := "slice transpose rotary transpose to_memory slice to_memory concat"
	want := strings.Join([]string{
		"matmul matmul matmul", // qkv_proj
		"reshape slice slice reshape reshape to_memory to_memory to_memory", // heads
		"rms_norm rms_norm", // qk_norm
		rope, rope,
		"pad to_memory pad to_memory update_cache update_cache", // kv_update
		"sdpa_decode", "sigmoid mul",
		"reshape matmul all_reduce", // o_proj
	}, " ")
	if got := opNames(bl.g); got != want {
		t.Errorf("ops:\n got %s\nwant %s", got, want)
	}
	if got := bl.tally.Sum(); got != 41 {
		t.Errorf("attention mixer: %d ops, want 41", got)
	}
	// Full rotary: the pass-through slice, its reshard and the concat go.
	d := testAttn
	d.RotaryDim = d.HeadDim
	if got := attnBlock(t, d, 1).tally.Sum(); got != 41-1-2*3 {
		t.Errorf("full rotary, one device: %d ops, want %d", got, 41-1-2*3)
	}
}

// TestDist checks the recorded distributions of the declared values and of
// results whose dims move.
func TestDist(t *testing.T) {
	bl := attnBlock(t, testAttn, 2)
	for name, want := range map[string]ir.Dist{
		"l.self_attn.q_proj.weight": {Axis: 1},
		"l.self_attn.o_proj.weight": {Axis: 0},
		"l.self_attn.q_norm.weight": ir.Replicated,
		"s.k_cache":                 {Axis: 1},
		"rope.cos":                  ir.Replicated,
	} {
		if got := bl.byName[name].Type.Dist; got != want {
			t.Errorf("%s: dist %s, want %s", name, got, want)
		}
	}
	for _, op := range bl.g.Ops() {
		switch op.Kind {
		case ir.OpSDPADecode, ir.OpRotary:
			if want := map[ir.OpKind]int{ir.OpSDPADecode: 1, ir.OpRotary: 0}[op.Kind]; op.Result().Type.Dist.Axis != want {
				t.Errorf("%s: result dist %s, want split(%d)", op.Name(), op.Result().Type.Dist, want)
			}
		case ir.OpAllReduce:
			if !op.Result().Type.Dist.IsReplicated() {
				t.Errorf("all_reduce result is %s", op.Result().Type.Dist)
			}
		}
	}
	one := attnBlock(t, testAttn, 1)
	for _, v := range one.g.Weights {
		if !v.Type.Dist.IsReplicated() {
			t.Errorf("one device: %s is %s", v.Name, v.Type.Dist)
		}
	}
}

func TestHeightSharded(t *testing.T) {
	tests := []struct {
		shape       ir.Shape
		grid, shard []int
	}{
		{ir.Shape{1, 32, 256}, []int{0, 0, 0, 0}, []int{32, 256}}, // one user, heads padded to a tile
		{ir.Shape{4, 2, 256}, []int{0, 0, 3, 0}, []int{32, 256}},  // one user per core
		{ir.Shape{12, 32, 64}, []int{0, 0, 7, 1}, []int{32, 64}},  // 12 tiles on 8x2 cores
		{ir.Shape{100, 32, 64}, []int{0, 0, 7, 9}, []int{64, 64}}, // 100 tiles on 80 cores
		{ir.Shape{3, 40, 64}, []int{0, 0, 5, 0}, []int{32, 64}},   // 40 rows pad to 64: 2 tiles a user
	}
	for _, tc := range tests {
		t.Run(tc.shape.String(), func(t *testing.T) {
			b := ir.NewBuilder("t")
			x := b.Input("x", ir.T(ir.BF16, tc.shape...))
			y := toHeightSharded(b, x)
			if b.Err() != nil {
				t.Fatal(b.Err())
			}
			s := y.Type.Mem.Shard
			if s == nil {
				t.Fatalf("no shard spec: %s", y.Type.Mem)
			}
			got := struct{ Grid, Shard []int }{[]int{s.Grid.X0, s.Grid.Y0, s.Grid.X1, s.Grid.Y1}, s.Shape[:]}
			want := struct{ Grid, Shard []int }{tc.grid, tc.shard}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestShareCut(t *testing.T) {
	// whole [2, 6]: rows r, cols c hold 10*r + c.
	whole := make([]float32, 12)
	for i := range whole {
		whole[i] = float32(10*(i/6) + i%6)
	}
	shape := ir.Shape{2, 6}
	tests := []struct {
		name            string
		share           Share
		device, devices int
		want            []float32
		wantShape       ir.Shape
	}{
		{"replicated", Replicate, 1, 2, whole, shape},
		{"cols device 1", Split(1, 2), 1, 2, []float32{3, 4, 5, 13, 14, 15}, ir.Shape{2, 3}},
		{"rows device 0", Split(0, 2), 0, 2, []float32{0, 1, 2, 3, 4, 5}, ir.Shape{1, 6}},
		{"blocks 2|4 device 1", Share{Axis: 1, Blocks: []int{2, 4}, Parts: 2}, 1, 2, []float32{1, 4, 5, 11, 14, 15}, ir.Shape{2, 3}},
		{"replicated parts: device 3 of 4 holds part 1 of 2", Split(1, 2), 3, 4, []float32{3, 4, 5, 13, 14, 15}, ir.Shape{2, 3}},
		{"pad 2 device 1", Share{Axis: 1, Parts: 2, Pad: 2}, 1, 2, []float32{4, 5, 0, 0, 14, 15, 0, 0}, ir.Shape{2, 4}},
		{"pad on one device", Share{Axis: 1, Parts: 1, Pad: 2}, 0, 1, []float32{0, 1, 2, 3, 4, 5, 0, 0, 10, 11, 12, 13, 14, 15, 0, 0}, ir.Shape{2, 8}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, s, err := tc.share.Cut(whole, shape, tc.device, tc.devices)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" || !s.Equal(tc.wantShape) {
				t.Errorf("shape %s (want %s), values (-want +got):\n%s", s, tc.wantShape, diff)
			}
		})
	}
	for _, bad := range []Share{{Axis: 1, Parts: 4}, {Axis: 1, Blocks: []int{2, 2}, Parts: 2}, {Axis: 2, Parts: 2}} {
		if _, _, err := bad.Cut(whole, shape, 0, 4); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

// TestGDNPrefillGatesInStateDType: the prefill's log decay g =
// -exp(A_log) * softplus(a + dt_bias) is computed in the state dtype (fp32,
// as HF's mamba_ssm_dtype float32 computes it), not in the activations'
// bf16. Its in-chunk cumulative sums reach hundreds, and the decays exp(g)
// are exponentials of them: a bf16 g (8 significant bits) costs the small
// config's 700-token prompt its fp32 check (logits PCC 0.9867 in the step
// at 448..511 against 0.9993 with an fp32 g). beta = sigmoid(b) is cast to
// the state dtype among the gates too (before its transpose, so that
// passes' FuseGDNPrefillGates finds a token's two gates together). With a
// bf16 state nothing is cast.
func TestGDNPrefillGatesInStateDType(t *testing.T) {
	for _, tc := range []struct {
		state ir.DType
		casts int
	}{{ir.FP32, 4}, {ir.BF16, 0}} {
		t.Run(tc.state.String(), func(t *testing.T) {
			d := testGDN
			d.StateDType = tc.state
			bl := gdnPrefillBlock(t, d, 40)
			casts := 0
			var kinds []string
			for _, op := range bl.partOps(t, "gates") {
				switch op.Kind {
				case ir.OpTypecast:
					casts++
				case ir.OpAdd, ir.OpSoftplus, ir.OpExp, ir.OpMulScalar, ir.OpMul:
					kinds = append(kinds, op.Name())
					if dt := op.Result().Type.DType; dt != tc.state {
						t.Errorf("%s: result %s, want %s", op.Name(), dt, tc.state)
					}
				}
			}
			if diff := cmp.Diff([]string{"exp", "mul_scalar", "add", "softplus", "mul"}, kinds); diff != "" {
				t.Errorf("gate ops (-want +got):\n%s", diff)
			}
			if casts != tc.casts {
				t.Errorf("%d typecasts in the gates, want %d (a, A_log, dt_bias, beta)", casts, tc.casts)
			}
		})
	}
}
