package target

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
)

func TestTopologyRing(t *testing.T) {
	for _, tc := range []struct {
		name  string
		n     int
		ports []RingPorts
		// logical is MeshLinks: the links in chip 0's channels.
		logical []EthLink
	}{
		{
			name: "p150a", n: 2,
			ports: []RingPorts{{East: []int{0, 2}, West: []int{1, 3}}, {East: []int{0, 2}, West: []int{1, 3}}},
			logical: []EthLink{
				{EthEnd{0, 0}, EthEnd{1, 1}}, {EthEnd{0, 2}, EthEnd{1, 3}},
				{EthEnd{1, 0}, EthEnd{0, 1}}, {EthEnd{1, 2}, EthEnd{0, 3}},
			},
		},
		{
			name: "p150a", n: 3,
			ports: []RingPorts{{East: []int{0, 2}, West: []int{1, 3}}, {East: []int{0, 2}, West: []int{1, 3}}, {East: []int{0, 2}, West: []int{1, 3}}},
			logical: []EthLink{
				{EthEnd{0, 0}, EthEnd{1, 1}}, {EthEnd{0, 2}, EthEnd{1, 3}},
				{EthEnd{1, 0}, EthEnd{2, 1}}, {EthEnd{1, 2}, EthEnd{2, 3}},
				{EthEnd{2, 0}, EthEnd{0, 1}}, {EthEnd{2, 2}, EthEnd{0, 3}},
			},
		},
		{
			// ttsim's bh_x2: chip 0 sends on 2 (to chip 1's 9), chip 1
			// on 8 (to chip 0's 3); chip 1's 8 and 9 are the logical 2, 3.
			name: "p300", n: 2,
			ports:   []RingPorts{{East: []int{2}, West: []int{3}}, {East: []int{8}, West: []int{9}}},
			logical: []EthLink{{EthEnd{0, 2}, EthEnd{1, 3}}, {EthEnd{0, 3}, EthEnd{1, 2}}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tp, err := LookupTopology(tc.name)
			require.NoError(t, err)
			got, err := Blackhole().WithTopology(tp, tc.n)
			require.NoError(t, err)
			if diff := cmp.Diff(tc.ports, got.Eth.Ports); diff != "" {
				t.Errorf("ports (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.ports[0], RingPorts{East: got.Eth.RingEast, West: got.Eth.RingWest}); diff != "" {
				t.Errorf("logical ring channels are not chip 0's (-want +got):\n%s", diff)
			}
			links, err := got.MeshLinks(tc.n)
			require.NoError(t, err)
			if diff := cmp.Diff(tc.logical, links); diff != "" {
				t.Errorf("MeshLinks (-want +got):\n%s", diff)
			}
			if got.Eth.Topology != tc.name {
				t.Errorf("Eth.Topology = %q, want %q", got.Eth.Topology, tc.name)
			}
		})
	}
}

// TestDefaultTopologyIsTodaysRing: the default topology keeps the ring
// every build used before topologies were named (a target without one
// applied cables the same links).
func TestDefaultTopologyIsTodaysRing(t *testing.T) {
	bh := Blackhole()
	require.Equal(t, DefaultTopology, bh.Eth.Topology)
	tp, err := LookupTopology("")
	require.NoError(t, err)
	for n := 2; n <= 4; n++ {
		with, err := bh.WithTopology(tp, n)
		require.NoError(t, err)
		want, err := bh.MeshLinks(n)
		require.NoError(t, err)
		got, err := with.MeshLinks(n)
		require.NoError(t, err)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("n=%d: links (-before +with the default topology):\n%s", n, diff)
		}
	}
}

func TestTopologyErrors(t *testing.T) {
	for _, tc := range []struct {
		name, topology string
		n              int
		want           []string
	}{
		{"unknown", "p999", 2, []string{`unknown topology "p999"`, "p150a", "p300"}},
		{"too many chips", "p300", 4, []string{"topology p300", "2 chips", "row of 4"}},
		{"too few chips for the table", "p300", 0, []string{"topology p300", "at least one chip"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tp, err := LookupTopology(tc.topology)
			if err == nil {
				_, err = Blackhole().WithTopology(tp, tc.n)
			}
			require.Error(t, err)
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %q", err, w)
				}
			}
		})
	}
}

func TestTopologyOneChip(t *testing.T) {
	tp, err := LookupTopology("p300")
	require.NoError(t, err)
	got, err := Blackhole().WithTopology(tp, 1)
	require.NoError(t, err)
	if got.Eth.Topology != "p300" || len(got.Eth.Ports) != 0 {
		t.Errorf("one chip: topology %q ports %v, want p300 and none", got.Eth.Topology, got.Eth.Ports)
	}
	// The target is a copy: Blackhole()'s ring is untouched.
	if diff := cmp.Diff([]int{0, 2}, Blackhole().Eth.RingEast); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestLogical(t *testing.T) {
	tp, err := LookupTopology("p300")
	require.NoError(t, err)
	p3, err := Blackhole().WithTopology(tp, 2)
	require.NoError(t, err)
	for _, tc := range []struct {
		chip, ch, want int
		ok             bool
	}{
		{0, 2, 2, true}, {0, 3, 3, true}, {1, 8, 2, true}, {1, 9, 3, true}, {1, 2, 0, false}, {2, 8, 0, false},
	} {
		got, ok := p3.Eth.Logical(tc.chip, tc.ch)
		if got != tc.want || ok != tc.ok {
			t.Errorf("Logical(%d, %d) = %d, %v; want %d, %v", tc.chip, tc.ch, got, ok, tc.want, tc.ok)
		}
	}
}

// TestPhysicalInvertsLogical: on a P300 every ring channel of every chip
// maps to a physical channel whose Logical is that ring channel again (chip
// 1's east 2 is physical 8, its west 3 physical 9); a channel off the ring
// and a chip off the ring are errors naming them.
func TestPhysicalInvertsLogical(t *testing.T) {
	tp, err := LookupTopology("p300")
	require.NoError(t, err)
	p3, err := Blackhole().WithTopology(tp, 2)
	require.NoError(t, err)
	got := map[[2]int]int{}
	for d := range 2 {
		for _, ch := range append(append([]int{}, p3.Eth.RingEast...), p3.Eth.RingWest...) {
			p, err := p3.Eth.Physical(d, ch)
			require.NoError(t, err)
			got[[2]int{d, ch}] = p
			back, ok := p3.Eth.Logical(d, p)
			if !ok || back != ch {
				t.Errorf("chip %d: Logical(Physical(%d) = %d) = %d, %v", d, ch, p, back, ok)
			}
		}
	}
	if diff := cmp.Diff(map[[2]int]int{{0, 2}: 2, {0, 3}: 3, {1, 2}: 8, {1, 3}: 9}, got); diff != "" {
		t.Errorf("physical channels by (chip, logical) (-want +got):\n%s", diff)
	}
	_, err = p3.Eth.Physical(1, 5)
	require.ErrorContains(t, err, "ethernet channel 5 is not a ring channel")
	_, err = p3.Eth.Physical(2, 2)
	require.ErrorContains(t, err, "chip 2 is not in the build's 2-chip ring")
}
