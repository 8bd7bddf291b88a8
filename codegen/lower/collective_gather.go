package lower

import (
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower/blocks"
	"github.com/tcc-dev/tcc/codegen/lower/multicore"
)

// Packed all_gather over two cards (the 27B's logits at decode: 3,880
// tiles of one live row per card). The ring path of collective.go moves
// such a gather through the two ethernet cores of each link alone, five
// NoC or ethernet transactions per tile on one core (275 us for the
// logits). Here the Ring's workers do the per-tile work and each ethernet
// core moves one packet: the packers (reader kernel, lane j takes
// link-local tiles j, j+M, ...) read their tiles' wire segments from x
// (all in flight, one barrier), write them to this card's slice of the
// output and, packed, into the sender's staging, then Signal the sender,
// which waits for all M and sends once; the receiver hands the packet to
// the unpackers (writer kernel, same lanes), which write their tiles'
// segments to the peer's slice of the output. Only the live segments
// travel and are stored (the output's padding rows keep what they held).
// It applies to a two-card all_gather whose tiles have fewer than 32 live
// rows and whose link share fits the ethernet staging area in one packet
// (packedGather).

// maxGatherWorkers bounds the packer/unpacker cores of one link.
const maxGatherWorkers = 54

// packedGather reports whether c takes the packed path, and with how many
// workers per link.
func (c *cclOp) packedGather(ctx *Context) (workers int, ok bool) {
	pl := c.plan
	if c.kind != cclAllGather || c.n != 2 || pl.GatherSteps != 1 || c.notify != nil || ctx.Ring.PerTile {
		return 0, false
	}
	tb := c.x.Type.DType.TileBytes()
	if pl.WireBytes >= tb || pl.LinkTiles*pl.WireBytes > pl.PacketTiles*tb {
		return 0, false
	}
	workers = min(maxGatherWorkers, ctx.Target.NumWorkers()/pl.Links, pl.LinkTiles)
	if w := ctx.Ring.MaxWorkersPerLink; w > 0 {
		workers = min(workers, w)
	}
	// Each worker keeps its tiles' segments at tile stride, twice.
	if per := (pl.LinkTiles + workers - 1) / workers; 2*per*tb > maxBatchedAdderBytes {
		return 0, false
	}
	return workers, workers > 0
}

// buildPackedGather adds the packed gather's semaphores, CBs and kernels
// to p (see the section comment); m is the workers per link.
func (c *cclOp) buildPackedGather(p *kir.Program, ctx *Context, m int) error {
	c.plan.WorkersPerLink = m // the packers and unpackers of a link (LaneCount)
	pl := c.plan
	k, err := c.newKernels(p, ctx, m)
	if err != nil {
		return err
	}
	r, rs := k.ring, k.workerRanges
	per := (pl.LinkTiles + m - 1) / m
	dt := c.x.Type.DType
	p.AddSemaphore(kir.Semaphore{ID: cclSemArrived, Cores: rs})
	// One scratch page each (blocks.Scratch), the lane's tiles at tile stride.
	p.AddCB(kir.CB{Index: cbIn0, PageSize: per * k.tb, Pages: 1, Format: dt, Cores: rs, Name: "local"})
	p.AddCB(kir.CB{Index: cbIn1, PageSize: per * k.tb, Pages: 1, Format: dt, Cores: rs, Name: "received"})

	// Sender: one packet per link once its packers are done.
	es := k.ethKernel(true, 0, pl.LinkTiles, "0+1")
	es.Define("CCL_PACKED_GATHER", "1")
	staging := es.CompileArg("staging_addr", uint32(r.Staging))
	count := es.RuntimeArg("num_tiles")
	b := es.Builder()
	ready := b.Let("ready_sem", kir.GetEthSemaphore{ID: kir.C(cclSemEth)})
	b.Comment("The packers wrote this link's segments into staging: one send.")
	b.EthNoCSemaphoreWait(ready, kir.Ci(m))
	r.Send(b, staging, true, true, count, staging)

	// Receiver: hand the packet to the unpackers and wait for them.
	er := k.ethKernel(false, 0, 0, "")
	count = er.RuntimeArg("num_tiles")
	workers := r.DeclarePeers(er, "worker")
	b = er.Builder()
	free := b.Let("free_sem", kir.GetEthSemaphore{ID: kir.C(cclSemEth)})
	b.EthWaitForBytes(kir.Mul(count, kir.Ci(pl.WireBytes)))
	r.HandOff(b, free, workers, false)

	rd := newReader(p, rs)
	k.packers(rd)
	wr := newWriter(p, rs)
	k.unpackers(wr)
	for l := range pl.Links {
		_, cnt := r.LinkRange(l)
		es.SetRuntimeArgs(r.East[l], kir.U32(uint32(cnt)))
		er.SetRuntimeArgs(r.West[l], append([]kir.ArgValue{kir.U32(uint32(cnt))}, r.PeerValues(l)...)...)
		for j, w := range r.Workers[l] {
			rd.SetRuntimeArgs(w, append(r.LinkValues(l, j), multicore.XY(r.East[l])...)...)
			wr.SetRuntimeArgs(w, append(r.LinkValues(l, j), multicore.XY(r.West[l])...)...)
		}
	}
	return nil
}

// packers emits the packed gather's reader: the lane's local segments to
// this card's slice of the output and, packed, to the sender's staging.
func (k *cclKernels) packers(rd *kir.Kernel) {
	r := k.ring
	staging := rd.CompileArg("staging_addr", uint32(r.Staging))
	dev := rd.CommonArg("device_id", kir.DeviceID())
	xa := rd.CommonArg("x_addr", kir.BufferAddr(k.xName, 0))
	oa := rd.CommonArg("out_addr", kir.BufferAddr(k.outName, 0))
	first, count, lane := rd.RuntimeArg("first_tile"), rd.RuntimeArg("num_tiles"), rd.RuntimeArg("lane")
	sx, sy := cclNoCArgs(rd, "sender")
	b := rd.Builder()
	n := r.LaneCount(b, count, lane)
	tileOf := func(j kir.Expr) kir.Expr { return kir.Add(lane, kir.Mul(j, kir.Ci(r.M()))) }
	l0 := blocks.Scratch(b, cbIn0, "local_base")
	b.If(kir.Gt(n, kir.C(0)), func() {
		b.Comment("this lane's local segments, all in flight")
		b.For("j", kir.C(0), n, func(j kir.Var) {
			pg := kir.Add(first, tileOf(j))
			for _, sg := range k.segs {
				b.NoCAsyncRead(kir.Add(k.dram(xa, pg), kir.Ci(sg.Off)), r.TileAddr(l0, j, sg.Off), kir.Ci(sg.Size))
			}
		})
		b.NoCAsyncReadBarrier()
		b.Comment("to this card's slice of the output and, packed, to the sender's staging")
		b.For("j", kir.C(0), n, func(j kir.Var) {
			i := b.Let("i", kir.Add(first, tileOf(j)))
			r.EachSegment(func(sg multicore.Span, coff int) {
				b.NoCAsyncWrite(r.TileAddr(l0, j, sg.Off), kir.Add(k.dram(oa, k.page(dev, i)), kir.Ci(sg.Off)), kir.Ci(sg.Size))
				b.NoCAsyncWrite(r.TileAddr(l0, j, sg.Off), kir.NoCAddr{X: sx, Y: sy, Addr: r.PackedAddr(staging, tileOf(j), coff)}, kir.Ci(sg.Size))
			})
		})
		b.NoCAsyncWriteBarrier()
	})
	blocks.ReleaseScratch(b, cbIn0)
	r.Signal(b, sx, sy)
}

// unpackers emits the packed gather's writer: the peer's segments from
// the receiver's staging to its slice of the output.
func (k *cclKernels) unpackers(wr *kir.Kernel) {
	r := k.ring
	staging := wr.CompileArg("staging_addr", uint32(r.Staging))
	dev := wr.CommonArg("device_id", kir.DeviceID())
	oa := wr.CommonArg("out_addr", kir.BufferAddr(k.outName, 0))
	first, count, lane := wr.RuntimeArg("first_tile"), wr.RuntimeArg("num_tiles"), wr.RuntimeArg("lane")
	ex, ey := cclNoCArgs(wr, "receiver")
	b := wr.Builder()
	arrived := b.Let("arrived_sem", kir.GetSemaphore{ID: kir.C(cclSemArrived)})
	n := r.LaneCount(b, count, lane)
	tileOf := func(j kir.Expr) kir.Expr { return kir.Add(lane, kir.Mul(j, kir.Ci(r.M()))) }
	r0 := blocks.Scratch(b, cbIn1, "received_base")
	multicore.Await(b, arrived, false)
	b.If(kir.Gt(n, kir.C(0)), func() {
		b.For("j", kir.C(0), n, func(j kir.Var) {
			r.EachSegment(func(sg multicore.Span, coff int) {
				b.NoCAsyncRead(kir.NoCAddr{X: ex, Y: ey, Addr: r.PackedAddr(staging, tileOf(j), coff)}, r.TileAddr(r0, j, sg.Off), kir.Ci(sg.Size))
			})
		})
		b.NoCAsyncReadBarrier()
		kk := b.Let("chunk", k.chunkIndex(dev, kir.C(0), 1))
		b.For("j", kir.C(0), n, func(j kir.Var) {
			i := b.Let("i", kir.Add(first, tileOf(j)))
			for _, sg := range k.segs {
				b.NoCAsyncWrite(r.TileAddr(r0, j, sg.Off), kir.Add(k.dram(oa, k.page(kk, i)), kir.Ci(sg.Off)), kir.Ci(sg.Size))
			}
		})
		b.NoCAsyncWriteBarrier()
	})
	blocks.ReleaseScratch(b, cbIn1)
	r.Signal(b, ex, ey)
}
