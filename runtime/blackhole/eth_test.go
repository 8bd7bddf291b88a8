package blackhole

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tcc-dev/tcc/codegen/hostcfg"
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/runtime/blackhole/access"
	"github.com/tcc-dev/tcc/runtime/blackhole/access/fake"
	"github.com/tcc-dev/tcc/runtime/blackhole/firmware/fwtest"
	"github.com/tcc-dev/tcc/runtime/blackhole/launch"
)

// TestStartEthLaunchesOnPhysicalChannels starts a two-kernel ethernet
// program (logical channels 2 and 3) on chip 1 of a fake P300 whose
// logical channels map to physical 8 and 9: each kernel's image, runtime
// args and launch message land in the L1 of its physical channel's core,
// where ttsim's bh_x2 reads them (mailbox 0x100: kernel_config_base
// [ACTIVE_ETH] at launch +4 = the active-erisc kernel config ring 0xF330,
// rta_offset[DM0] at +28, kernel_text_offset[DM0] at +52; RUN_MSG_GO at
// 0x590), and the logical channels' own cores get nothing.
func TestStartEthLaunchesOnPhysicalChannels(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, fwtest.WriteSet(dir))
	fs := fake.NewChips(2)
	ds, err := OpenAll(Options{Backend: "fake", Fakes: []access.BAR{fs[0], fs[1]}}, namedImages{dir: dir, seed: map[string]byte{"send": 0x10, "recv": 0x70}})
	require.NoError(t, err)
	defer func() {
		for _, d := range ds {
			d.Close()
		}
	}()
	eth := func(name string, ch int, arg uint32) hostcfg.KernelConfig {
		c := kir.EthCore(ch)
		return hostcfg.KernelConfig{Name: name, Processor: "RISCV_0", Ethernet: &hostcfg.EthernetConfig{Processor: "RISCV_0"},
			Cores:       []hostcfg.CoreRange{{X0: ch, Y0: kir.EthRow, X1: ch, Y1: kir.EthRow}},
			RuntimeArgs: []hostcfg.CoreArgs{{Core: hostcfg.Core(c), Values: []hostcfg.ArgValue{{ArgValue: kir.U32(arg)}}}}}
	}
	p := &hostcfg.ProgramConfig{Program: "eth_pair", Kernels: []hostcfg.KernelConfig{eth("send", 2, 0xA2), eth("recv", 3, 0xA3)}}
	phys := map[int]int{2: 8, 3: 9}
	fs[1].Delay = 1 << 30 // the go messages stay RUN_MSG_GO while the test reads them
	x, err := ds[1].StartEth("", p, Reference{}, func(ch int) (int, error) {
		if q, ok := phys[ch]; ok {
			return q, nil
		}
		return 0, fmt.Errorf("channel %d is not mapped", ch)
	})
	require.NoError(t, err)
	require.NotNil(t, x)

	l1 := func(c *fake.Chip, ch int) []byte {
		nx, ny, err := ds[1].Chip.Target.EthNoC(ch)
		require.NoError(t, err)
		return c.L1(nx, ny)
	}
	u32 := func(b []byte, at int) uint32 { return binary.LittleEndian.Uint32(b[at:]) }
	u16 := func(b []byte, at int) uint32 { return uint32(binary.LittleEndian.Uint16(b[at:])) }
	tests := []struct {
		kernel  string
		ch      int
		seed    byte
		arg     uint32
		logical int
	}{{"send", 8, 0x10, 0xA2, 2}, {"recv", 9, 0x70, 0xA3, 3}}
	for _, tc := range tests {
		t.Run(tc.kernel, func(t *testing.T) {
			m := l1(fs[1], tc.ch)
			launchMsg := launch.EthMailboxBase + 16
			kcb := u32(m, launchMsg+4)
			if kcb != launch.EthKernelConfigBase {
				t.Errorf("kernel_config_base[ACTIVE_ETH] = %#x, want %#x", kcb, launch.EthKernelConfigBase)
			}
			text := kcb + u32(m, launchMsg+52)
			if got := m[text : text+4]; got[0] != tc.seed || got[3] != tc.seed+3 {
				t.Errorf("image at kernel_config_base + kernel_text_offset[DM0] = % x, want the %s image (first byte %#x)", got, tc.kernel, tc.seed)
			}
			if got := u32(m, int(kcb+u16(m, launchMsg+28))); got != tc.arg {
				t.Errorf("runtime arg 0 at kernel_config_base + rta_offset[DM0] = %#x, want %#x", got, tc.arg)
			}
			if got := u32(m, 0x590) >> 24; got != 0x80 {
				t.Errorf("go message at 0x590 = %#x, want RUN_MSG_GO 0x80", got)
			}
			if got := u32(l1(fs[1], tc.logical), 0x590); got != 0 {
				t.Errorf("logical channel %d's own core got go message %#x", tc.logical, got)
			}
			if got := u32(l1(fs[0], tc.ch), 0x590); got != 0 {
				t.Errorf("chip 0 channel %d got go message %#x", tc.ch, got)
			}
		})
	}

	_, err = ds[1].StartEth("", &hostcfg.ProgramConfig{Program: "mixed", Kernels: []hostcfg.KernelConfig{{Name: "w", Processor: "RISCV_0",
		Cores: []hostcfg.CoreRange{{}}}}}, Reference{}, func(ch int) (int, error) { return ch, nil })
	require.ErrorContains(t, err, "program mixed kernel w: not an ethernet kernel")
}
