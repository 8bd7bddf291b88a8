package qwen27b

import (
	"math"
	"math/rand"
	"strings"

	"github.com/tcc-dev/tcc/ir"
)

// InitWeight draws deterministic random contents (row-major, the value's
// per-device shape) for a weight or state:
//   - decoder, final and q/k norm weights (zero-centred, used as 1 + w): N(0, 0.1^2);
//   - the GDN output norm weight (used as is): 1 + N(0, 0.1^2);
//   - A_log: log(U(1, 16)); dt_bias: N(0, 0.1^2);
//   - conv1d taps: N(0, 1/4) (fan-in 4);
//   - embed_tokens: N(0, 1);
//   - other matrices (projections, lm_head): N(0, 1/fan_in), fan_in = rows
//     of the [in, out] IR weight;
//   - state: conv state and KV cache N(0, 1) (like the activations they
//     hold), recurrent state N(0, 1/Dk);
//   - the device loop's tokens, positions and RoPE tables: zeros (see the
//     case below).
func (Model) InitWeight(v *ir.Value, rng *rand.Rand) []float32 {
	s := v.Type.Shape
	out := make([]float32, s.Numel())
	normal := func(mean, std float64) {
		for i := range out {
			out[i] = float32(mean + std*rng.NormFloat64())
		}
	}
	name := v.Name
	switch {
	case name == LoopTokens || name == LoopPos || name == RopeCosTable || name == RopeSinTable:
		// Zeros, drawing nothing: the host writes the loop state before the
		// first step and DeviceEnv computes the tables (RopeTableRows), so
		// every other value gets the numbers it gets without the loop.
	case v.Kind == ir.KindState && strings.HasSuffix(name, ".recurrent") && s.Rank() == 4:
		normal(0, 1/math.Sqrt(float64(s[2])))
	case v.Kind == ir.KindState:
		normal(0, 1)
	case strings.HasSuffix(name, ".A_log"):
		for i := range out {
			out[i] = float32(math.Log(1 + 15*rng.Float64()))
		}
	case strings.HasSuffix(name, ".dt_bias"):
		normal(0, 0.1)
	case strings.HasSuffix(name, "linear_attn.norm.weight"):
		normal(1, 0.1)
	case strings.HasSuffix(name, "norm.weight"):
		normal(0, 0.1)
	case strings.HasSuffix(name, "conv1d.weight"):
		normal(0, 0.5)
	case strings.HasSuffix(name, "embed_tokens.weight"):
		normal(0, 1)
	case s.Rank() == 2:
		normal(0, 1/math.Sqrt(float64(s[0])))
	default:
		normal(0, 1)
	}
	return out
}

// RopeTables returns the "rope.cos" and "rope.sin" inputs for a decode
// step at position pos: [batch, rotaryDim] row-major, every row
// cos/sin(pos * theta^(-2*(i mod rotaryDim/2)/rotaryDim)) for column i
// (HF's default rotate-half RoPE, inv_freq repeated twice).
func RopeTables(rotaryDim int, theta float64, pos, batch int) (cos, sin []float32) {
	half := rotaryDim / 2
	row := make([]float64, rotaryDim)
	for i := range row {
		invFreq := math.Pow(theta, -2*float64(i%half)/float64(rotaryDim))
		row[i] = float64(pos) * invFreq
	}
	cos = make([]float32, batch*rotaryDim)
	sin = make([]float32, batch*rotaryDim)
	for b := 0; b < batch; b++ {
		for i, a := range row {
			cos[b*rotaryDim+i] = float32(math.Cos(a))
			sin[b*rotaryDim+i] = float32(math.Sin(a))
		}
	}
	return cos, sin
}

// RopePrefillTables returns the prefill "rope.cos" and "rope.sin" inputs
// for seq tokens starting at position pos: [seq, 1, rotaryDim] row-major,
// row s holding RopeTables' row for position pos+s.
func RopePrefillTables(rotaryDim int, theta float64, pos, seq int) (cos, sin []float32) {
	for s := 0; s < seq; s++ {
		c, si := RopeTables(rotaryDim, theta, pos+s, 1)
		cos = append(cos, c...)
		sin = append(sin, si...)
	}
	return cos, sin
}

// RopeTableRows returns the device loop's "rope.cos_table" and
// "rope.sin_table": [maxSeq, rotaryDim] row-major, row p holding
// RopeTables' row for position p (computed the same way, so a row
// gathered by position equals the table the host writes for it).
func RopeTableRows(rotaryDim int, theta float64, maxSeq int) (cos, sin []float32) {
	return RopePrefillTables(rotaryDim, theta, 0, maxSeq)
}
