package lower

import (
	"fmt"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower/blocks"
	"github.com/tcc-dev/tcc/codegen/lower/multicore"
	"github.com/tcc-dev/tcc/ir"
)

// Collective family: argmax_sharded, the argmax of logits split over the
// last dim across the two cards of a 1x2 mesh row (the head's
// vocab-sharded lm_head), without gathering the logits.
//
// Each card runs argmax.go's program on its own shard: its cores scan
// their tile ranges and the leader folds the (index, key) slots, indices
// local to the shard. Then the leader exchanges its slots with the other
// card over one ethernet link, the Ring protocol (multicore.Ring) with
// the leader as the link's only worker:
//
//   - the leader writes its rows' slots (16 bytes per row) into its
//     card's sender's staging (ethernet core East[0]) and Signals it; the
//     sender sends them as one packet into the peer card's receiver
//     (West[0]) staging and waits for the release;
//   - the receiver waits for the packet's bytes and hands it off to its
//     card's leader (SemArrived), which reads the peer's slots into a
//     scratch page and Signals the receiver, which releases the packet.
//
// The leader then folds the two cards' slots per row: its own index plus
// d*n (card d holds logits columns [d*n, (d+1)*n) of the gathered row)
// against the peer's plus (1-d)*n, the larger key winning and on equal
// keys card 0's (the lower card's columns come first in the gathered row,
// and within a card the first maximum already won), so both cards pick
// the first maximum of the gathered row, as the reference's argmax of the
// all_gather. Keys are argmax.go's (NaN above every number, -0 = +0).
//
// Deadlock-free: a leader sends before it waits for anything of the
// exchange; the sender waits only for its leader, the receiver for the
// peer's sender and then its own leader's read, and a leader for the
// receiver's hand-off, which follows from the peer leader's send.

// argmaxSemArrived is the leader's "peer slots arrived" semaphore (the
// Ring's SemArrived; argmaxSemGathered is 0).
const argmaxSemArrived = 1

// argmaxEthSem is the ethernet cores' semaphore: the sender's ready count,
// the receiver's free count (the Ring's SemEth).
const argmaxEthSem = 0

func lowerArgmaxSharded(op *ir.Op, ctx *Context) (*kir.Program, error) {
	n, ok := op.Attrs["devices"].(int)
	switch {
	case !ok:
		return nil, fmt.Errorf("rule attr: %s needs an int attribute \"devices\"", op.Name())
	case n == 1:
		return buildArgmax(op, ctx, nil) // the gathered row is the shard
	case n != 2:
		return nil, fmt.Errorf("rule argmax-sharded-devices: the sharded argmax exchanges between two cards, not %d", n)
	}
	return buildArgmax(op, ctx, &argmaxExchange{})
}

// argmaxExchange is the cross-card step of argmax_sharded (see the
// section comment), set up by resources and declare.
type argmaxExchange struct {
	ring  *multicore.Ring
	bytes int
	peer  int // the leader's scratch CB for the peer's slots
	// the writer's args: the card's index and the link's ethernet cores
	dev, sx, sy, rx, ry kir.ArgRef
}

// resources lays out the exchange of rows rows' slots in sp: the ring of
// one link with sp's first core (the leader) as its worker, the ethernet
// kernels, the semaphores and the leader's scratch page.
func (ex *argmaxExchange) resources(sp *splitProgram, rows int) {
	t, p := sp.ctx.Target, sp.p
	ex.bytes = rows * argmaxSlot
	r := multicore.NewRing(t, 1, sp.cores[:1], 1, false)
	r.ChunkTiles, r.LinkTiles, r.PacketTiles, r.TileBytes = 1, 1, 1, ex.bytes
	r.Segs = []multicore.Span{{Off: 0, Size: ex.bytes}}
	r.Staging = t.Eth.L1UnreservedBase
	r.SemEth, r.SemArrived = argmaxEthSem, argmaxSemArrived
	ex.ring = r
	if end := r.Staging + ex.bytes; end > t.Eth.L1Top {
		sp.fail(fmt.Errorf("rule argmax-eth-l1: the slots end at %d, past the ethernet kernel region's top %d", end, t.Eth.L1Top))
	}
	ex.peer = sp.cbs.Pages(blocks.ScratchCB, "peer", ir.UInt32, ex.bytes, 1)
	p.AddSemaphore(kir.Semaphore{ID: argmaxSemArrived, Cores: sp.rs})
	p.AddSemaphore(kir.Semaphore{ID: argmaxEthSem, Cores: r.EthRanges()})

	es := p.AddKernel(&kir.Kernel{Name: "eth_sender", Role: kir.RoleReader, Processor: kir.RISCV0, NoC: 0, Cores: cclRanges(r.East)})
	staging := es.CompileArg("staging_addr", uint32(r.Staging))
	b := es.Builder()
	ready := b.Let("ready_sem", kir.GetEthSemaphore{ID: kir.C(argmaxEthSem)})
	b.Comment("The leader wrote this card's (index, key) slots into staging: one send.")
	b.EthNoCSemaphoreWait(ready, kir.C(1))
	r.Send(b, staging, true, true, kir.C(1), staging)

	er := p.AddKernel(&kir.Kernel{Name: "eth_receiver", Role: kir.RoleWriter, Processor: kir.RISCV0, NoC: 0, Cores: cclRanges(r.West)})
	leader := r.DeclarePeers(er, "leader")
	b = er.Builder()
	free := b.Let("free_sem", kir.GetEthSemaphore{ID: kir.C(argmaxEthSem)})
	b.Comment("The peer card's slots: hand them to the leader, release once it has read them.")
	b.EthWaitForBytes(kir.Ci(ex.bytes))
	r.HandOff(b, free, leader, false)
	er.SetRuntimeArgs(r.West[0], r.PeerValues(0)...)
}

// declare declares the leader's exchange args on writer wr.
func (ex *argmaxExchange) declare(wr *kir.Kernel) {
	r := ex.ring
	ex.dev = wr.CommonArg("device_id", kir.DeviceID())
	ex.sx, ex.sy = wr.CommonArg("sender_x", kir.NoCX(r.East[0])), wr.CommonArg("sender_y", kir.NoCY(r.East[0]))
	ex.rx, ex.ry = wr.CommonArg("receiver_x", kir.NoCX(r.West[0])), wr.CommonArg("receiver_y", kir.NoCY(r.West[0]))
}

// leader emits the leader's exchange of the rows slots at st (indices
// local to the shard of n columns) and the fold that leaves the gathered
// row's index and key in each slot.
func (ex *argmaxExchange) leader(b *kir.Builder, st kir.Var, rows kir.Expr, n kir.ArgRef) {
	r := ex.ring
	staging := kir.Ci(r.Staging)
	b.Comment("send this card's (index, key) per row to the other card")
	b.NoCAsyncWrite(st, kir.NoCAddr{X: ex.sx, Y: ex.sy, Addr: staging}, kir.Ci(ex.bytes))
	b.NoCAsyncWriteBarrier()
	r.Signal(b, ex.sx, ex.sy)
	b.Comment("the other card's slots, from the receiver's staging")
	peer := blocks.Reserve(b, ex.peer, kir.C(1), "peer")
	multicore.Await(b, b.Let("arrived_sem", kir.GetSemaphore{ID: kir.C(argmaxSemArrived)}), false)
	b.NoCAsyncRead(kir.NoCAddr{X: ex.rx, Y: ex.ry, Addr: staging}, peer, kir.Ci(ex.bytes))
	b.NoCAsyncReadBarrier()
	r.Signal(b, ex.rx, ex.ry)
	b.Comment("fold: the larger key wins, on equal keys card 0's (its columns come first)")
	own := b.Let("own_base", kir.Mul(ex.dev, n))
	other := b.Let("peer_base", kir.Mul(kir.Sub(kir.C(1), ex.dev), n))
	b.For("r", kir.C(0), rows, func(rr kir.Var) {
		slot := b.Let("slot", kir.Add(st, kir.Mul(rr, kir.Ci(argmaxSlot))))
		ps := b.Let("pslot", kir.Add(peer, kir.Mul(rr, kir.Ci(argmaxSlot))))
		pkey := b.LetT("pkey", kir.U32T, kir.L1Read32{Addr: kir.Add(ps, kir.C(4))})
		// On card 1 the peer is card 0: it wins ties (pkey + 1 > key).
		b.IfElse(kir.Gt(kir.Add(pkey, ex.dev), kir.L1Read32{Addr: kir.Add(slot, kir.C(4))}), func() {
			b.L1Write32(slot, kir.Add(kir.L1Read32{Addr: ps}, other))
			b.L1Write32(kir.Add(slot, kir.C(4)), pkey)
		}, func() {
			b.L1Write32(slot, kir.Add(kir.L1Read32{Addr: slot}, own))
		})
	})
	b.CBPushBack(ex.peer, kir.C(1))
	b.CBWaitFront(ex.peer, kir.C(1))
	b.CBPopFront(ex.peer, kir.C(1))
}
