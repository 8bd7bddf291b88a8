package blackhole

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/tcc-dev/tcc/codegen/hostcfg"
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/runtime/blackhole/access"
	"github.com/tcc-dev/tcc/runtime/blackhole/access/fake"
	"github.com/tcc-dev/tcc/runtime/blackhole/firmware/fwtest"
)

// TestOpenAllTwoChips opens a two-chip fake system as ttsim's bh_x2 is
// opened: both chips come back, in order, with IDs 0 and 1. Firmware
// boots on each chip's own cores; a program run on chip 1 launches there
// only, with its device-id argument 1, and chip 0 sees nothing of it.
func TestOpenAllTwoChips(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, fwtest.WriteSet(dir))
	fs := fake.NewChips(2)
	ds, err := OpenAll(Options{Backend: "fake", Fakes: []access.BAR{fs[0], fs[1]}}, namedImages{dir: dir})
	require.NoError(t, err)
	require.Len(t, ds, 2)
	defer func() {
		for _, d := range ds {
			d.Close()
		}
	}()

	type id struct {
		ID         int
		Path       string
		Chip, Of   int
		StatusChip int
	}
	var got []id
	for _, d := range ds {
		info := d.Chip.Dev.Info()
		s, err := d.Status()
		require.NoError(t, err)
		got = append(got, id{d.ID, info.Path, info.Chip, info.Chips, s.Chip})
	}
	want := []id{{0, "fake:0", 0, 2, 0}, {1, "fake:1", 1, 2, 1}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("opened chips (-want +got):\n%s", diff)
	}

	c := kir.Core{X: 2, Y: 3}
	r := hostcfg.CoreRange{X0: 2, Y0: 3, X1: 2, Y1: 3}
	k := hostcfg.KernelConfig{Name: "reader", Processor: "RISCV_1", Cores: []hostcfg.CoreRange{r},
		RuntimeArgs: []hostcfg.CoreArgs{{Core: hostcfg.Core(c), Values: []hostcfg.ArgValue{{ArgValue: kir.DeviceID()}, {ArgValue: kir.U32(7)}}}}}
	p := &hostcfg.ProgramConfig{Program: "on_chip1", Kernels: []hostcfg.KernelConfig{k}}
	require.NoError(t, ds[1].RunProgram("", p, Reference{}))
	require.Empty(t, fs[1].Errors, "chip 1 protocol errors")
	require.Empty(t, fs[0].Errors, "chip 0 protocol errors")

	at, err := ds[1].Chip.Worker(c)
	require.NoError(t, err)
	xy := fake.XY{X: at.X, Y: at.Y}
	if diff := cmp.Diff([]fake.XY{xy}, fs[1].Boots); diff != "" {
		t.Errorf("chip 1 boots (-want +got):\n%s", diff)
	}
	require.Empty(t, fs[0].Boots, "chip 0 booted cores for a program run on chip 1")
	require.Empty(t, fs[0].Launches, "chip 0 launched a program run on chip 1")
	require.Len(t, fs[1].Launches, 1)
	ln := fs[1].Launches[0]
	if diff := cmp.Diff([]uint32{1, 7}, fs[1].Words(ln.Core, ln.ConfigBase+ln.RTA[1], 2)); diff != "" {
		t.Errorf("chip 1 runtime args (device id, 7) (-want +got):\n%s", diff)
	}

	// The same program on chip 0 boots chip 0 and gets device id 0.
	require.NoError(t, ds[0].RunProgram("", p, Reference{}))
	require.Len(t, fs[0].Launches, 1)
	ln = fs[0].Launches[0]
	require.Equal(t, []uint32{0, 7}, fs[0].Words(ln.Core, ln.ConfigBase+ln.RTA[1], 2), "chip 0 runtime args")
	require.Len(t, fs[1].Launches, 1, "chip 1 launched a program run on chip 0")
}

// TestOpenAllWrongChip: a chip of a multi-chip system that is not a
// Blackhole fails the open with an error naming it, and Open (one chip)
// still opens chip 0 of Fake alone.
func TestOpenAllWrongChip(t *testing.T) {
	fs := fake.NewChips(2)
	fs[1].SetDeviceID(access.DeviceWormhole)
	_, err := OpenAll(Options{Backend: "fake", Fakes: []access.BAR{fs[0], fs[1]}}, nil)
	require.Error(t, err)
	for _, s := range []string{"chip 1 of 2", "fake:1", "wormhole_b0"} {
		require.Contains(t, err.Error(), s)
	}
	d, err := Open(Options{Backend: "fake", Fake: fs[0], Fakes: []access.BAR{fs[1]}}, nil)
	require.NoError(t, err)
	require.Equal(t, "fake:0", d.Chip.Dev.Info().Path)
	require.NoError(t, d.Close())
}
