package blackhole

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/tcc-dev/tcc/codegen/hostcfg"
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/runtime/blackhole/access"
	"github.com/tcc-dev/tcc/runtime/blackhole/access/fake"
	"github.com/tcc-dev/tcc/runtime/blackhole/firmware"
	"github.com/tcc-dev/tcc/runtime/blackhole/firmware/fwtest"
)

// ethFWImages is namedImages that also builds an active-erisc firmware
// set: each ERISC's text (fwtest.Pattern of 0x30 + i) at its firmware
// base and 32 B of local data.
type ethFWImages struct{ namedImages }

func (b ethFWImages) EthFirmware() (firmware.EthSet, error) {
	a := target.BlackholeActiveEth()
	local := [2]uint32{0xFFB00000 + a.BaseFWLocal, 0xFFB00000}
	var s firmware.EthSet
	for i := range s {
		s[i] = &firmware.Image{Processor: i, Path: firmware.EthNames[i], Segments: []firmware.Segment{
			{Addr: a.FirmwareBase[i], Data: fwtest.Pattern(0x30+i, 256)},
			{Addr: local[i], Data: fwtest.Pattern(0x40+i, 32)},
		}}
	}
	return s, nil
}

// TestCardEthFirmwareLoad runs two ethernet programs on chip 0 of two
// cabled fake chips that play a card's ethernet cores (fake.Chip.CardEth:
// a go message to a core whose active-erisc firmware was not started is
// an error there). The first program has kernels on both ERISCs of
// channel 2 (ERISC0 and ERISC1: both directions of its link) and ERISC0
// of channel 3. Before it launches, each of the two cores gets the
// firmware load of blackhole-runtime's protocol (firmware.BootEth): the
// core_info (ACTIVE_ETH magic, logical (0, channel)), both ERISCs'
// images at their firmware bases, ERISC1's local data at its init
// scratch, and the base firmware's mailbox message RELEASE_CORE with
// the ERISC0 firmware base, which the fake acks once the images, the
// soft reset hold and RUN_MSG_INIT are in place. The launch is in the
// pinned release's layout (launch.CardEthLayout: go message at 0x490,
// kernel_config_base[ACTIVE_ETH] at launch +4, enables DM0|DM1 on
// channel 2). The second program loads nothing again.
func TestCardEthFirmwareLoad(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, fwtest.WriteSet(dir))
	fs := fake.NewChips(2)
	for _, f := range fs {
		f.CardEth = true
	}
	require.NoError(t, fake.Cable(fs[0], 2, fs[1], 9))
	require.NoError(t, fake.Cable(fs[0], 3, fs[1], 8))
	b := ethFWImages{namedImages{dir: dir, seed: map[string]byte{"e0": 0x10, "e1": 0x50, "f0": 0x90}}}
	ds, err := OpenAll(Options{Backend: "fake", Fakes: []access.BAR{fs[0], fs[1]}, CardEth: true, Timeout: time.Second}, b)
	require.NoError(t, err)
	defer func() {
		for _, d := range ds {
			d.Close()
		}
	}()
	eth := func(name, proc string, ch int) hostcfg.KernelConfig {
		return hostcfg.KernelConfig{Name: name, Processor: proc, Ethernet: &hostcfg.EthernetConfig{Processor: proc},
			Cores: []hostcfg.CoreRange{{X0: ch, Y0: kir.EthRow, X1: ch, Y1: kir.EthRow}}}
	}
	identity := func(ch int) (int, error) { return ch, nil }
	p := &hostcfg.ProgramConfig{Program: "both_ways", Kernels: []hostcfg.KernelConfig{eth("e0", "RISCV_0", 2), eth("e1", "RISCV_1", 2), eth("f0", "RISCV_0", 3)}}
	x, err := ds[0].StartEth("", p, Reference{}, identity)
	require.NoError(t, err)
	require.NoError(t, x.Wait())
	x, err = ds[0].StartEth("", &hostcfg.ProgramConfig{Program: "again", Kernels: []hostcfg.KernelConfig{eth("e0", "RISCV_0", 2)}}, Reference{}, identity)
	require.NoError(t, err)
	require.NoError(t, x.Wait())
	require.Empty(t, fs[0].Errors)

	a, l := target.BlackholeActiveEth(), target.BlackholeLayout()
	xy := func(ch int) fake.XY {
		nx, ny, err := ds[0].Chip.Target.EthNoC(ch)
		require.NoError(t, err)
		return fake.XY{X: nx, Y: ny}
	}
	if diff := cmp.Diff([]fake.XY{xy(2), xy(3)}, fs[0].EthBoots); diff != "" {
		t.Errorf("cores whose firmware was started, in order, once each (-want +got):\n%s", diff)
	}
	require.Empty(t, fs[1].EthBoots, "chip 1 ran nothing")
	require.Len(t, fs[0].EthLaunches, 3)
	u32 := func(b []byte, at uint32) uint32 { return binary.LittleEndian.Uint32(b[at:]) }
	for _, tc := range []struct {
		ch      int
		enables uint32
		images  map[int]byte // processor -> first byte of its image
	}{{2, 0b11, map[int]byte{0: 0x10, 1: 0x50}}, {3, 0b01, map[int]byte{0: 0x90}}} {
		t.Run("channel "+string(rune('0'+tc.ch)), func(t *testing.T) {
			m := fs[0].L1(xy(tc.ch).X, xy(tc.ch).Y)
			ci := a.MailboxBase + uint32(a.CoreInfo)
			got := []uint32{
				u32(m, ci+uint32(l.Msg.CoreInfoMagic)), uint32(m[ci+uint32(l.Msg.CoreInfoLogicalX)+1]),
				u32(m, a.FWMailbox), u32(m, a.FWMailbox+4),
				uint32(m[a.FirmwareBase[0]]), uint32(m[a.FirmwareBase[1]]), uint32(m[a.InitScratch[1]]),
			}
			want := []uint32{a.CoreMagic, uint32(tc.ch), 0xD0E50002, 0x3330, uint32(fwtest.Pattern(0x30, 1)[0]), uint32(fwtest.Pattern(0x31, 1)[0]), uint32(fwtest.Pattern(0x41, 1)[0])}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("core_info magic, logical y, base firmware mailbox word and argument, ERISC0 and ERISC1 firmware text, ERISC1 local data (-want +got):\n%s", diff)
			}
			var ln *fake.EthLaunch
			for i := range fs[0].EthLaunches {
				if fs[0].EthLaunches[i].Core == xy(tc.ch) {
					ln = &fs[0].EthLaunches[i]
					break
				}
			}
			require.NotNil(t, ln, "no launch on channel %d", tc.ch)
			msg := ln.L1[a.MailboxBase+uint32(l.Msg.Launch):]
			kcb := u32(msg, 4)
			if kcb != a.KernelConfigBase || u32(msg, uint32(l.Launch.Enables)) != tc.enables {
				t.Errorf("kernel_config_base[ACTIVE_ETH] %#x enables %#b, want %#x %#b", kcb, u32(msg, uint32(l.Launch.Enables)), a.KernelConfigBase, tc.enables)
			}
			for proc, seed := range tc.images {
				text := kcb + u32(msg, uint32(l.Launch.KernelTextOffset+4*proc))
				if ln.L1[text] != seed {
					t.Errorf("ERISC%d image at kernel_config_base + kernel_text_offset[DM%d] starts %#x, want %#x", proc, proc, ln.L1[text], seed)
				}
			}
			if g := m[a.MailboxBase+uint32(l.Msg.GoMessages)+3]; g != l.RunMsgDone {
				t.Errorf("go signal at 0x490 = %#x, want RUN_MSG_DONE", g)
			}
		})
	}

	// A builder without the ethernet firmware cannot run ethernet kernels
	// on a card.
	ds2, err := OpenAll(Options{Backend: "fake", Fakes: []access.BAR{fake.New()}, CardEth: true}, b.namedImages)
	require.NoError(t, err)
	defer ds2[0].Close()
	_, err = ds2[0].StartEth("", p, Reference{}, identity)
	require.ErrorContains(t, err, "need the active-erisc firmware")
}

// TestTTSimERISC1Refused: on chips that play ttsim's ethernet cores (no
// firmware; RUN_MSG_GO starts ERISC0 only) a program with an ERISC1
// kernel is an error naming the program and kernel, before anything is
// written, instead of a launch whose ERISC1 half never runs.
func TestTTSimERISC1Refused(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, fwtest.WriteSet(dir))
	f := fake.New()
	ds, err := OpenAll(Options{Backend: "fake", Fakes: []access.BAR{f}, Timeout: time.Second}, ethFWImages{namedImages{dir: dir}})
	require.NoError(t, err)
	defer ds[0].Close()
	k := hostcfg.KernelConfig{Name: "back", Processor: "RISCV_1", Ethernet: &hostcfg.EthernetConfig{Processor: "RISCV_1"},
		Cores: []hostcfg.CoreRange{{X0: 2, Y0: kir.EthRow, X1: 2, Y1: kir.EthRow}}}
	_, err = ds[0].StartEth("", &hostcfg.ProgramConfig{Program: "ring", Kernels: []hostcfg.KernelConfig{k}}, Reference{}, func(ch int) (int, error) { return ch, nil })
	require.ErrorContains(t, err, "program ring kernel back: an ERISC1 (RISCV_1) kernel does not run on ttsim")
	require.Empty(t, f.EthLaunches)
}
