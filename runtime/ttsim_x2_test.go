package runtime

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tcc-dev/tcc/codegen"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/runtime/blackhole"
)

// TestTTSimX2Collectives runs meshGraph's all_reduce -> add_scalar ->
// all_gather at 1x2 on ttsim's two-chip library (TCC_TTSIM_X2 names
// bh_x2's libttsim.so, TT_METAL_HOME as for TestTTSimColumnSum), planned
// on the P300's links (topology p300: chip 0 channels 2 and 3, chip 1's
// 9 and 8). Both collectives' worker and ethernet kernels run on both
// chips at once, from different N(0, 1) inputs per chip, and every launch
// of every program, collectives included, must match the simulator bit
// for bit on both chips.
func TestTTSimX2Collectives(t *testing.T) {
	lib, env, ok := ttsimEnvOf(t, "TCC_TTSIM_X2")
	if !ok {
		return
	}
	g, x, _ := meshGraph(t, 2)
	tp, err := target.LookupTopology("p300")
	require.NoError(t, err)
	tt, err := target.Blackhole().WithTopology(tp, 2)
	require.NoError(t, err)
	build, err := codegen.Compile(g, tt)
	require.NoError(t, err)
	m, err := OpenChip("ttsim", g.Mesh, ChipOptions{TTSim: lib, Builder: blackhole.JITBuilder{Env: env}})
	require.NoError(t, err)
	defer m.Close()
	require.NoError(t, m.UseTopology(tp))
	e, err := Load(m, build)
	require.NoError(t, err)
	rng := rand.New(rand.NewPCG(3, 5))
	for d := range 2 {
		data := make([]float32, x.Type.Shape.Numel())
		for i := range data {
			data[i] = float32(rng.NormFloat64())
		}
		require.NoError(t, e.UploadTo(d, x, data))
	}
	require.NoError(t, e.Run())
	colls := 0
	for _, p := range build.Programs {
		if IsCollective(p.Kernel) {
			colls++
		}
	}
	require.Equal(t, 2, colls, "collectives in the build")
	rs := m.ChipResults()
	require.Len(t, rs, 2*len(build.Programs))
	for _, r := range rs {
		if r.Status != "matched" {
			t.Errorf("program %d %s on device %d: %s: %s", r.Index, r.Program, r.Device, r.Status, r.Detail)
		} else {
			t.Logf("program %d %s on device %d: %s", r.Index, r.Program, r.Device, r.Detail)
		}
	}
}
