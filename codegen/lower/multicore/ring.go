package multicore

import (
	"strconv"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
)

// Ring is the packet pipeline of a ring of cards (the collectives'): per
// link l, a sender on ethernet core East[l] of card d streams packets into
// the staging area of the receiver on ethernet core West[l] of card d+1
// (mod N); M worker cores per link (Workers[l]) consume what the receiver
// holds and may produce what the sender sends. Link l carries tiles
// [l*LinkTiles, ...) of a chunk in packets of PacketTiles tiles
// (Packets); worker j takes a packet's tiles j, j+M, ... (LaneCount).
// Only a tile's wire segments Segs are live; a packet lies in L1 at tile
// stride (TileAddr) or packed, Wire bytes per tile (PackedAddr).
//
// Protocol, per packet (semaphores start at 0 in every launch):
//
//   - sender: Send (eth_send_bytes from its L1 into the receiver's
//     staging, then eth_wait_for_receiver_done, which returns once the
//     receiver released the packet). A packet the workers produced (in
//     its staging or forwarding slot Fwd0/Fwd1, FwdSlot) it sends only
//     after its SemEth counts their Signals (eth_noc_semaphore_wait[_min]);
//     after sending a slot it increments every worker's SemFwdFree
//     (Peers.Inc), so a worker rewrites a slot only once it was sent;
//   - receiver: eth_wait_for_bytes of the packet's wire bytes, then
//     HandOff: noc_semaphore_inc of every worker's SemArrived, wait until
//     its SemEth counts M (all have read the packet), eth_receiver_done
//     (which frees the sender and the staging area);
//   - worker: Await (SemArrived is 1; reset), NoC-read its tiles'
//     segments from the receiver's staging, read barrier, Signal the
//     receiver (noc_semaphore_inc of its SemEth). Feeding the sender, it
//     NoC-writes segments into the sender's L1, write barrier (the data
//     lands before the count), then Signals the sender. A receiver may
//     Signal its card's sender too (a gathered chunk it stored, which the
//     sender forwards in the next step).
//
// The workers reach the ethernet cores' L1 over the NoC; the ethernet
// cores use the NoC for semaphore increments and their own DRAM traffic;
// the link carries only Send's bytes, one packet in flight per link.
//
// Streaming (Slots = 2): the sender reads packet k+1 from DRAM into its
// other slot while packet k is on the wire (Put, then the reads, then
// eth_wait_for_receiver_done), packet k travels into the receiver's slot
// k % 2, and the receiver hands packet k off (SemArrived counts packets,
// not reset: workers wait for k+1, AwaitCount) and releases it as soon
// as its workers are done with packet k-1 (SemEth counts M per packet,
// not reset: HandOffStream), the slot packet k+1 will overwrite. So the
// workers read packet k while packet k+1 travels, and the link carries
// one packet after another with only the handshake between them.
//
// Deadlock-free: a packet's waits form a chain without a cycle: the
// receiver waits for the sender's bytes and then its workers' reads, a
// worker for its receiver's hand-off, the sender for the receiver's
// release, which follows once the packet is read. The sender's other
// waits are for work that never waits for its packets: workers that feed
// it wait only for packets of the previous card (or nothing) and for
// slots it freed earlier, its card's receiver (in a gather) only for the
// previous card's sender. Every worker Signals every packet, lanes
// without a tile too, so the counts are exact.
type Ring struct {
	East, West []kir.Core   // link l: the sender East[l], the receiver West[l]
	Workers    [][]kir.Core // link l's M workers (none: no workers)
	// Tiles per chunk, per link (the last link may have fewer) and per
	// packet; a tile's size and wire segments (16-byte multiples).
	ChunkTiles, LinkTiles, PacketTiles, TileBytes int
	Segs                                          []Span
	// The ethernet cores' L1 addresses of the packet and the two
	// forwarding slots.
	Staging, Fwd0, Fwd1 int
	// Slots is 1, or 2 when streaming: packet k then lies in slot k % 2,
	// SlotStride bytes apart (SlotAddr).
	Slots, SlotStride int
	// Semaphore ids: SemEth on the ethernet cores (the sender's ready
	// count, the receiver's free count), SemArrived and SemFwdFree on the
	// workers.
	SemEth, SemArrived, SemFwdFree int
	// Both: the lanes run every link both ways (NewRing); an ethernet core
	// then holds a lane's sender and another lane's receiver, which share
	// SemEth (only a streaming receiver counts on it: Both is for
	// streaming rings) and send from OutStaging, receive at Staging.
	Both       bool
	OutStaging int
	// OutSlots is the sender's slots at OutStaging with Both.
	OutSlots int
	// InFlight is the packets a Both ring's lane keeps in flight, each on
	// its own handshake channel (PacketChannel; at least 2 when set, 0
	// otherwise).
	InFlight int
}

// Dirs is the number of directions the lanes use (2 with Both).
func (r *Ring) Dirs() int {
	if r.Both {
		return 2
	}
	return 1
}

// DirLanes are the lanes of direction dir (0: the ring's links from card
// d to d+1; 1: back).
func (r *Ring) DirLanes(dir int) []int {
	n := len(r.East) / r.Dirs()
	var ls []int
	for l := dir * n; l < (dir+1)*n; l++ {
		ls = append(ls, l)
	}
	return ls
}

// NewRing returns the ring of t's first links ring links (t.Eth.RingEast,
// RingWest) with workers split into groups of m per link (workers may be
// empty); the caller sets the other fields. With both, links counts the
// lanes of every ring link both ways: lane l < links/2 is ring link l
// (East[l] = RingEast[l], West[l] = RingWest[l]), lane links/2 + l the
// same link back (East = RingWest[l] of card d sends to West = RingEast[l]
// of card d-1).
func NewRing(t *target.Target, links int, workers []kir.Core, m int, both bool) *Ring {
	r := &Ring{Both: both}
	for l := 0; l < links; l++ {
		e, w, i := t.Eth.RingEast, t.Eth.RingWest, l
		if both && l >= links/2 {
			e, w, i = w, e, l-links/2
		}
		r.East, r.West = append(r.East, kir.EthCore(e[i])), append(r.West, kir.EthCore(w[i]))
		if len(workers) > 0 {
			r.Workers = append(r.Workers, workers[l*m:(l+1)*m])
		}
	}
	return r
}

// M is the number of workers per link (0 without workers).
func (r *Ring) M() int {
	if len(r.Workers) == 0 {
		return 0
	}
	return len(r.Workers[0])
}

// EthRanges are the ethernet cores, East[l] then West[l] per link (with
// Both, those of the first direction's lanes: the others' are the same
// cores).
func (r *Ring) EthRanges() []ir.CoreRange {
	var rs []ir.CoreRange
	for _, l := range r.DirLanes(0) {
		rs = append(rs, r.East[l].Range(), r.West[l].Range())
	}
	return rs
}

// LinkRange is the first tile and tile count of link l within a chunk.
func (r *Ring) LinkRange(l int) (first, count int) {
	first = l * r.LinkTiles
	return first, min(r.LinkTiles, r.ChunkTiles-first)
}

// LinkValues are link l's values of the runtime args first_tile,
// num_tiles and, when lane >= 0, lane.
func (r *Ring) LinkValues(l, lane int) []kir.ArgValue {
	f, n := r.LinkRange(l)
	vals := []kir.ArgValue{kir.U32(uint32(f)), kir.U32(uint32(n))}
	if lane >= 0 {
		vals = append(vals, kir.U32(uint32(lane)))
	}
	return vals
}

// XY are core c's NoC coordinates as argument values.
func XY(c kir.Core) []kir.ArgValue { return []kir.ArgValue{kir.NoCX(c), kir.NoCY(c)} }

// Packets emits the packet loop over a link's count tiles: body gets the
// packet's first link-local tile and its tile count.
func (r *Ring) Packets(b *kir.Builder, count kir.Expr, body func(base, cnt kir.Var)) {
	pk := r.PacketTiles
	np := b.Let("num_packets", kir.Div(kir.Add(count, kir.Ci(pk-1)), kir.Ci(pk)))
	b.For("pk", kir.C(0), np, func(i kir.Var) {
		base := b.Let("base", kir.Mul(i, kir.Ci(pk)))
		cnt := b.LetT("cnt", kir.U32T, kir.Sub(count, base))
		b.If(kir.Gt(cnt, kir.Ci(pk)), func() { b.Assign(cnt, kir.Ci(pk)) })
		body(base, cnt)
	})
}

// LaneCount emits and returns n, the number of a packet's cnt tiles that
// fall to lane (tiles lane, lane+M, ... below cnt).
func (r *Ring) LaneCount(b *kir.Builder, cnt, lane kir.Expr) kir.Var {
	m := kir.Ci(r.M())
	n := b.LetT("lane_tiles", kir.U32T, kir.C(0))
	b.If(kir.Gt(cnt, lane), func() {
		b.Assign(n, kir.Div(kir.Add(kir.Sub(cnt, lane), kir.Sub(m, kir.C(1))), m))
	})
	return n
}

// SpanBytes is the total size of spans.
func SpanBytes(spans []Span) int {
	n := 0
	for _, s := range spans {
		n += s.Size
	}
	return n
}

// Wire is the bytes of a tile's segments.
func (r *Ring) Wire() int { return SpanBytes(r.Segs) }

// TileAddr is the address of byte off of tile t of a packet at base at
// tile stride; PackedAddr of byte coff of tile i's segments packed.
func (r *Ring) TileAddr(base, t kir.Expr, off int) kir.Expr {
	return kir.Add(kir.Add(base, kir.Mul(t, kir.Ci(r.TileBytes))), kir.Ci(off))
}

// PackedAddr: see TileAddr.
func (r *Ring) PackedAddr(base, i kir.Expr, coff int) kir.Expr {
	return kir.Add(kir.Add(base, kir.Mul(i, kir.Ci(r.Wire()))), kir.Ci(coff))
}

// EachSegment calls fn with every segment and its offset when packed.
func (r *Ring) EachSegment(fn func(sg Span, coff int)) {
	coff := 0
	for _, sg := range r.Segs {
		fn(sg, coff)
		coff += sg.Size
	}
}

// FwdSlot is forwarding slot s % 2, from the addresses fwd0 and fwd1.
func FwdSlot(fwd0, fwd1, s kir.Expr) kir.Expr {
	return kir.Add(fwd0, kir.Mul(kir.Mod(s, kir.C(2)), kir.Sub(fwd1, fwd0)))
}

// SlotAddr is the staging slot of packet pk: base + (pk % Slots) *
// SlotStride (base itself with one slot).
func (r *Ring) SlotAddr(base, pk kir.Expr) kir.Expr {
	if r.Slots < 2 {
		return base
	}
	return kir.Add(base, kir.Mul(kir.Mod(pk, kir.Ci(r.Slots)), kir.Ci(r.SlotStride)))
}

// wholeTiles reports whether Send moves tile-stride packets as whole
// tiles (one command): when a tile has several segments, or its one
// segment is the whole tile.
func (r *Ring) wholeTiles() bool { return len(r.Segs) > 1 || r.Wire() == r.TileBytes }

// WireTile is the bytes per tile a Send with these layouts puts on the
// link, which the receiver waits for.
func (r *Ring) WireTile(packedSrc, packedDst bool) int {
	if !packedSrc && !packedDst && r.wholeTiles() {
		return r.TileBytes
	}
	return r.Wire()
}

// Send emits the sender's eth_send_bytes of cnt tiles from src into the
// peer's staging area, then eth_wait_for_receiver_done. The source holds
// the tiles at tile stride or, packedSrc, packed; the peer receives them
// at tile stride, or packed when packedDst (only with packedSrc).
//
// Every transmit command costs the ERISC a TX-queue poll and the link a
// per-command overhead worth ~1.2 KB of wire time (sim/timing's
// eth_command), so a packet travels in as few commands as the layouts
// allow: packed to packed, or tile stride to tile stride when a tile has
// several segments (the padding rows between them travel too; the
// receiver stores only the segments), is one command; only packed to
// tile stride (the reduce steps' forwarded partial sums, which the
// adders read at tile stride) sends segment by segment.
func (r *Ring) Send(b *kir.Builder, src kir.Expr, packedSrc, packedDst bool, cnt kir.Expr, staging kir.Expr) {
	r.Put(b, src, packedSrc, packedDst, cnt, staging)
	b.EthWaitForReceiverDone()
}

// Put is Send without its eth_wait_for_receiver_done: the packet's
// transmit commands only (a streaming sender issues its next packet's
// DRAM reads before it waits).
func (r *Ring) Put(b *kir.Builder, src kir.Expr, packedSrc, packedDst bool, cnt kir.Expr, staging kir.Expr) {
	switch {
	case packedSrc && packedDst:
		b.EthSendBytes(src, staging, kir.Mul(cnt, kir.Ci(r.Wire())))
	case !packedSrc && r.wholeTiles():
		b.EthSendBytes(src, staging, kir.Mul(cnt, kir.Ci(r.TileBytes)))
	default:
		b.For("t", kir.C(0), cnt, func(t kir.Var) {
			r.EachSegment(func(sg Span, coff int) {
				from := r.TileAddr(src, t, sg.Off)
				if packedSrc {
					from = r.PackedAddr(src, t, coff)
				}
				b.EthSendBytes(from, r.TileAddr(staging, t, sg.Off), kir.Ci(sg.Size))
			})
		})
	}
}

// PacketChannel is the handshake channel of packet pk of a Both ring's
// lane whose kernels run on an ERISC with handshake channel base
// (kir.EthChannel) and which keeps inFlight packets in flight: base +
// 2*(pk % inFlight). So each packet in flight has its own bytes_sent
// word, and the two ERISCs of an ethernet core never share one (ERISC0:
// the even channels, ERISC1 the odd ones; inFlight <= MaxInFlight keeps
// them within erisc_info's channels).
func PacketChannel(base, inFlight int, pk kir.Expr) kir.Expr {
	return kir.Add(kir.Ci(base), kir.Mul(kir.Mod(pk, kir.Ci(inFlight)), kir.C(2)))
}

// MaxInFlight is the most packets a Both ring's lane can keep in flight:
// half the handshake channels (kir.EthHandshakeChannels), each ERISC's.
const MaxInFlight = kir.EthHandshakeChannels / 2

// PutPayload sends cnt whole tiles from src to the peer's staging as one
// eth_send_bytes_over_channel_payload_only (a Both ring's packets; whole
// tiles, as every streaming tensor's tiles are: WireTile(false, false) is
// TileBytes); SignalOnChannel then sends their handshake word.
func (r *Ring) PutPayload(b *kir.Builder, src, cnt, staging kir.Expr) {
	b.EthSendBytesOverChannelPayloadOnly(src, staging, kir.Mul(cnt, kir.Ci(r.TileBytes)))
}

// SignalOnChannel sends handshake channel ch's word for the cnt tiles
// PutPayload sent (eth_send_payload_complete_signal_over_channel).
func (r *Ring) SignalOnChannel(b *kir.Builder, cnt, ch kir.Expr) {
	b.EthSendPayloadCompleteSignalOverChannel(ch, kir.Mul(cnt, kir.Ci(r.TileBytes)))
}

// Peers are an ethernet kernel's runtime args naming its link's M
// workers: per worker its NoC x and y (values from PeerValues).
type Peers struct{ X, Y []kir.ArgRef }

// DeclarePeers declares the peer args of kernel k, prefix<j>_x and
// prefix<j>_y for j < M.
func (r *Ring) DeclarePeers(k *kir.Kernel, prefix string) Peers {
	var p Peers
	for j := 0; j < r.M(); j++ {
		s := prefix + strconv.Itoa(j)
		p.X, p.Y = append(p.X, k.RuntimeArg(s+"_x")), append(p.Y, k.RuntimeArg(s+"_y"))
	}
	return p
}

// PeerValues are link l's values of DeclarePeers' args.
func (r *Ring) PeerValues(l int) []kir.ArgValue {
	var vals []kir.ArgValue
	for _, w := range r.Workers[l] {
		vals = append(vals, XY(w)...)
	}
	return vals
}

// Inc emits a noc_semaphore_inc of semaphore sem on every peer.
func (p Peers) Inc(b *kir.Builder, sem int) {
	for j := range p.X {
		b.NoCSemaphoreInc(kir.NoCAddr{X: p.X[j], Y: p.Y[j], Addr: kir.GetSemaphore{ID: kir.Ci(sem)}}, kir.C(1))
	}
}

// HandOff emits the receiver's hand-off of a packet that has arrived:
// every worker's SemArrived incremented, a wait until free (the SemEth
// address) counts M (reset to 0 for the next packet when reset), then
// eth_receiver_done.
func (r *Ring) HandOff(b *kir.Builder, free kir.Var, workers Peers, reset bool) {
	workers.Inc(b, r.SemArrived)
	b.EthNoCSemaphoreWait(free, kir.Ci(r.M()))
	if reset {
		b.NoCSemaphoreSet(free, kir.C(0))
	}
	b.EthReceiverDone()
}

// HandOffStream is HandOff for a streaming ring (Slots >= 2) at packet
// pk (0-based): every worker's SemArrived incremented, a wait until free
// counts M*(pk+2-Slots) (the workers are done with packet pk+1-Slots,
// whose slot the sender fills next; with two slots packet pk-1), then
// eth_receiver_done. free is never reset.
func (r *Ring) HandOffStream(b *kir.Builder, free kir.Var, workers Peers, pk kir.Expr) {
	workers.Inc(b, r.SemArrived)
	if r.Slots <= 2 {
		b.EthNoCSemaphoreWaitMin(free, kir.Mul(pk, kir.Ci(r.M())))
	} else {
		ahead := kir.Ci(r.Slots - 2)
		b.If(kir.Ge(pk, ahead), func() { b.EthNoCSemaphoreWaitMin(free, kir.Mul(kir.Sub(pk, ahead), kir.Ci(r.M()))) })
	}
	b.EthReceiverDone()
}

// HandOffStreamOnChannel is HandOffStream for a Both ring whose sender
// keeps InFlight packets in flight (PacketChannel): the sender sends packet
// pk+InFlight once packet pk's channel ch is released, so the release
// waits until free counts M*(pk+InFlight+1-Slots) (the workers are done
// with packet pk+InFlight-Slots, whose slot packet pk+InFlight fills),
// then eth_receiver_channel_done(ch).
func (r *Ring) HandOffStreamOnChannel(b *kir.Builder, free kir.Var, workers Peers, pk, ch kir.Expr) {
	workers.Inc(b, r.SemArrived)
	ahead := kir.Ci(r.Slots - r.InFlight - 1)
	b.If(kir.Gt(pk, ahead), func() { b.EthNoCSemaphoreWaitMin(free, kir.Mul(kir.Sub(pk, ahead), kir.Ci(r.M()))) })
	b.EthReceiverChannelDone(ch)
}

// OutSlotAddr is the sender's slot of packet pk with Both: base + (pk %
// OutSlots) * SlotStride.
func (r *Ring) OutSlotAddr(base, pk kir.Expr) kir.Expr {
	return kir.Add(base, kir.Mul(kir.Mod(pk, kir.Ci(r.OutSlots)), kir.Ci(r.SlotStride)))
}

// AwaitCount emits a streaming worker's wait for packet pk's hand-off:
// SemArrived (never reset) counts at least pk+1.
func AwaitCount(b *kir.Builder, arrived kir.Var, pk kir.Expr) {
	b.NoCSemaphoreWaitMin(arrived, kir.Add(pk, kir.C(1)))
}

// Await emits a worker's wait for the hand-off (arrived: the SemArrived
// address), reset to 0 for the next packet when reset.
func Await(b *kir.Builder, arrived kir.Var, reset bool) {
	b.NoCSemaphoreWait(arrived, kir.C(1))
	if reset {
		b.NoCSemaphoreSet(arrived, kir.C(0))
	}
}

// Signal emits a worker's increment of SemEth on the ethernet core at x,
// y: its receiver's count of workers done with a packet, or its sender's
// of workers done feeding it (after the worker's write barrier).
func (r *Ring) Signal(b *kir.Builder, x, y kir.Expr) {
	b.NoCSemaphoreInc(kir.NoCAddr{X: x, Y: y, Addr: kir.GetEthSemaphore{ID: kir.Ci(r.SemEth)}}, kir.C(1))
}
