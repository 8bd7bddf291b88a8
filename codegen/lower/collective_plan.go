package lower

import (
	"fmt"

	"github.com/tcc-dev/tcc/codegen/lower/blocks"
	"github.com/tcc-dev/tcc/codegen/lower/multicore"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
)

// Collective geometry and cost: which tiles form a chunk, which bytes of a
// tile travel over ethernet, and how the ring work is split over links,
// worker cores and packets (see collective.go for the kernels).

// cclChunks maps tile i (0 <= i < Tiles) of chunk k (0 <= k < Count) to a
// page of the full tensor: chunks are Count equal slices along one axis;
// in tile order a chunk is Tiles/Run runs of Run consecutive pages, Stride
// pages apart, and chunk k starts k*Run pages after chunk 0.
type cclChunks struct {
	Count, Tiles, Run, Stride int
}

// flatChunks splits tiles pages into n equal contiguous chunks.
func flatChunks(tiles, n int) (cclChunks, error) {
	if tiles%n != 0 {
		return cclChunks{}, fmt.Errorf("rule ccl-chunks: %d tiles do not split into %d equal chunks (the ring reduce-scatter needs tiles %% devices == 0)", tiles, n)
	}
	return cclChunks{Count: n, Tiles: tiles / n, Run: tiles / n, Stride: tiles}, nil
}

// axisChunks splits the tiles of a tile-layout tensor of shape s (the full,
// gathered or unreduced, shape) into n slices along axis: the slices must
// be whole tiles, so a split of one of the last two dimensions needs
// s[axis]/n to be a multiple of 32.
func axisChunks(s ir.Shape, axis, n int) (cclChunks, error) {
	r := s.Rank()
	if r == 0 {
		return cclChunks{}, fmt.Errorf("rule ccl-axis: a scalar has no axis to split")
	}
	if s[axis]%n != 0 {
		return cclChunks{}, fmt.Errorf("rule ccl-axis: dim %d (%d) does not split into %d devices", axis, s[axis], n)
	}
	// Tile dims: leading dims, tile rows, tile columns (rank 1 is [1, n]).
	dims := []int{}
	tileAxis := axis
	if r == 1 {
		dims = []int{1, ir.RoundUpTile(s[0]) / ir.TileSize}
		tileAxis = 1
	} else {
		dims = append(dims, s[:r-2]...)
		dims = append(dims, ir.RoundUpTile(s[r-2])/ir.TileSize, ir.RoundUpTile(s[r-1])/ir.TileSize)
	}
	if tileAxis >= len(dims)-2 && (s[axis]/n)%ir.TileSize != 0 {
		return cclChunks{}, fmt.Errorf("rule ccl-tile-split: splitting dim %d (%d) into %d devices gives %d, not a multiple of %d: the per-device slices would cut tiles", axis, s[axis], n, s[axis]/n, ir.TileSize)
	}
	outer, inner := 1, 1
	for _, d := range dims[:tileAxis] {
		outer *= d
	}
	for _, d := range dims[tileAxis+1:] {
		inner *= d
	}
	size := dims[tileAxis]
	run := size / n * inner
	return cclChunks{Count: n, Tiles: outer * run, Run: run, Stride: size * inner}, nil
}

// cclSegment is a byte range of a tile that carries data.
type cclSegment = multicore.Span

// wireSegments lists the bytes of each tile of a tensor of shape s and
// dtype dt that travel over ethernet. A tensor whose matrices have fewer
// than 32 rows (the decode shapes [1, 1, H] and [B, 1, V]) uses only the
// first rows of every tile: rows r < 16 sit at the top of faces 0 and 1,
// so for rows <= 16 two segments of rows*16 elements are enough (64 of
// 2,048 bytes for one bf16 row); 17..31 rows add the top of faces 2 and 3.
// Other tensors send whole tiles. Segment sizes are multiples of 16 bytes
// for bf16 and fp32, as eth_send_bytes requires.
func wireSegments(s ir.Shape, dt ir.DType) []cclSegment {
	rows := blocks.ImageOf(s).R
	eb := dt.ElemBytes()
	row, face := 16*eb, 256*eb
	switch {
	case rows >= ir.TileSize:
		return []cclSegment{{Off: 0, Size: dt.TileBytes()}}
	case rows <= 16:
		return []cclSegment{{Off: 0, Size: rows * row}, {Off: face, Size: rows * row}}
	}
	return []cclSegment{{Off: 0, Size: 2 * face}, {Off: 2 * face, Size: (rows - 16) * row}, {Off: 3 * face, Size: (rows - 16) * row}}
}

// RingPlan is how a collective uses the ring: every step moves one chunk
// per device to the next device over Links parallel ethernet links; link l
// carries tiles [l*LinkTiles, ...) of each chunk in packets of PacketTiles
// tiles; a reduce step's received tiles are added on WorkersPerLink worker
// cores per link.
type RingPlan struct {
	Devices int
	// ReduceSteps and GatherSteps are the reduce-scatter and all-gather
	// steps (each moves one chunk per device).
	ReduceSteps, GatherSteps int
	// ChunkTiles is the tiles per chunk; LinkTiles the tiles per link
	// (the last link may have fewer).
	ChunkTiles, LinkTiles              int
	Links, WorkersPerLink, PacketTiles int
	// Bidirectional: every link carries the collective both ways (a
	// streaming two-card all-reduce): Links counts directed lanes, the
	// ring's links from card d to d+1 (lanes 0..Links/2-1, senders on
	// ERISC0) and the same links back (lanes Links/2.., senders on
	// ERISC1), each lane a share of the tensor. Every ethernet core then
	// holds a sender and a receiver, each with its own staging slots.
	Bidirectional bool
	// Slots is the number of staging slots of PacketTiles tiles each on
	// both ethernet cores of a link: 1, or 2 for a streaming one-step
	// all-reduce (two cards) whose link share takes more than one packet
	// (double-buffered: packet k+1 is read from DRAM into one slot while
	// packet k is on the wire from the other, and the adders read packet
	// k from the receiver's slot while packet k+1 travels into the other;
	// see collective.go's Streaming section).
	Slots int
	// TileBytes is the page size; WireBytes the bytes per tile that travel
	// (wireSegments).
	TileBytes, WireBytes int
	// Cost is the estimate in Tensix cycles (see PlanRing).
	Cost int
}

// forwards reports whether a step sends what the adders of an earlier
// one computed: a reduce step after the first, or gather steps after
// reduce steps (an all-reduce's result chunk). Only then do the adders
// leave partial sums in forwarding slots; a one-step all-reduce (two
// cards) writes its sums straight to the output.
func (p RingPlan) forwards() bool {
	return p.ReduceSteps > 1 || (p.ReduceSteps > 0 && p.GatherSteps > 0)
}

// Packets is the number of packets per link per step.
func (p RingPlan) Packets() int { return (p.LinkTiles + p.PacketTiles - 1) / p.PacketTiles }

// adderTiles is the most tiles of a link an adder handles: lane 0's,
// ceil(cnt/M) of every packet of cnt tiles (more than ceil(LinkTiles/M)
// when a packet's tiles are not a multiple of M).
func (p RingPlan) adderTiles() int {
	m := p.WorkersPerLink
	full, rem := p.LinkTiles/p.PacketTiles, p.LinkTiles%p.PacketTiles
	return full*((p.PacketTiles+m-1)/m) + (rem+m-1)/m
}

// Ethernet L1 layout on every ethernet core a plan uses: a staging area
// of Slots slots of PacketTiles whole tiles each (the packet read from
// DRAM, or received; slot k at staging + k*SlotStride; Bidirectional: the
// received packets' slots, the sent ones' BothWaysOutSlots after them, see
// outStaging), then,
// when a step forwards (forwards), two forwarding slots of
// LinkTiles*WireBytes bytes each, where the workers leave the partial sums
// the next step sends (otherwise none: fwd0 = fwd1 = end).
func (p RingPlan) ethLayout(t *target.Target) (staging, fwd0, fwd1, end int) {
	staging = t.Eth.L1UnreservedBase
	fwd0 = staging + max(p.Slots, 1)*p.SlotStride()
	if p.Bidirectional {
		fwd0 += BothWaysOutSlots * p.SlotStride() // the sender's
	}
	if !p.forwards() {
		return staging, fwd0, fwd0, fwd0 // no forwarding slots
	}
	fwd1 = fwd0 + target.AlignUp(p.LinkTiles*p.WireBytes, 16)
	end = fwd1 + target.AlignUp(p.LinkTiles*p.WireBytes, 16)
	return
}

// outStaging is where a Bidirectional plan's sender keeps the packets it
// sends (its BothWaysOutSlots slots after the receiver's Slots); staging
// otherwise.
func (p RingPlan) outStaging(staging int) int {
	if p.Bidirectional {
		return staging + p.Slots*p.SlotStride()
	}
	return staging
}

// SlotStride is the bytes between two staging slots: a packet's whole
// tiles, 16-byte aligned.
func (p RingPlan) SlotStride() int { return target.AlignUp(p.PacketTiles*p.TileBytes, 16) }

// Streaming reports whether the plan streams through several staging
// slots (Slots >= 2).
func (p RingPlan) Streaming() bool { return p.Slots >= 2 }

// BothWaysInFlight is the packets a Bidirectional plan's lane keeps in
// flight (collective.go's streamInFlight), each on its own handshake
// channel. A packet's release leaves the receiver's ERISC on the TX queue
// it shares with the other direction's payloads, behind one of them, after
// the adders are done with an earlier packet: with two in flight the
// sender waited for releases ~92 us of the 4,096-token prefill's ring
// (`tcc perf --threads all_reduce_add_rmsnorm`), with three ~41 us.
const BothWaysInFlight = 3

// BothWaysSlots is the receiver's staging slots of a Bidirectional plan:
// the packets in flight and two more, so packet q's release waits only
// until the adders are done with packet q-2 (HandOffStreamOnChannel; with
// one more slot, q-1, the adders' lag held releases back). Picked on the
// predictions of that all_reduce_add_rmsnorm: in flight + slots 2+1 (the
// ring before) 658.6 us, 3+1 654.9, 3+2 643.9, 3+3 676.5 (more adders,
// fewer norm-tail cores), 4+2 677.4 (likewise), 2+2 664.1.
var BothWaysSlots = BothWaysInFlight + 2

// BothWaysOutSlots is the sender's slots of a Bidirectional plan: with
// packets in flight (collective.go's streamInFlight) the sender reads
// packet k+1 into the slot of packet k-1, whose payload has left (its
// handshake word's transmit command waited for the TX queue).
const BothWaysOutSlots = 2

// ethCommandCycles is one ethernet transmit command's overhead on the link
// (sim/timing's fitted eth_command, 69.5 cycles).
const ethCommandCycles = 70

// maxWorkersPerLink bounds the adder cores per link.
const maxWorkersPerLink = 40

// addTileCycles is one adder's compute on one received tile: unpack both
// operands, the FPU add, pack.
const addTileCycles = 2*UnpackTileCycles + EltwiseTileCycles + PackTileCycles

// adderRingCycles is what one more adder adds to a packet on the ring's
// serial path: the receiver's semaphore increment to it, one NoC command
// (sim/timing's noc_issue). Its launch is not charged: the program's
// launch gap (sim/timing's launch_gap, traced on programs of up to every
// worker core) already holds it.
const adderRingCycles = 24

// PlanRing chooses the links, adder cores per link and packet size of a
// collective with the given steps on chunks of chunkTiles tiles, and
// estimates its time. Every link a target's ring cabling offers is used
// (each carries its share of every chunk in parallel). The packet is as
// large as the ethernet L1 allows (up to all of a link's tiles): a packet
// costs one handshake round trip, and with one staging buffer nothing
// overlaps it. Per link and packet of P tiles, in cycles:
//
//	read  = P*tileBytes/NoCBytesPerCycle        (ethernet core reads the packet from DRAM)
//	wire  = P*wireBytes/LinkBytesPerCycle + LinkLatencyCycles
//	add   = ceil(P/M)*tile + M*adderRingCycles  (reduce steps: M adders, each reads its local tiles and adds)
//	store = P*tileBytes/NoCBytesPerCycle        (gather steps: the receiver stores the tiles to DRAM)
//
// where tile = tileBytes/NoCBytesPerCycle + addTileCycles, and with a
// residual (the fused all_reduce_add: the adders also read the residual
// tile and add it) twice that. A step costs packets*(read + wire + add
// or store); the collective costs its steps plus DispatchCycles per
// ethernet core. A one-step collective without gather steps (the
// two-card all-reduce) whose link share does not fit one packet streams
// instead (Slots = 2): packets of at most half the staging room, in
// equal sizes, and the step costs read + packets*max(wire, read, add) +
// add. M minimises the estimate; ties go to fewer cores. It fails when
// even one-tile packets do not fit the ethernet L1 next to the
// forwarding slots.
//
// A streaming plan is Bidirectional: the links carry the tensor both ways,
// so the card's bytes leave on every link (twice the lanes, each with its
// sender's and its receiver's two slots: packets of at most a quarter of
// the room).
func PlanRing(t *target.Target, devices, reduceSteps, gatherSteps, chunkTiles, tileBytes, wireBytes int, residual bool) (RingPlan, error) {
	return planRing(t, devices, reduceSteps, gatherSteps, chunkTiles, tileBytes, wireBytes, residual, maxWorkersPerLink, 0, false)
}

// planRing is PlanRing with at most maxWorkers adders per link, or, when
// exact > 0, exactly min(exact, PacketTiles) of them; oneWay keeps a
// streaming plan on one direction of its links.
func planRing(t *target.Target, devices, reduceSteps, gatherSteps, chunkTiles, tileBytes, wireBytes int, residual bool, maxWorkers, exact int, oneWay bool) (RingPlan, error) {
	p, err := planLanes(t, devices, reduceSteps, gatherSteps, chunkTiles, tileBytes, wireBytes, residual, maxWorkers, exact, false)
	if err != nil || !p.Streaming() || oneWay {
		return p, err
	}
	b, err := planLanes(t, devices, reduceSteps, gatherSteps, chunkTiles, tileBytes, wireBytes, residual, maxWorkers, exact, true)
	if err != nil || !b.Streaming() || b.Links != 2*len(t.Eth.RingEast) {
		return p, nil // both ways need every lane and two slots a direction
	}
	return b, nil
}

// planLanes is planRing on the ring's links one way, or both ways (bidi:
// only for a plan that streams one way).
func planLanes(t *target.Target, devices, reduceSteps, gatherSteps, chunkTiles, tileBytes, wireBytes int, residual bool, maxWorkers, exact int, bidi bool) (RingPlan, error) {
	if t.Eth == nil || len(t.Eth.RingEast) == 0 {
		return RingPlan{}, fmt.Errorf("rule ccl-ethernet: target %s has no ring cabling", t.Name)
	}
	dirs := 1
	if bidi {
		dirs = 2
	}
	links := min(dirs*len(t.Eth.RingEast), chunkTiles)
	per := (chunkTiles + links - 1) / links
	links = (chunkTiles + per - 1) / per
	p := RingPlan{Devices: devices, ReduceSteps: reduceSteps, GatherSteps: gatherSteps, ChunkTiles: chunkTiles, LinkTiles: per,
		Links: links, TileBytes: tileBytes, WireBytes: wireBytes, Bidirectional: bidi}
	fwd := 0 // forwarding slots hold partial sums a later step sends
	if p.forwards() {
		fwd = 2 * target.AlignUp(per*wireBytes, 16)
	}
	room := t.EthL1Budget() - fwd
	p.Slots = 1
	p.PacketTiles = min(per, room/dirs/tileBytes) // both ways: the sender's slots and the receiver's
	if p.PacketTiles < 1 {
		return RingPlan{}, fmt.Errorf("rule ccl-eth-l1: a link's %d tiles need %d bytes of forwarding slots; with one %d-byte staging tile that exceeds the %d-byte ethernet L1", per, fwd, tileBytes, t.EthL1Budget())
	}
	slots, outSlots := 2, 0
	if bidi {
		slots, outSlots = BothWaysSlots, BothWaysOutSlots
	}
	if part := room / (slots + outSlots) / tileBytes; reduceSteps == 1 && gatherSteps == 0 && p.PacketTiles < per && part >= 1 {
		// Stream: two slots of at most half the room (both ways: the
		// receiver's BothWaysSlots and the sender's BothWaysOutSlots), the link's
		// tiles in equal packets.
		n := (per + part - 1) / part
		p.Slots, p.PacketTiles = slots, (per+n-1)/n
	}
	noc := func(bytes int) int { return (bytes + NoCBytesPerCycle - 1) / NoCBytesPerCycle }
	tile := noc(tileBytes) + addTileCycles
	if residual {
		tile *= 2
	}
	cost := func(m int) int {
		pk := p.PacketTiles
		read := noc(pk * tileBytes)
		wire := (pk*wireBytes+t.Eth.LinkBytesPerCycle-1)/t.Eth.LinkBytesPerCycle + t.Eth.LinkLatencyCycles
		add := (pk+m-1)/m*tile + m*adderRingCycles
		store := noc(pk * tileBytes)
		packets := p.Packets()
		if p.Streaming() && bidi {
			// Packets in flight (streamInFlight): a packet's handshake
			// round trip hides under the next packets, so a
			// packet holds the link for its bytes and two transmit
			// commands (payload, word), and the latency counts once.
			wire = (pk*wireBytes+t.Eth.LinkBytesPerCycle-1)/t.Eth.LinkBytesPerCycle + 2*ethCommandCycles
			return read + packets*max(wire, read, add) + add + t.Eth.LinkLatencyCycles + links*2*DispatchCycles
		}
		if p.Streaming() {
			// The first read and the last packet's adds do not overlap;
			// between them each packet costs its slowest stage.
			return read + packets*max(wire, read, add) + add + links*2*DispatchCycles
		}
		return reduceSteps*packets*(read+wire+add) + gatherSteps*packets*(read+wire+store) + links*2*DispatchCycles
	}
	p.WorkersPerLink = 1
	if reduceSteps > 0 {
		best := -1
		lo := 1
		if exact > 0 {
			lo, maxWorkers = min(exact, p.PacketTiles), exact
		}
		if bidi {
			// Every lane's adders must fit the grid.
			maxWorkers = min(maxWorkers, t.NumWorkers()/links)
			lo = min(lo, maxWorkers)
		}
		for m := lo; m <= maxWorkers && m <= p.PacketTiles; m++ {
			if c := cost(m); best < 0 || c < best {
				best, p.WorkersPerLink = c, m
			}
		}
	}
	p.Cost = cost(p.WorkersPerLink)
	return p, nil
}
