package target

import (
	"fmt"
	"slices"
	"strings"
)

// Topologies: how the chips of a mesh row are cabled.
//
// A Topology is one table of physical ethernet links (chip, channel <->
// chip, channel; every link full duplex). The ring plan of a 1xN mesh row,
// the simulator's peer lookup and the timing model's links all derive from
// it (Target.WithTopology, Target.MeshLinks), and builds record it
// (codegen.Manifest) so a runtime can check it against the chips it opens.
//
// # Logical ring channels
//
// One program serves every chip of the row, so its ethernet kernels sit on
// the same channel numbers on every chip: the ring's logical channels,
// which are chip 0's physical ones (Ethernet.RingEast, RingWest). On chip d
// logical channel Ethernet.RingEast[l] is the physical channel
// Ethernet.Ports[d].East[l] (and West likewise): the channel a card
// backend loads that kernel on. Where chip d's ports equal chip 0's the map
// is the identity (every chip of the default topology). The simulator and
// the timing model run every chip in logical channels (MeshLinks): chip d's
// ethernet kernels sit at the NoC positions of chip 0's channels, which
// moves only the NoC distance of their transfers.

// EthEnd is one end of a physical ethernet link: a chip of the mesh row and
// one of its ethernet channels.
type EthEnd struct {
	Chip, Channel int
}

func (e EthEnd) String() string { return fmt.Sprintf("chip %d channel %d", e.Chip, e.Channel) }

// EthLink is one physical ethernet link (full duplex) between two chips.
type EthLink struct {
	A, B EthEnd
}

func (l EthLink) String() string { return l.A.String() + " <-> " + l.B.String() }

// Topology is a named cabling of the chips of a 1xN mesh row.
type Topology struct {
	// Name is what --topology names it by.
	Name string
	// Doc says what hardware it is and where its table comes from.
	Doc string
	// Chips is the number of chips the table cables; 0 for a ring that
	// cables any number of cards (links then comes from ringEast/ringWest).
	Chips int
	// links is the fixed table (Chips > 0).
	links []EthLink
	// ringEast, ringWest (Chips == 0): link l joins channel ringEast[l] of
	// card d to channel ringWest[l] of card d+1 mod N.
	ringEast, ringWest []int
}

// DefaultTopology is the topology builds assume when none is named: two
// (or more) p150a cards cabled as a ring, the cabling of the measured
// two-card rows the timing model is fitted on (reference/measured.md:
// two p150a cards, mesh 1x2, TP=2; reference/blackhole.md: four QSFP-DD
// ports a card; neither says which channels the cables use, so the table
// keeps the ring tcc's builds have always assumed).
const DefaultTopology = "p150a"

// topologies is the table of every topology, by name.
var topologies = []*Topology{
	{
		Name: "p150a",
		Doc: "p150a cards cabled as a ring: channels 0 and 2 of card d to channels 1 and 3 of card d+1 mod N " +
			"(two cards: four links, two QSFP-DD cables each way); any 1xN row",
		ringEast: []int{0, 2},
		ringWest: []int{1, 3},
	},
	{
		Name: "p300",
		Doc: "a P300 board (ttsim's bh_x2): two chips joined by two links, chip 0 channel 2 <-> chip 1 channel 9 " +
			"and chip 0 channel 3 <-> chip 1 channel 8 (ttsim src/tile.cpp ETH_PEER_TABLE, v1.10.0)",
		Chips: 2,
		links: []EthLink{
			{EthEnd{0, 2}, EthEnd{1, 9}},
			{EthEnd{0, 3}, EthEnd{1, 8}},
		},
	},
}

// TopologyNames lists the topologies' names in table order.
func TopologyNames() []string {
	var ns []string
	for _, tp := range topologies {
		ns = append(ns, tp.Name)
	}
	return ns
}

// LookupTopology returns the topology called name ("" is DefaultTopology),
// or an error naming the known ones.
func LookupTopology(name string) (*Topology, error) {
	if name == "" {
		name = DefaultTopology
	}
	for _, tp := range topologies {
		if tp.Name == name {
			return tp, nil
		}
	}
	return nil, fmt.Errorf("unknown topology %q (known: %s)", name, strings.Join(TopologyNames(), ", "))
}

// Links returns the physical links of the topology on a row of n chips.
// It fails when the row does not fit: more chips than the table cables.
// A row of one chip has no links.
func (tp *Topology) Links(n int) ([]EthLink, error) {
	if n < 1 {
		return nil, fmt.Errorf("topology %s: a mesh row needs at least one chip (got %d)", tp.Name, n)
	}
	if tp.Chips > 0 && n > tp.Chips {
		return nil, fmt.Errorf("topology %s cables %d chips; a mesh row of %d does not fit", tp.Name, tp.Chips, n)
	}
	if n == 1 {
		return nil, nil
	}
	if tp.Chips > 0 {
		if n != tp.Chips {
			return nil, fmt.Errorf("topology %s cables %d chips; a mesh row of %d would leave chips out of the ring", tp.Name, tp.Chips, n)
		}
		return slices.Clone(tp.links), nil
	}
	var ls []EthLink
	for d := 0; d < n; d++ {
		for l := range tp.ringEast {
			ls = append(ls, EthLink{EthEnd{d, tp.ringEast[l]}, EthEnd{(d + 1) % n, tp.ringWest[l]}})
		}
	}
	return ls, nil
}

// RingPorts are one chip's physical ring channels: link l leaves on
// East[l] towards chip d+1 and arrives on West[l] from chip d-1 (mod N).
type RingPorts struct {
	East, West []int
}

// Ring derives the ring of a row of n > 1 chips from the topology's links:
// Ports[d] for every chip d, the same number of links per hop. For n > 2
// the links joining chip d and d+1 mod n are d's east links in the order
// of d's channels; for n = 2 the links joining the two chips, in the order
// of chip 0's channels, alternate: the first from chip 0 to chip 1, the
// second back, and so on (the default topology's four: chip 0 sends on 0
// and 2, chip 1 on 0 and 2). It fails when a hop has no link or hops have
// different link counts.
func (tp *Topology) Ring(n int) ([]RingPorts, error) {
	links, err := tp.Links(n)
	if err != nil {
		return nil, err
	}
	if n < 2 {
		return nil, fmt.Errorf("topology %s: a ring needs at least two chips (got %d)", tp.Name, n)
	}
	ports := make([]RingPorts, n)
	add := func(from, to EthEnd) {
		ports[from.Chip].East = append(ports[from.Chip].East, from.Channel)
		ports[to.Chip].West = append(ports[to.Chip].West, to.Channel)
	}
	if n == 2 {
		var between []EthLink
		for _, l := range links {
			if l.A.Chip == 1 {
				l.A, l.B = l.B, l.A
			}
			if l.A.Chip == 0 && l.B.Chip == 1 {
				between = append(between, l)
			}
		}
		slices.SortStableFunc(between, func(a, b EthLink) int { return a.A.Channel - b.A.Channel })
		for i := 0; i+1 < len(between); i += 2 {
			add(between[i].A, between[i].B)
			add(between[i+1].B, between[i+1].A)
		}
	} else {
		for d := 0; d < n; d++ {
			var hop []EthLink
			for _, l := range links {
				switch {
				case l.A.Chip == d && l.B.Chip == (d+1)%n:
					hop = append(hop, l)
				case l.B.Chip == d && l.A.Chip == (d+1)%n:
					hop = append(hop, EthLink{l.B, l.A})
				}
			}
			slices.SortStableFunc(hop, func(a, b EthLink) int { return a.A.Channel - b.A.Channel })
			for _, l := range hop {
				add(l.A, l.B)
			}
		}
	}
	for d, p := range ports {
		if len(p.East) == 0 || len(p.East) != len(ports[0].East) || len(p.West) != len(ports[0].East) {
			return nil, fmt.Errorf("topology %s: chip %d of a %d-chip ring has %d links east and %d west, chip 0 %d: the ring needs the same links on every hop",
				tp.Name, d, n, len(p.East), len(p.West), len(ports[0].East))
		}
	}
	return ports, nil
}

// WithTopology returns a copy of t whose ethernet ring is topology tp's on
// a row of n chips: Eth.RingEast/RingWest are chip 0's ring channels (the
// logical channels of every chip's kernels), Eth.Ports each chip's physical
// ones, Eth.Topology the name and Eth.Links the physical links. A row of
// one chip keeps t's ring channels (no collective runs) but records the
// topology. It fails, naming the topology and the row, when the row does
// not fit the topology or t has no ethernet.
func (t *Target) WithTopology(tp *Topology, n int) (*Target, error) {
	if t.Eth == nil {
		return nil, fmt.Errorf("target %s has no ethernet cores for topology %s", t.Name, tp.Name)
	}
	links, err := tp.Links(n)
	if err != nil {
		return nil, fmt.Errorf("mesh 1x%d on topology %s: %w", n, tp.Name, err)
	}
	for _, l := range links {
		for _, e := range []EthEnd{l.A, l.B} {
			if !t.InEth(e.Channel) {
				return nil, fmt.Errorf("topology %s: link %s uses channel %d; %s has %d ethernet cores", tp.Name, l, e.Channel, t.Name, t.Eth.Cores)
			}
		}
	}
	c := *t
	e := *t.Eth
	c.Eth = &e
	e.Topology, e.Links, e.Ports = tp.Name, links, nil
	if n < 2 {
		return &c, nil
	}
	ports, err := tp.Ring(n)
	if err != nil {
		return nil, fmt.Errorf("mesh 1x%d on topology %s: %w", n, tp.Name, err)
	}
	e.RingEast, e.RingWest, e.Ports = slices.Clone(ports[0].East), slices.Clone(ports[0].West), ports
	return &c, nil
}

// Logical returns the logical ring channel of physical channel ch of chip
// d (Ethernet.Ports), and false when ch is not one of d's ring channels.
// Without ports (one chip, or a target no topology was applied to) every
// channel is its own.
func (e *Ethernet) Logical(d, ch int) (int, bool) {
	if len(e.Ports) == 0 {
		return ch, true
	}
	if d < 0 || d >= len(e.Ports) {
		return 0, false
	}
	p := e.Ports[d]
	if i := slices.Index(p.East, ch); i >= 0 {
		return e.RingEast[i], true
	}
	if i := slices.Index(p.West, ch); i >= 0 {
		return e.RingWest[i], true
	}
	return 0, false
}

// Physical returns the physical ethernet channel of chip d (a mesh
// column) that logical ring channel ch runs on: Ports[d] at ch's index in
// RingEast/RingWest (the inverse of Logical); ch itself when there are no
// ports (one chip, or the identity map). It fails naming the channel and
// chip when ch is no ring channel or d no chip of the ring.
func (e *Ethernet) Physical(d, ch int) (int, error) {
	if len(e.Ports) == 0 {
		return ch, nil
	}
	if d < 0 || d >= len(e.Ports) {
		return 0, fmt.Errorf("chip %d is not in the build's %d-chip ring (topology %s)", d, len(e.Ports), e.Topology)
	}
	if i := slices.Index(e.RingEast, ch); i >= 0 {
		return e.Ports[d].East[i], nil
	}
	if i := slices.Index(e.RingWest, ch); i >= 0 {
		return e.Ports[d].West[i], nil
	}
	return 0, fmt.Errorf("ethernet channel %d is not a ring channel of the build (topology %s: east %v, west %v)", ch, e.Topology, e.RingEast, e.RingWest)
}

// MeshLinks returns the links of a row of n chips in logical channels (see
// Logical): the topology's physical links whose ends are ring channels,
// each end mapped to its logical channel, which is what the simulator and
// the timing model cable. A target no topology was applied to (Ports
// empty) is cabled as its ring: RingEast[l] of d to RingWest[l] of d+1.
func (t *Target) MeshLinks(n int) ([]EthLink, error) {
	if t.Eth == nil {
		return nil, fmt.Errorf("target %s has no ethernet cores for a %d-chip row", t.Name, n)
	}
	e := t.Eth
	if n < 2 {
		return nil, nil
	}
	if len(e.Ports) == 0 {
		var ls []EthLink
		for d := 0; d < n; d++ {
			for l := range e.RingEast {
				ls = append(ls, EthLink{EthEnd{d, e.RingEast[l]}, EthEnd{(d + 1) % n, e.RingWest[l]}})
			}
		}
		return ls, nil
	}
	if len(e.Ports) != n {
		return nil, fmt.Errorf("topology %s was applied for a row of %d chips, not %d", e.Topology, len(e.Ports), n)
	}
	var ls []EthLink
	for _, l := range e.Links {
		a, okA := e.Logical(l.A.Chip, l.A.Channel)
		b, okB := e.Logical(l.B.Chip, l.B.Channel)
		if okA && okB {
			ls = append(ls, EthLink{EthEnd{l.A.Chip, a}, EthEnd{l.B.Chip, b}})
		}
	}
	return ls, nil
}
