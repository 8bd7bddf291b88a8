package sfpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// chainKinds are the element-wise chains tcc's programs run one op after
// another on a DEST tile (the lowerings' SFPU steps and the fused ops'
// "ops" attributes; grep c.SFPU, c.Unary and chainSFPUSteps), and a few
// more that exercise LREG pressure and every op.
var chainKinds = [][]Step{
	{{Op: MulScalar, Param: 1.0 / 5120}, {Op: AddScalar, Param: 1e-6}, {Op: Rsqrt}}, // rms norm's 1/sqrt(mean + eps)
	{{Op: MulScalar, Param: 0.088388346}, {Op: MulScalar, Param: 0.088388346}},      // rms_norm_plain_chain (prefill q, k scales)
	{{Op: Exp}, {Op: MulScalar, Param: -1}},                                         // gdn gates: -exp(a_log)
	{{Op: Exp}, {Op: AddScalar, Param: -1}},                                         // gdn recurrence: e^g - 1
	{{Op: Negative}, {Op: Exp}},                                                     // gdn chunk decays
	{{Op: Softplus}, {Op: MulScalar, Param: -0.5}},
	{{Op: SiLU}, {Op: MulScalar, Param: 0.5}},
	{{Op: Sigmoid}, {Op: Recip}},
	{{Op: Square}, {Op: MulScalar, Param: 1.0 / 128}, {Op: AddScalar, Param: 1e-6}, {Op: Sqrt}},
	{{Op: Rsqrt}, {Op: Exp}, {Op: Log}}, // every LREG: most constants go inline (not faster: slowChains)
	{{Op: Abs}, {Op: Relu}, {Op: Negative}, {Op: Softplus}},
	{{Op: Exp}},
}

// slowChains are chainKinds whose fused program is not faster than the
// per-op passes: each step needs nearly every LREG, so the chain loads
// most constants every iteration where the steps' own programs load them
// once per face.
var slowChains = map[string]bool{"rsqrt_then_exp_then_log": true}

// chainInputs are random fp32 bit patterns (every class: NaN, Inf,
// denormals) and values of moderate magnitude, both signs.
func chainInputs(n int) []float32 {
	r := rand.New(rand.NewPCG(33, 1))
	xs := []float32{0, float32(math.Copysign(0, -1)), 1, -1, float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), 0x1p-130, -0x1p-130, 88.7, -87.3, 20, 1e-30}
	for len(xs) < n {
		if len(xs)%2 == 0 {
			xs = append(xs, math.Float32frombits(r.Uint32()))
		} else {
			xs = append(xs, float32(r.NormFloat64()*math.Exp2(float64(r.IntN(20)-10))))
		}
	}
	return xs
}

// A chain's one program computes, bit for bit, what the steps' own
// programs (the instructions the simulator executes per op) compute one
// after the other, in an fp32 DEST and in a bf16 one (where each step's
// SFPSTORE truncated), and in fewer instructions and cycles than the
// per-op passes.
func TestChainProgram(t *testing.T) {
	xs := chainInputs(4000)
	for _, steps := range chainKinds {
		for _, fp32 := range []bool{true, false} {
			name := ChainName(steps)
			if !fp32 {
				name += "/bf16"
			}
			t.Run(name, func(t *testing.T) {
				p, err := ChainProgram(steps, fp32)
				require.NoError(t, err)
				for _, x0 := range xs {
					if !fp32 {
						x0 = math.Float32frombits(denormFlush(math.Float32bits(x0)) & 0xffff0000)
					}
					want := x0
					for _, s := range steps {
						want = Programs[s.Op].EvalDest(want, s.Param, fp32)
					}
					got := p.EvalDest(x0, 0, fp32)
					if math.Float32bits(got) != math.Float32bits(want) {
						t.Fatalf("x = %g (%08x): chain gives %g (%08x), the steps one after the other %g (%08x)", x0, math.Float32bits(x0), got, math.Float32bits(got), want, math.Float32bits(want))
					}
				}
				if len(steps) < 2 || slowChains[ChainName(steps)] {
					return
				}
				insns := 0
				for _, s := range steps {
					insns += len(Programs[s.Op].Body)
				}
				if fp32 && len(p.Body) >= insns {
					t.Errorf("fused body has %d instructions, the steps' bodies %d together", len(p.Body), insns)
				}
				if fused, perOp := ChainCycles(p, steps); fused >= perOp {
					t.Errorf("fused chain %g cycles per tile, the per-op passes %g", fused, perOp)
				}
			})
		}
	}
}

func denormFlush(u uint32) uint32 {
	if u&0x7fffffff < 0x800000 {
		return u & 0x80000000
	}
	return u
}

// A chain of one step is the step's program; a binary op or an empty
// chain is an error naming it.
func TestChainProgramErrors(t *testing.T) {
	p, err := ChainProgram([]Step{{Op: Exp}}, true)
	require.NoError(t, err)
	if got, want := len(p.Body), len(Programs[Exp].Body); got != want {
		t.Errorf("one-step chain: %d instructions, exp's program %d", got, want)
	}
	for _, steps := range [][]Step{nil, {{Op: Exp}, {Op: AddBinary}}} {
		if _, err := ChainProgram(steps, true); err == nil {
			t.Errorf("ChainProgram(%v): no error", steps)
		}
	}
}
