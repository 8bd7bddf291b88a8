package blackhole

import (
	"encoding/binary"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/tcc-dev/tcc/codegen/hostcfg"
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/runtime/blackhole/access"
	"github.com/tcc-dev/tcc/runtime/blackhole/access/fake"
	"github.com/tcc-dev/tcc/runtime/blackhole/firmware/fwtest"
	"github.com/tcc-dev/tcc/runtime/blackhole/launch"
)

// TestWriteProgramCollective writes a collective-shaped program (a worker
// kernel on core (0,0) and an ethernet kernel on logical channel 2, which
// is physical channel 8 of this chip, each with a semaphore and with the
// other's NoC coordinates as runtime args) to a fake chip and reads back
// what each core's firmware (or, on ttsim, the ethernet kernel's own
// prologue) would read:
//   - each launch message's kernel_config_base[] and sem_offset[] hold
//     both core types' (the worker's pinned-release message at
//     mailbox+16: [TENSIX] at +0 and +12, [ACTIVE_ETH] at +4 and +14; the
//     ethernet core's ttsim-layout message at 0x110: [TENSIX] at +0 and
//     +16, [ACTIVE_ETH] at +4 and +18), so get_semaphore<type>(id) on
//     either finds the other's semaphores;
//   - each core type's semaphore initial value sits at its
//     kernel_config_base + sem_offset on its own cores;
//   - the ethernet core's NoC coordinates in the worker's args are the
//     translated ones of its physical channel (20 + 8, 25), valid on
//     both NoCs; the worker's in the ethernet kernel's args are its NoC0
//     coordinates.
func TestWriteProgramCollective(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, fwtest.WriteSet(dir))
	f := fake.New()
	ds, err := OpenAll(Options{Backend: "fake", Fakes: []access.BAR{f}}, namedImages{dir: dir})
	require.NoError(t, err)
	d := ds[0]
	defer d.Close()

	w0, eth := kir.Core{X: 0, Y: 0}, kir.EthCore(2)
	arg := func(vs ...kir.ArgValue) []hostcfg.ArgValue {
		out := make([]hostcfg.ArgValue, len(vs))
		for i, v := range vs {
			out[i] = hostcfg.ArgValue{ArgValue: v}
		}
		return out
	}
	p := &hostcfg.ProgramConfig{Program: "coll", Kernels: []hostcfg.KernelConfig{
		{Name: "worker", Processor: "RISCV_1", Cores: []hostcfg.CoreRange{{}},
			RuntimeArgs: []hostcfg.CoreArgs{{Core: hostcfg.Core(w0), Values: arg(kir.NoCX(eth), kir.NoCY(eth))}}},
		{Name: "eth", Processor: "RISCV_0", Ethernet: &hostcfg.EthernetConfig{Processor: "RISCV_0"},
			Cores:       []hostcfg.CoreRange{{X0: 2, Y0: kir.EthRow, X1: 2, Y1: kir.EthRow}},
			RuntimeArgs: []hostcfg.CoreArgs{{Core: hostcfg.Core(eth), Values: arg(kir.NoCX(w0), kir.NoCY(w0))}}},
	}, Semaphores: []hostcfg.SemaphoreConfig{
		{ID: 0, Cores: []hostcfg.CoreRange{{X0: 2, Y0: kir.EthRow, X1: 2, Y1: kir.EthRow}}, Initial: 7, CoreType: hostcfg.CoreTypeEth},
		{ID: 0, Cores: []hostcfg.CoreRange{{}}, Initial: 5},
		{ID: 1, Cores: []hostcfg.CoreRange{{}}, Initial: 6},
	}}
	phys := func(ch int) (int, error) { return map[int]int{2: 8}[ch], nil }
	_, err = d.WriteProgram("", p, Reference{}, phys)
	require.NoError(t, err)

	l := d.Chip.Layout
	wxy, err := d.Chip.Worker(w0)
	require.NoError(t, err)
	ex, ey, err := d.Chip.Target.EthNoC(8)
	require.NoError(t, err)
	wm, em := f.L1(wxy.X, wxy.Y), f.L1(ex, ey)
	u32 := func(b []byte, at uint32) uint32 { return binary.LittleEndian.Uint32(b[at:]) }
	u16 := func(b []byte, at uint32) uint32 { return uint32(binary.LittleEndian.Uint16(b[at:])) }
	wl := l.Mailbox.Base + uint32(l.Msg.Launch)
	el := uint32(launch.EthMailboxBase + 16)

	type msg struct{ TensixBase, TensixSem, EthBase, EthSem uint32 }
	wmsg := msg{u32(wm, wl), u16(wm, wl+12), u32(wm, wl+4), u16(wm, wl+14)}
	emsg := msg{u32(em, el), u16(em, el+16), u32(em, el+4), u16(em, el+18)}
	if diff := cmp.Diff(wmsg, emsg); diff != "" {
		t.Errorf("worker and ethernet launch messages disagree on the core types' kernel config bases and semaphore offsets (-worker +ethernet):\n%s", diff)
	}
	if wmsg.TensixBase != l.KernelConfig.Base || wmsg.EthBase != launch.EthKernelConfigBase {
		t.Errorf("kernel_config_base[TENSIX, ACTIVE_ETH] = %#x, %#x, want %#x, %#x", wmsg.TensixBase, wmsg.EthBase, l.KernelConfig.Base, launch.EthKernelConfigBase)
	}
	sems := []uint32{u32(wm, emsg.TensixBase+emsg.TensixSem), u32(wm, emsg.TensixBase+emsg.TensixSem+uint32(l.SemaphoreStride)), u32(em, wmsg.EthBase+wmsg.EthSem)}
	if diff := cmp.Diff([]uint32{5, 6, 7}, sems); diff != "" {
		t.Errorf("semaphores (worker 0, worker 1, ethernet 0) at the launch messages' bases + offsets (-want +got):\n%s", diff)
	}

	// Runtime args: the worker's at its rta_offset[NCRISC], the ethernet
	// kernel's at ttsim's rta_offset[DM0] (+28).
	wrta := wmsg.TensixBase + u16(wm, wl+uint32(l.Launch.RTAOffset)+4*target.ProcNCRISC)
	erta := emsg.EthBase + u16(em, el+28)
	got := []uint32{u32(wm, wrta), u32(wm, wrta+4), u32(em, erta), u32(em, erta+4)}
	want := []uint32{EthTranslatedX0 + 8, EthTranslatedY, uint32(wxy.X), uint32(wxy.Y)}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("runtime args (worker: ethernet core's x, y; ethernet: worker's x, y) (-want +got):\n%s", diff)
	}
}

// TestTTSimEthLaunchOffsets checks that the launch message offsets the
// JIT's ttsim ethernet prologue reads sem_l1_base from
// (target.BlackholeActiveEth's TTSim* fields) are those
// launch.TTSimEthLayout writes.
func TestTTSimEthLaunchOffsets(t *testing.T) {
	l := launch.TTSimEthLayout(target.BlackholeLayout())
	got := []int{int(l.Mailbox.Base), l.Msg.LaunchSize, l.Launch.SemOffset - 2*launch.CoreActiveEth, l.Launch.KernelConfigBase - 4*launch.CoreActiveEth, l.Msg.LaunchRdPtr, l.Msg.Launch}
	a := target.BlackholeActiveEth()
	want := []int{int(a.TTSimMailbox), a.TTSimLaunchSize, a.TTSimSemOffsets, 0, 12, 16}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("mailbox, launch size, sem_offset[0], kernel_config_base[0], rd_ptr, launch[] (-jit +launch):\n%s", diff)
	}
}
