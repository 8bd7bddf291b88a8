package runtime

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tcc-dev/tcc/codegen"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/runtime/blackhole"
)

// TestTTSimGDNConvGates runs the decode's gdn_conv_gates program (the
// small config's conv: 4 taps over 1,024 channels, 8 heads) on ttsim at
// B = 1 and 4, from N(0, 1) activations and states and N(0, 0.5) taps,
// three launches each (the conv state advancing): every launch must match
// the simulator bit for bit. Before the simulator pooled reduce_tile's
// column sum as GAPOOL does (numerics.PoolTile) 3 to 9 of the conv's
// outputs differed by 1 to 3 bf16 ulp per launch (the small config's
// decode on ttsim). TCC_TTSIM and TT_METAL_HOME as for TestTTSimColumnSum.
func TestTTSimGDNConvGates(t *testing.T) {
	for _, B := range []int{1, 4} {
		t.Run(fmt.Sprintf("B=%d", B), func(t *testing.T) {
			lib, env, ok := ttsimEnv(t) // each B in a process of its own
			if !ok {
				return
			}
			const C, K, H = 1024, 4, 8
			b := ir.NewBuilder("gdn_conv")
			b.Region(ir.RegionKind("gdn"), 0)
			st := b.State("conv_state", ir.T(ir.BF16, B, K-1, C))
			ins := []*ir.Value{st, b.Input("qkv", ir.T(ir.BF16, B, 1, C)), b.Weight("taps", ir.T(ir.BF16, K, C)),
				b.Input("a", ir.T(ir.BF16, B, 1, H)), b.Input("b", ir.T(ir.BF16, B, 1, H)),
				b.Weight("a_log", ir.T(ir.BF16, H)), b.Weight("dt_bias", ir.T(ir.BF16, H))}
			rs := b.GDNConvGates(ins[0], ins[1], ins[2], ins[3], ins[4], ins[5], ins[6])
			require.NoError(t, b.Err())
			b.UpdateState(st, rs[1])
			b.Output(rs[0], rs[2], rs[3])
			g, err := b.Finish()
			require.NoError(t, err)
			build, err := codegen.Compile(g, target.Blackhole())
			require.NoError(t, err)
			m, err := OpenChip("ttsim", g.Mesh, ChipOptions{TTSim: lib, Builder: blackhole.JITBuilder{Env: env}})
			require.NoError(t, err)
			defer m.Close()
			e, err := Load(m, build)
			require.NoError(t, err)
			rng := rand.New(rand.NewPCG(uint64(B), 7))
			for step := range 3 {
				for i, v := range ins {
					if step > 0 && i != 1 {
						continue // the state carries over; new qkv each step
					}
					data := make([]float32, v.Type.Shape.Numel())
					for j := range data {
						data[j] = float32(rng.NormFloat64())
						if i == 2 {
							data[j] *= 0.5
						}
						if i == 5 {
							data[j] = float32(math.Abs(float64(data[j])))
						}
					}
					require.NoError(t, e.Upload(v, data))
				}
				require.NoError(t, e.Run())
			}
			rs2 := m.ChipResults()
			require.Len(t, rs2, 3*len(build.Programs))
			for _, r := range rs2 {
				if r.Status != "matched" {
					t.Errorf("program %d %s launch %d: %s: %s", r.Index, r.Program, r.Launch, r.Status, r.Detail)
				}
			}
		})
	}
}
