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
// (mod N), and M worker cores of each card (Workers[l]) consume what its
// receiver holds and may produce what its sender sends. Link l carries
// tiles [l*LinkTiles, ...) of a chunk of ChunkTiles tiles, in packets of
// PacketTiles (Packets); worker j of a link takes the packet's tiles j,
// j+M, ... (LaneCount).
//
// Only a tile's wire segments (Segs) are live. A packet lies in L1 at tile
// stride (tile t at t*TileBytes, each segment at its offset: TileAddr) or
// packed (tile i's segments back to back at i*Wire: PackedAddr). The
// ethernet cores' L1 holds the Staging area (a packet) and, for workers
// that feed the sender, two forwarding slots Fwd0 and Fwd1 (FwdSlot).
//
// Protocol (semaphores start at 0 in every launch):
//
//   - sender, per packet: Send (eth_send_bytes of the wire bytes from its
//     L1 into the receiver's staging, then eth_wait_for_receiver_done,
//     which returns when the receiver has released the packet). Before a
//     packet that workers produced it waits (eth_noc_semaphore_wait[_min])
//     until its SemEth counts their Signals; after sending a forwarding
//     slot it increments every worker's SemFwdFree (Peers.Inc), so a
//     worker writes a slot again only after it was sent;
//   - receiver, per packet: eth_wait_for_bytes of the packet's wire bytes,
//     then HandOff: noc_semaphore_inc of every worker's SemArrived, wait
//     until its own SemEth counts M (each worker has read the packet), and
//     eth_receiver_done (which frees the sender and the staging area);
//   - worker, per packet: Await (wait until SemArrived is 1, reset it),
//     NoC-read its tiles' segments from the receiver's staging, read
//     barrier, then Signal the receiver (noc_semaphore_inc of its SemEth).
//     A worker feeding the sender NoC-writes segments into the sender's
//     staging or a forwarding slot, write barrier (the data lands before
//     the count), then Signals the sender.
//
// NoC and ethernet use: workers read from and write to the ethernet cores'
// L1 over the NoC (the ethernet cores have NoC coordinates like workers);
// the ethernet cores use the NoC only for semaphore increments and their
// own DRAM traffic; the link carries only Send's bytes, one transfer in
// flight per link (the staging area holds one packet).
//
// Deadlock-free: each wait is for an event a peer makes before it waits
// for anything of this packet. The sender waits only for the receiver
// (which releases every packet it is handed once its workers have read it)
// and for workers that feed it (which wait only for their own receiver's
// packets, sent by the previous card, and for forwarding slots the sender
// frees after sending them); the receiver waits only for the sender's
// bytes and its workers' reads; a worker waits only for its receiver's
// hand-off. Counts are exact: every worker Signals every packet, lanes
// without a tile too.
type Ring struct {
	// East and West are the links' ethernet cores (link l: the sender
	// East[l] and the receiver West[l]); Workers[l] the M worker cores of
	// link l (none when no worker takes part).
	East, West []kir.Core
	Workers    [][]kir.Core
	// ChunkTiles is the tiles per chunk, LinkTiles the tiles per link (the
	// last link may have fewer), PacketTiles the tiles per packet.
	ChunkTiles, LinkTiles, PacketTiles int
	// TileBytes is a tile's size; Segs its wire segments (16-byte
	// multiples, as eth_send_bytes needs).
	TileBytes int
	Segs      []Span
	// Staging, Fwd0 and Fwd1 are the ethernet cores' L1 addresses of the
	// packet and of the two forwarding slots.
	Staging, Fwd0, Fwd1 int
	// Semaphore ids: SemEth on the ethernet cores (the sender's ready
	// count, the receiver's free count), SemArrived and SemFwdFree on the
	// workers.
	SemEth, SemArrived, SemFwdFree int
}

// NewRing returns the ring of t's first links ring links (East and West
// from t.Eth.RingEast and RingWest) with workers split into links groups
// of m consecutive cores (workers may be empty). The caller sets the
// geometry, layout and semaphore fields.
func NewRing(t *target.Target, links int, workers []kir.Core, m int) *Ring {
	r := &Ring{}
	for l := 0; l < links; l++ {
		r.East = append(r.East, kir.EthCore(t.Eth.RingEast[l]))
		r.West = append(r.West, kir.EthCore(t.Eth.RingWest[l]))
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

// EthRanges are the ethernet cores, East[l] then West[l] per link.
func (r *Ring) EthRanges() []ir.CoreRange {
	var rs []ir.CoreRange
	for l := range r.East {
		rs = append(rs, r.East[l].Range(), r.West[l].Range())
	}
	return rs
}

// LinkRange is the first tile and tile count of link l within a chunk.
func (r *Ring) LinkRange(l int) (first, count int) {
	first = l * r.LinkTiles
	return first, min(r.LinkTiles, r.ChunkTiles-first)
}

// LinkValues are link l's values of the runtime args first_tile and
// num_tiles, and with lane >= 0 of lane.
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

// LaneCount emits n, the number of a packet's cnt tiles that fall to
// lane (tiles lane, lane+M, ... below cnt), and returns it.
func (r *Ring) LaneCount(b *kir.Builder, cnt, lane kir.Expr) kir.Var {
	m := kir.Ci(r.M())
	n := b.LetT("lane_tiles", kir.U32T, kir.C(0))
	b.If(kir.Gt(cnt, lane), func() {
		b.Assign(n, kir.Div(kir.Add(kir.Sub(cnt, lane), kir.Sub(m, kir.C(1))), m))
	})
	return n
}

// Wire is the bytes of a tile's segments.
func (r *Ring) Wire() int {
	n := 0
	for _, s := range r.Segs {
		n += s.Size
	}
	return n
}

// TileAddr is the address of byte off of tile t of a packet at base at
// tile stride.
func (r *Ring) TileAddr(base, t kir.Expr, off int) kir.Expr {
	return kir.Add(kir.Add(base, kir.Mul(t, kir.Ci(r.TileBytes))), kir.Ci(off))
}

// PackedAddr is the address of byte coff of tile i's segments in a packed
// packet at base.
func (r *Ring) PackedAddr(base, i kir.Expr, coff int) kir.Expr {
	return kir.Add(kir.Add(base, kir.Mul(i, kir.Ci(r.Wire()))), kir.Ci(coff))
}

// EachSegment calls fn with every segment and its offset in the packed
// layout, in order.
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

// WholeTiles reports whether Send moves tile-stride packets as whole
// tiles (one command) rather than segment by segment: when a tile has
// several segments, or its one segment is the whole tile.
func (r *Ring) WholeTiles() bool { return len(r.Segs) > 1 || r.Wire() == r.TileBytes }

// WireTile is the bytes per tile a Send with these layouts puts on the
// link (and the receiver waits for): the whole tile when WholeTiles moves
// tile-stride packets, else the segments.
func (r *Ring) WireTile(packedSrc, packedDst bool) int {
	if !packedSrc && !packedDst && r.WholeTiles() {
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
// eth_command), so the packet travels in as few commands as the layouts
// allow: packed to packed, or tile stride to tile stride when a tile has
// several segments (the padding rows between them travel too; the
// receiver stores only the segments), is one command; only packed to
// tile stride (the reduce steps' forwarded partial sums, which the
// adders read at tile stride) sends segment by segment. The receiver
// waits for cnt x WireTile(packedSrc, packedDst) bytes.
func (r *Ring) Send(b *kir.Builder, src kir.Expr, packedSrc, packedDst bool, cnt kir.Expr, staging kir.ArgRef) {
	switch {
	case packedSrc && packedDst:
		b.EthSendBytes(src, staging, kir.Mul(cnt, kir.Ci(r.Wire())))
	case !packedSrc && r.WholeTiles():
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
	b.EthWaitForReceiverDone()
}

// Peers are a kernel's runtime args naming the M workers of its link:
// per worker j, its NoC x and y (values from PeerValues).
type Peers struct{ X, Y []kir.ArgRef }

// DeclarePeers declares the M worker args of kernel k, named
// prefix<j>_x, prefix<j>_y.
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

// Inc emits one noc_semaphore_inc of semaphore sem on every peer.
func (p Peers) Inc(b *kir.Builder, sem int) {
	for j := range p.X {
		b.NoCSemaphoreInc(kir.NoCAddr{X: p.X[j], Y: p.Y[j], Addr: kir.GetSemaphore{ID: kir.Ci(sem)}}, kir.C(1))
	}
}

// HandOff emits the receiver's hand-off of a packet it has waited for:
// every worker's SemArrived incremented, then a wait until free (its
// SemEth) counts the M workers (reset to 0 for the next packet when
// reset), then eth_receiver_done.
func (r *Ring) HandOff(b *kir.Builder, free kir.Var, workers Peers, reset bool) {
	workers.Inc(b, r.SemArrived)
	b.EthNoCSemaphoreWait(free, kir.Ci(r.M()))
	if reset {
		b.NoCSemaphoreSet(free, kir.C(0))
	}
	b.EthReceiverDone()
}

// Await emits a worker's wait for its receiver's hand-off (arrived is the
// SemArrived address), reset to 0 for the next packet when reset.
func Await(b *kir.Builder, arrived kir.Var, reset bool) {
	b.NoCSemaphoreWait(arrived, kir.C(1))
	if reset {
		b.NoCSemaphoreSet(arrived, kir.C(0))
	}
}

// Signal emits a worker's increment of SemEth on the ethernet core at x,
// y: a receiver's count of workers done with a packet, or a sender's of
// workers done feeding it (after the worker's write barrier).
func (r *Ring) Signal(b *kir.Builder, x, y kir.Expr) {
	b.NoCSemaphoreInc(kir.NoCAddr{X: x, Y: y, Addr: kir.GetEthSemaphore{ID: kir.Ci(r.SemEth)}}, kir.C(1))
}
