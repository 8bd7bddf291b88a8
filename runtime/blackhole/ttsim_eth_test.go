package blackhole

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tcc-dev/tcc/codegen/cpp"
	"github.com/tcc-dev/tcc/codegen/hostcfg"
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/runtime/blackhole/chip"
	"github.com/tcc-dev/tcc/runtime/blackhole/jit"
)

// ethSwapProgram is a one-link ring exchange written with tcc's ethernet
// calls: on every chip the kernel on logical channel east sends n bytes at
// src of its L1 to dst of the L1 of the core its link reaches
// (eth_send_bytes, eth_wait_for_receiver_done), and the kernel on
// logical channel west waits for the n bytes the previous chip sends it
// (eth_wait_for_bytes) and releases the sender (eth_receiver_done).
func ethSwapProgram(east, west int, src, dst uint32, n int) *kir.Program {
	p := kir.NewProgram("eth_swap")
	ks := p.AddKernel(&kir.Kernel{Name: "eth_send", Role: kir.RoleReader, Processor: kir.RISCV0, NoC: 0, Cores: []ir.CoreRange{kir.EthRange(east, east)}})
	b := ks.Builder()
	b.EthSendBytes(kir.C(src), kir.C(dst), kir.Ci(n))
	b.EthWaitForReceiverDone()
	kr := p.AddKernel(&kir.Kernel{Name: "eth_recv", Role: kir.RoleWriter, Processor: kir.RISCV0, NoC: 0, Cores: []ir.CoreRange{kir.EthRange(west, west)}})
	b = kr.Builder()
	b.EthWaitForBytes(kir.Ci(n))
	b.EthReceiverDone()
	return p
}

// TestTTSimX2EthSwap runs ethSwapProgram on ttsim's two-chip library
// (TCC_TTSIM_X2, with TT_METAL_HOME for the JIT) over the P300's links,
// planned as topology p300: logical channel 2 (east) and 3 (west) are
// chip 0's channels 2 and 3 and chip 1's 8 and 9, so chip 0 channel 2
// sends to chip 1 channel 9 and chip 1 channel 8 to chip 0 channel 3.
// Each chip sends its own pattern; each receiver's L1 must hold the other
// chip's afterwards.
func TestTTSimX2EthSwap(t *testing.T) {
	lib, home := os.Getenv("TCC_TTSIM_X2"), os.Getenv("TT_METAL_HOME")
	if lib == "" || home == "" {
		t.Skip("set TCC_TTSIM_X2=/path/to/bh_x2/libttsim.so and TT_METAL_HOME=/path/to/tt-metal to run ethernet kernels on ttsim's two chips")
	}
	if _, err := exec.LookPath(jit.DefaultStockGCC); err != nil {
		t.Skipf("%s not on PATH", jit.DefaultStockGCC)
	}
	tp, err := target.LookupTopology("p300")
	require.NoError(t, err)
	tt, err := target.Blackhole().WithTopology(tp, 2)
	require.NoError(t, err)
	east, west := tt.Eth.RingEast[0], tt.Eth.RingWest[0]
	const n = 2048
	src := uint32(tt.Eth.L1UnreservedBase)
	dst := src + n
	p := ethSwapProgram(east, west, src, dst, n)
	cfg, err := hostcfg.Config(p, tt)
	require.NoError(t, err)
	dir := t.TempDir()
	for _, k := range p.Kernels {
		text, err := cpp.PrintKernel(p, k)
		require.NoError(t, err)
		path := filepath.Join(dir, cfg.Kernel(k.Name).Source)
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, text, 0o644))
	}

	tc, err := jit.FindToolchain(jit.ToolchainOptions{TTMetalHome: home})
	require.NoError(t, err)
	cache := os.Getenv("TCC_JIT_CACHE")
	if cache == "" {
		cache = t.TempDir()
	}
	env := &jit.Env{Toolchain: tc, TTMetalHome: home, SFPIInclude: os.Getenv("TCC_JIT_SFPI_INCLUDE"), CacheDir: cache, TTSim: true}
	ds, err := OpenAll(Options{Backend: "ttsim", TTSim: lib, Timeout: 5 * time.Minute}, JITBuilder{Env: env})
	require.NoError(t, err)
	defer func() {
		for _, d := range ds {
			d.Close()
		}
	}()
	require.Len(t, ds, 2, "bh_x2 has two chips")

	pattern := func(chip int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(i*7 + 31*chip + 1)
		}
		return b
	}
	at := func(d *Device, ch int) (x, y int) {
		x, y, err := d.Chip.Target.EthNoC(ch)
		require.NoError(t, err)
		return x, y
	}
	phys := func(chip int) func(int) (int, error) {
		return func(ch int) (int, error) {
			if ch == east {
				return tt.Eth.Ports[chip].East[0], nil
			}
			if ch == west {
				return tt.Eth.Ports[chip].West[0], nil
			}
			return 0, fmt.Errorf("channel %d is not a ring channel", ch)
		}
	}
	for c, d := range ds {
		x, y := at(d, tt.Eth.Ports[c].East[0])
		require.NoError(t, d.Chip.Write(chip.XY{X: x, Y: y}, uint64(src), pattern(c)))
		x, y = at(d, tt.Eth.Ports[c].West[0])
		require.NoError(t, d.Chip.Write(chip.XY{X: x, Y: y}, uint64(dst), make([]byte, n)))
	}
	t0 := time.Now()
	var started []*Written
	for c, d := range ds {
		x, err := d.StartEth(dir, cfg, Reference{}, phys(c))
		require.NoError(t, err, "chip %d", c)
		started = append(started, x)
	}
	for c, x := range started {
		require.NoError(t, x.Wait(), "chip %d", c)
	}
	t.Logf("eth_swap on both chips: %v (kernels built and run)", time.Since(t0))
	for c, d := range ds {
		x, y := at(d, tt.Eth.Ports[c].West[0])
		got := make([]byte, n)
		require.NoError(t, d.Chip.Read(chip.XY{X: x, Y: y}, uint64(dst), got))
		if want := pattern(1 - c); !bytes.Equal(got, want) {
			i := 0
			for i < n && got[i] == want[i] {
				i++
			}
			t.Errorf("chip %d channel %d: received bytes differ from chip %d's pattern from byte %d (got % x..., want % x...)", c, tt.Eth.Ports[c].West[0], 1-c, i, got[i:min(i+8, n)], want[i:min(i+8, n)])
		} else {
			t.Logf("chip %d channel %d received chip %d's %d bytes", c, tt.Eth.Ports[c].West[0], 1-c, n)
		}
	}
}
