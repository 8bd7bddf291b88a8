package blackhole

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/tcc-dev/tcc/runtime/blackhole/access"
	"github.com/tcc-dev/tcc/runtime/blackhole/access/fake"
)

// p300Fakes opens two fake chips cabled as ttsim's bh_x2 (a P300): chip 0
// channel 2 <-> chip 1 channel 9, chip 0 channel 3 <-> chip 1 channel 8.
func p300Fakes(t *testing.T) ([]*fake.Chip, []*Device) {
	t.Helper()
	fs := fake.NewChips(2)
	require.NoError(t, fake.Cable(fs[0], 2, fs[1], 9))
	require.NoError(t, fake.Cable(fs[1], 8, fs[0], 3))
	ds, err := OpenAll(Options{Backend: "fake", Fakes: []access.BAR{fs[0], fs[1]}}, nil)
	require.NoError(t, err)
	t.Cleanup(func() {
		for _, d := range ds {
			d.Close()
		}
	})
	return fs, ds
}

// TestEthLinks reads the links of a two-chip system from the ethernet
// cores' boot results: exactly the P300's two, each once, ends ordered;
// the other channels are down.
func TestEthLinks(t *testing.T) {
	_, ds := p300Fakes(t)
	got, err := EthLinks(ds)
	require.NoError(t, err)
	want := []EthLink{
		{EthEnd{0, 2}, EthEnd{1, 9}},
		{EthEnd{0, 3}, EthEnd{1, 8}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("links (-want +got):\n%s", diff)
	}
	ps, err := ds[1].EthPorts()
	require.NoError(t, err)
	up := map[int]EthPort{}
	for _, p := range ps {
		if p.Up {
			up[p.Channel] = p
		} else {
			require.Equal(t, PortDown, p.Status, "channel %d", p.Channel)
		}
	}
	wantUp := map[int]EthPort{
		8: {Channel: 8, Status: PortUp, Up: true, Local: BoardChip{fake.P300Board, 1}, Remote: BoardChip{fake.P300Board, 0}, RemoteChannel: 3},
		9: {Channel: 9, Status: PortUp, Up: true, Local: BoardChip{fake.P300Board, 1}, Remote: BoardChip{fake.P300Board, 0}, RemoteChannel: 2},
	}
	if diff := cmp.Diff(wantUp, up); diff != "" {
		t.Errorf("chip 1 up ports (-want +got):\n%s", diff)
	}

	// One chip alone: its cables lead to no opened chip.
	alone, err := EthLinks(ds[:1])
	require.NoError(t, err)
	require.Empty(t, alone)
}

// TestCheckLinks: a program's links must be the chips'. The builds'
// canonical ring (device 0 channel 0 -> device 1 channel 1) is not a
// P300's: the error names the program, the link, what its ends are
// cabled to and the links the chips have.
func TestCheckLinks(t *testing.T) {
	have := []EthLink{{EthEnd{0, 2}, EthEnd{1, 9}}, {EthEnd{0, 3}, EthEnd{1, 8}}}
	for _, tc := range []struct {
		name string
		want []EthLink
		err  string
	}{
		{"p300 links, either order", []EthLink{{EthEnd{1, 9}, EthEnd{0, 2}}, {EthEnd{0, 3}, EthEnd{1, 8}}}, ""},
		{"no links", nil, ""},
		{"canonical ring", []EthLink{{EthEnd{0, 0}, EthEnd{1, 1}}},
			"program all_gather_3 uses the ethernet link chip 0 channel 0 <-> chip 1 channel 1, which the chips do not have " +
				"(chip 0 channel 0 has no link to an opened chip; chip 1 channel 1 has no link to an opened chip); " +
				"their links: chip 0 channel 2 <-> chip 1 channel 9, chip 0 channel 3 <-> chip 1 channel 8"},
		{"crossed", []EthLink{{EthEnd{0, 2}, EthEnd{1, 8}}},
			"program all_gather_3 uses the ethernet link chip 0 channel 2 <-> chip 1 channel 8, which the chips do not have " +
				"(chip 0 channel 2 is cabled to chip 1 channel 9; chip 1 channel 8 is cabled to chip 0 channel 3)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckLinks("all_gather_3", tc.want, have)
			if tc.err == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.err)
		})
	}
}
