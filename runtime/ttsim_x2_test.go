package runtime

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tcc-dev/tcc/codegen"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
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

// TestTTSimX2StreamingAllReduce runs an all_reduce of [1, 64, 5120] bf16
// at 1x2 on ttsim's two-chip library (TCC_TTSIM_X2), planned on the
// P300's links: large enough to stream, so the ring runs each link both
// ways, the way back on ERISC1 (eth_sender_back, eth_receiver_back;
// ttsim starts ERISC1 through the runtime's trampoline,
// blackhole/ttsimerisc1.go). Every launch must match the simulator bit
// for bit on both chips.
func TestTTSimX2StreamingAllReduce(t *testing.T) {
	lib, env, ok := ttsimEnvOf(t, "TCC_TTSIM_X2")
	if !ok {
		return
	}
	b := ir.NewBuilder("ccl")
	b.G.Mesh = ir.Mesh{Rows: 1, Cols: 2}
	x := b.Input("x", ir.T(ir.BF16, 1, 64, 5120))
	b.Region("ccl", 0)
	b.Output(b.AllReduce(x, 2))
	g, err := b.Finish()
	require.NoError(t, err)
	tp, err := target.LookupTopology("p300")
	require.NoError(t, err)
	tt, err := target.Blackhole().WithTopology(tp, 2)
	require.NoError(t, err)
	build, err := codegen.Compile(g, tt)
	require.NoError(t, err)
	var erisc1 []string
	for _, p := range build.Programs {
		for _, k := range p.Kernel.Kernels {
			if k.Processor.String() == "RISCV_1" && strings.HasPrefix(k.Name, "eth_") {
				erisc1 = append(erisc1, k.Name)
			}
		}
	}
	require.ElementsMatch(t, []string{"eth_sender_back", "eth_receiver_back"}, erisc1, "the all_reduce streams both ways (ERISC1 kernels)")
	m, err := OpenChip("ttsim", g.Mesh, ChipOptions{TTSim: lib, Builder: blackhole.JITBuilder{Env: env}, Timeout: 20 * time.Millisecond})
	require.NoError(t, err)
	defer m.Close()
	require.NoError(t, m.UseTopology(tp))
	e, err := Load(m, build)
	require.NoError(t, err)
	rng := rand.New(rand.NewPCG(7, 11))
	for d := range 2 {
		data := make([]float32, x.Type.Shape.Numel())
		for i := range data {
			data[i] = float32(rng.NormFloat64())
		}
		require.NoError(t, e.UploadTo(d, x, data))
	}
	require.NoError(t, e.Run())
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
