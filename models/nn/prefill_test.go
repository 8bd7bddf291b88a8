package nn

import (
	"math"
	"math/rand"
	"testing"

	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/models/nn/nntest"
)

// decodeSteps runs the one-token block bl S times over x [B, S, H] (row s
// is step s), feeding its state updates back, and returns the outputs
// stacked to [B, S, H] and the final states by name. setStep sets the
// per-step inputs other than "x".
func decodeSteps(t *testing.T, bl block, w whole, x nntest.Tensor, setStep func(w whole, s int)) (nntest.Tensor, map[string][]float64) {
	t.Helper()
	B, S, H := x.Shape[0], x.Shape[1], x.Shape[2]
	out := nntest.New(B, S, H)
	for s := 0; s < S; s++ {
		xs := nntest.New(B, 1, H)
		for b := 0; b < B; b++ {
			copy(xs.Data[b*H:(b+1)*H], x.Data[(b*S+s)*H:])
		}
		w["x"] = xs
		setStep(w, s)
		envs := bl.envs(t, w, func(string) Share { return Replicate })
		if err := nntest.Run(bl.g, envs); err != nil {
			t.Fatal(err)
		}
		y := envs[0][bl.out]
		for b := 0; b < B; b++ {
			copy(out.Data[(b*S+s)*H:(b*S+s+1)*H], y.Data[b*H:(b+1)*H])
		}
		for _, st := range bl.g.States {
			w[st.Name] = envs[0][bl.g.StateUpdates[st]]
		}
	}
	states := map[string][]float64{}
	for _, st := range bl.g.States {
		states[st.Name] = w[st.Name].Data
	}
	return out, states
}

// TestGDNPrefillMatchesDecode checks the chunked form against S decode
// steps: one partial chunk, whole chunks, and several chunks with padding.
func TestGDNPrefillMatchesDecode(t *testing.T) {
	for _, tc := range []struct{ seq, chunk int }{{3, 0}, {8, 4}, {10, 4}} {
		d := testGDN
		d.Chunk = tc.chunk
		pre := buildBlock(t, 1, func(c Ctx) *ir.Value {
			x := c.B.Input("x", ir.T(ir.BF16, d.Batch, tc.seq, d.Hidden))
			return GDNPrefill(c, x, DeclareGDN(c.B, "l.", d, c.TP), DeclareGDNState(c.B, "s", d, c.TP), d)
		})
		dec := gdnBlock(t, d, 1)
		w := gdnWhole(rand.New(rand.NewSource(int64(tc.seq))), dec)
		x := randTensor(rand.New(rand.NewSource(5)), ir.Shape{d.Batch, tc.seq, d.Hidden}, 0, 1)
		w["x"] = x
		envs := pre.envs(t, w, func(string) Share { return Replicate })
		if err := nntest.Run(pre.g, envs); err != nil {
			t.Fatal(err)
		}
		want, states := decodeSteps(t, dec, w, x, func(whole, int) {})
		// The decode chain rounds its states to float32 between steps.
		closeTo(t, "y", want.Data, envs[0][pre.out].Data, 1e-6)
		for _, s := range pre.g.States {
			closeTo(t, s.Name, states[s.Name], envs[0][pre.g.StateUpdates[s]].Data, 1e-6)
		}
	}
}

func ropePrefill(seq, r, pos int, f func(float64) float64) nntest.Tensor {
	t := nntest.New(seq, 1, r)
	for s := 0; s < seq; s++ {
		row := ropeTable(f, 1, r, pos+s)
		copy(t.Data[s*r:], row.Data)
	}
	return t
}

// TestAttentionPrefillMatchesDecode prefills S tokens after pos cached
// ones and compares with S decode steps.
func TestAttentionPrefillMatchesDecode(t *testing.T) {
	const seq, pos = 4, 3
	d := testAttn
	pre := buildBlock(t, 1, func(c Ctx) *ir.Value {
		x := c.B.Input("x", ir.T(ir.BF16, d.Batch, seq, d.Hidden))
		return GatedAttentionPrefill(c, x, DeclareAttention(c.B, "l.", d, c.TP), DeclareKVCache(c.B, "s", d, c.TP), DeclareRopePrefill(c.B, seq, d.RotaryDim), d)
	})
	dec := attnBlock(t, d, 1)
	w := attnWhole(rand.New(rand.NewSource(11)), dec, d, pos)
	x := randTensor(rand.New(rand.NewSource(12)), ir.Shape{d.Batch, seq, d.Hidden}, 0, 1)
	w["x"] = x
	w["pos"] = nntest.Tensor{Shape: ir.Shape{1}, Data: []float64{pos}}
	w["rope.cos"] = ropePrefill(seq, d.RotaryDim, pos, math.Cos)
	w["rope.sin"] = ropePrefill(seq, d.RotaryDim, pos, math.Sin)
	envs := pre.envs(t, w, func(string) Share { return Replicate })
	if err := nntest.Run(pre.g, envs); err != nil {
		t.Fatal(err)
	}
	want, states := decodeSteps(t, dec, w, x, func(w whole, s int) {
		w["pos"] = nntest.Tensor{Shape: ir.Shape{1}, Data: []float64{float64(pos + s)}}
		w["rope.cos"] = ropeTable(math.Cos, d.Batch, d.RotaryDim, pos+s)
		w["rope.sin"] = ropeTable(math.Sin, d.Batch, d.RotaryDim, pos+s)
	})
	closeTo(t, "y", want.Data, envs[0][pre.out].Data, 1e-6)
	for _, s := range pre.g.States {
		closeTo(t, s.Name, states[s.Name], envs[0][pre.g.StateUpdates[s]].Data, 1e-6)
	}
}
