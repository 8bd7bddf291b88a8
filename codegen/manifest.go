package codegen

import (
	"fmt"

	"github.com/tcc-dev/tcc/codegen/hostcfg"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
)

// SchemaVersion is the version of the programs.json format; it changes
// whenever a field changes meaning or is removed.
const SchemaVersion = 2

// Version is tcc's version, recorded in every build.
const Version = "0.4.0"

// Manifest is the host contract of a build: everything a host needs to
// allocate, fill, convert and launch it without reading tcc's source.
type Manifest struct {
	Schema         int    `json:"schema"`
	TCCVersion     string `json:"tcc_version"`
	Arch           string `json:"arch"`
	TTMetalRelease string `json:"tt_metal_release"`
	// Buffers lists every device buffer to allocate on each device (the
	// same on every device), in the order programs.json's programs name them.
	Buffers []BufferEntry `json:"buffers"`
	// Inputs are filled by the host before every step, Outputs read after.
	Inputs  []IOEntry `json:"inputs"`
	Outputs []IOEntry `json:"outputs"`
	// State is persistent: allocated once, initialised to Init, updated in
	// place by the step.
	State []StateEntry `json:"state"`
	// Weights are converted from the checkpoint once.
	Weights []WeightEntry `json:"weights"`
	// Layout describes the page layouts every buffer uses.
	Layout LayoutInfo `json:"layout"`
	// Ethernet lists the cabled links mesh programs use: channel of device
	// to channel of device (full duplex).
	Ethernet []EthLink `json:"ethernet"`
	// Topology names the cabling the mesh programs' ring was planned on
	// (target.LookupTopology; set for a mesh row of more than one card), so
	// a runtime can check it against the chips it opens.
	Topology string `json:"topology,omitempty"`
	// RingPorts, when a chip's ring channels differ from chip 0's, lists
	// every chip's physical ring channels (target.RingPorts): the mesh
	// programs' ethernet kernels sit on chip 0's channels (ring link l's
	// sender on east[l], receiver on west[l]), and on chip d they load on
	// RingPorts[d]'s channels of the same link.
	RingPorts []RingPorts `json:"ring_ports,omitempty"`
	// MeshPrograms are the indices (in a device's execution order) of the
	// programs that must be launched on every device of a mesh row at the
	// same time: their ethernet kernels talk to each other.
	MeshPrograms []int `json:"mesh_programs"`
}

// BufferEntry is one device buffer.
type BufferEntry struct {
	Name     string `json:"name"`
	Kind     string `json:"kind"` // input, weight, state, result
	Shape    []int  `json:"shape"`
	DType    string `json:"dtype"`
	Layout   string `json:"layout"`
	Memory   string `json:"memory"`
	PageSize int    `json:"page_size"`
	Pages    int    `json:"pages"`
	// Blocks places a weight's pages in blocks (kir.BlockLayout).
	Blocks *hostcfg.BlockConfig `json:"blocks,omitempty"`
}

// IOEntry is a per-step input or output: the graph name, its buffer and how
// the host fills (or reads) it.
type IOEntry struct {
	Name   string `json:"name"`
	Buffer string `json:"buffer"`
	Fill   string `json:"fill,omitempty"`
}

// StateEntry is one persistent state buffer.
type StateEntry struct {
	Name   string `json:"name"`
	Buffer string `json:"buffer"`
	Init   string `json:"init"`
}

// WeightEntry is one weight buffer and its checkpoint source.
type WeightEntry struct {
	Buffer string                `json:"buffer"`
	Source *hostcfg.WeightSource `json:"source,omitempty"`
}

// LayoutInfo states the page layouts (one description per layout, so a
// host need not know tt-metal's conventions).
type LayoutInfo struct {
	Tile       string `json:"tile"`
	RowMajor   string `json:"row_major"`
	DRAM       string `json:"dram_interleaved"`
	BlockFloat string `json:"block_float"`
	// TileTransposed describes layout tile_t; set only when a buffer uses
	// it (ir.TensorType.TilesTransposed).
	TileTransposed string `json:"tile_t,omitempty"`
	DRAMBanks      int    `json:"dram_banks"`
	DRAMPageAlig   int    `json:"dram_page_align"`
}

// RingPorts are one chip's physical ring channels.
type RingPorts struct {
	Device int   `json:"device"`
	East   []int `json:"east"`
	West   []int `json:"west"`
}

// EthLink is one ethernet cable of the mesh row (physical channels).
type EthLink struct {
	DeviceA  int `json:"device_a"`
	ChannelA int `json:"channel_a"`
	DeviceB  int `json:"device_b"`
	ChannelB int `json:"channel_b"`
}

func kindName(v *ir.Value) string {
	switch v.Kind {
	case ir.KindInput:
		return "input"
	case ir.KindWeight:
		return "weight"
	case ir.KindState:
		return "state"
	}
	return "result"
}

// Manifest builds the host contract of b; info may be nil.
func (b *Build) Manifest(info hostcfg.HostInfo) (*Manifest, error) {
	t := b.Target
	m := &Manifest{Schema: SchemaVersion, TCCVersion: Version, Arch: t.Name, TTMetalRelease: target.TTMetalRelease,
		Buffers: []BufferEntry{}, Inputs: []IOEntry{}, Outputs: []IOEntry{}, State: []StateEntry{}, Weights: []WeightEntry{},
		Ethernet: []EthLink{}, MeshPrograms: []int{}}
	m.Layout = LayoutInfo{
		Tile:         "32x32 tiles, row-major over the tensor's last two dims (padded to 32), leading dims outermost; each tile four 16x16 faces TL, TR, BL, BR, row-major inside a face",
		RowMajor:     "one page per row of the last dim",
		DRAM:         "page i in bank i % dram_banks at the buffer's address + (i / dram_banks) * page size rounded up to dram_page_align; a weight with blocks (kt x nt tiles): columns in runs of period, each cut into groups of dest (the last narrower, w wide), a block of a group holds R = kb*min(dest, period)/w consecutive rows of it k-major, blocks numbered group by group (each run's groups in order), block j in bank j % dram_banks at the address + (j / dram_banks) * kb*min(dest, period) aligned tiles, its tiles back to back",
		BlockFloat:   "bfp8_b / bfp4_b tiles: 64 shared exponents (one per 16-value face row, face order, four per little-endian word), then mantissas face by face",
		DRAMBanks:    t.DRAMBanks,
		DRAMPageAlig: t.DRAMReadAlign,
	}
	for _, s := range b.Buffers {
		layout := s.Layout.String()
		if s.Value.Type.TilesTransposed {
			layout = ir.TransposedTileLayoutText
			m.Layout.TileTransposed = "tile layout with every 32x32 tile stored transposed (stored element (r, c) of a tile is the tensor's (c, r) within it), tiles in tile layout's order: a block float's face-row exponent groups run down 16 rows of one column"
		}
		m.Buffers = append(m.Buffers, BufferEntry{Name: s.Name, Kind: kindName(s.Value), Shape: append([]int{}, s.Shape...), DType: s.DType.String(),
			Layout: layout, Memory: s.Mem.String(), PageSize: s.PageSize, Pages: s.Pages, Blocks: hostcfg.Blocks(s.Blocks)})
	}
	g := b.Graph
	for _, v := range g.Inputs {
		fill := "host data"
		if info != nil {
			fill = info.InputFill(v.Name)
		}
		bs := b.BufferOf(v)
		if bs == nil {
			return nil, fmt.Errorf("codegen: input %q has no buffer", v.Name)
		}
		m.Inputs = append(m.Inputs, IOEntry{Name: v.Name, Buffer: bs.Name, Fill: fill})
	}
	for i, v := range g.Outputs {
		bs := b.BufferOf(v)
		if bs == nil {
			return nil, fmt.Errorf("codegen: output %d has no buffer", i)
		}
		name := v.Name
		if name == "" {
			name = fmt.Sprintf("output%d", i)
		}
		m.Outputs = append(m.Outputs, IOEntry{Name: name, Buffer: bs.Name, Fill: fmt.Sprintf("%s %s %s, read after the step", v.Type.Shape, v.Type.DType, v.Type.Layout)})
	}
	for _, v := range g.States {
		bs := b.BufferOf(v)
		if bs == nil {
			return nil, fmt.Errorf("codegen: state %q has no buffer", v.Name)
		}
		init := "zeros"
		if si, ok := info.(hostcfg.StateIniter); ok && si.StateInit(v.Name) != "" {
			init = si.StateInit(v.Name)
		}
		m.State = append(m.State, StateEntry{Name: v.Name, Buffer: bs.Name, Init: init})
	}
	for _, v := range g.Weights {
		bs := b.BufferOf(v)
		if bs == nil {
			return nil, fmt.Errorf("codegen: weight %q has no buffer", v.Name)
		}
		e := WeightEntry{Buffer: bs.Name}
		if info != nil {
			src, err := info.WeightSource(v.Name, g.Mesh.Cols)
			if err != nil {
				return nil, fmt.Errorf("codegen: weight %q: %w", v.Name, err)
			}
			e.Source = &src
		}
		m.Weights = append(m.Weights, e)
	}
	mesh := false
	for i, p := range b.Programs {
		for _, k := range p.Kernel.Kernels {
			if k.OnEth() {
				m.MeshPrograms = append(m.MeshPrograms, i)
				mesh = true
				break
			}
		}
	}
	if mesh && t.Eth != nil && g.Mesh.Cols > 1 {
		n, e := g.Mesh.Cols, t.Eth
		m.Topology = e.Topology
		// port is chip d's physical channel of ring link l.
		port := func(d, l int, east bool) int {
			if len(e.Ports) != n {
				return map[bool][]int{true: e.RingEast, false: e.RingWest}[east][l]
			}
			if east {
				return e.Ports[d].East[l]
			}
			return e.Ports[d].West[l]
		}
		same := true
		for d := 0; d < n; d++ {
			for l := range e.RingEast {
				m.Ethernet = append(m.Ethernet, EthLink{DeviceA: d, ChannelA: port(d, l, true), DeviceB: (d + 1) % n, ChannelB: port((d+1)%n, l, false)})
				same = same && port(d, l, true) == e.RingEast[l] && port(d, l, false) == e.RingWest[l]
			}
		}
		for d := 0; d < n && !same; d++ {
			rp := RingPorts{Device: d}
			for l := range e.RingEast {
				rp.East, rp.West = append(rp.East, port(d, l, true)), append(rp.West, port(d, l, false))
			}
			m.RingPorts = append(m.RingPorts, rp)
		}
	}
	return m, nil
}
