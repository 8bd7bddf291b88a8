package lower

import (
	"fmt"
	"strconv"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower/blocks"
)

// Packed all_gather over two cards (the 27B's logits at decode: 3,880
// tiles of one live row per card). The ring path of collective.go moves
// such a gather through the two ethernet cores of each link alone: per
// tile the sender reads it from DRAM, writes it to the card's own slice of
// the output and sends each wire segment, and the receiver writes each
// segment back to DRAM - five NoC or ethernet transactions per tile on one
// core, 275 us for the logits. Here worker cores do the per-tile work and
// the ethernet cores move one packet per link:
//
//   - packers (reader kernel, M workers per link, lane j takes link-local
//     tiles j, j+M, ...): read the wire segments of their local tiles from
//     x in DRAM (all in flight, one barrier), write them to the card's own
//     slice of the output and, packed at WireBytes per tile, into the
//     link's ethernet sender's staging; then increment the sender's
//     semaphore;
//   - sender: waits for its M packers, eth_send_bytes the link's packed
//     segments into the peer receiver's staging in one send,
//     eth_wait_for_receiver_done;
//   - receiver: eth_wait_for_bytes, increments every unpacker's "arrived"
//     semaphore, waits until all M incremented its own, eth_receiver_done;
//   - unpackers (writer kernel, the same workers and lanes): wait for
//     "arrived", read their tiles' packed segments from the receiver's
//     staging, write them to the peer's slice of the output, increment the
//     receiver's semaphore.
//
// Only the segments that hold data travel and are stored, as on the ring
// path (the output's padding rows keep what they held). It applies to a
// two-card all_gather whose tiles have fewer than 32 live rows and whose
// link share fits the ethernet staging area in one packet (packedGather).

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
	t := ctx.Target
	c.plan.WorkersPerLink = m // the packers and unpackers of a link (laneCount)
	pl := c.plan
	k := &cclKernels{cclOp: c, ctx: ctx, p: p, xName: ctx.BufferName(c.x), outName: ctx.BufferName(c.out),
		tb: c.x.Type.DType.TileBytes()}
	k.stride = t.DRAMPageSize(k.tb)
	var end int
	k.staging, _, _, end = pl.ethLayout(t)
	if end > t.Eth.L1Top {
		return fmt.Errorf("rule ccl-eth-l1: the ethernet L1 layout ends at %d, past the kernel region's top %d", end, t.Eth.L1Top)
	}
	for l := 0; l < pl.Links; l++ {
		k.east = append(k.east, kir.EthCore(t.Eth.RingEast[l]))
		k.west = append(k.west, kir.EthCore(t.Eth.RingWest[l]))
		k.ethRanges = append(k.ethRanges, k.east[l].Range(), k.west[l].Range())
	}
	cores, rs := firstCores(t, pl.Links*m)
	for l := 0; l < pl.Links; l++ {
		k.workers = append(k.workers, cores[l*m:(l+1)*m])
	}
	per := (pl.LinkTiles + m - 1) / m
	dt := c.x.Type.DType
	p.AddSemaphore(kir.Semaphore{ID: cclSemEth, Cores: k.ethRanges})
	p.AddSemaphore(kir.Semaphore{ID: cclSemArrived, Cores: rs})
	// One scratch page each (blocks.Scratch), the lane's tiles at tile stride.
	p.AddCB(kir.CB{Index: cbIn0, PageSize: per * k.tb, Pages: 1, Format: dt, Cores: rs, Name: "local"})
	p.AddCB(kir.CB{Index: cbIn1, PageSize: per * k.tb, Pages: 1, Format: dt, Cores: rs, Name: "received"})
	wire := pl.WireBytes
	// packed is the staging address of byte coff of link-local tile i.
	packed := func(staging kir.Expr, i kir.Expr, coff int) kir.Expr {
		return kir.Add(kir.Add(staging, kir.Mul(i, kir.Ci(wire))), kir.Ci(coff))
	}

	// Sender: one packet per link once its packers are done.
	es := p.AddKernel(&kir.Kernel{Name: "eth_sender", Role: kir.RoleReader, Processor: kir.RISCV0, NoC: 0, Cores: cclRanges(k.east)})
	es.Define("CCL_DEVICES", strconv.Itoa(c.n))
	es.Define("CCL_LINKS", strconv.Itoa(pl.Links))
	es.Define("CCL_WORKERS_PER_LINK", strconv.Itoa(m))
	es.Define("CCL_PACKET_TILES", strconv.Itoa(pl.LinkTiles))
	es.Define("CCL_STEPS", "0+1")
	es.Define("CCL_WIRE_BYTES_PER_TILE", strconv.Itoa(wire))
	es.Define("CCL_PACKED_GATHER", "1")
	sStaging := es.CompileArg("staging_addr", uint32(k.staging))
	sCount := es.RuntimeArg("num_tiles")
	b := es.Builder()
	ready := b.Let("ready_sem", kir.GetEthSemaphore{ID: kir.C(cclSemEth)})
	b.Comment("The packers wrote this link's segments into staging: one send.")
	b.EthNoCSemaphoreWait(ready, kir.Ci(m))
	b.EthSendBytes(sStaging, sStaging, kir.Mul(sCount, kir.Ci(wire)))
	b.EthWaitForReceiverDone()

	// Receiver: hand the packet to the unpackers and wait for them.
	er := p.AddKernel(&kir.Kernel{Name: "eth_receiver", Role: kir.RoleWriter, Processor: kir.RISCV0, NoC: 0, Cores: cclRanges(k.west)})
	rCount := er.RuntimeArg("num_tiles")
	var wx, wy []kir.ArgRef
	for j := 0; j < m; j++ {
		x, y := cclNoCArgs(er, "worker"+strconv.Itoa(j))
		wx, wy = append(wx, x), append(wy, y)
	}
	b = er.Builder()
	free := b.Let("free_sem", kir.GetEthSemaphore{ID: kir.C(cclSemEth)})
	b.EthWaitForBytes(kir.Mul(rCount, kir.Ci(wire)))
	for j := range wx {
		b.NoCSemaphoreInc(kir.NoCAddr{X: wx[j], Y: wy[j], Addr: kir.GetSemaphore{ID: kir.C(cclSemArrived)}}, kir.C(1))
	}
	b.EthNoCSemaphoreWait(free, kir.Ci(m))
	b.EthReceiverDone()

	// Packers: local segments to the own slice and the sender's staging.
	rd := p.AddKernel(&kir.Kernel{Name: "reader", Role: kir.RoleReader, Processor: kir.RISCV1, NoC: 1, Cores: rs})
	pStaging := rd.CompileArg("staging_addr", uint32(k.staging))
	dev := rd.CommonArg("device_id", kir.DeviceID())
	xa := rd.CommonArg("x_addr", kir.BufferAddr(k.xName, 0))
	oa := rd.CommonArg("out_addr", kir.BufferAddr(k.outName, 0))
	first, count, lane := rd.RuntimeArg("first_tile"), rd.RuntimeArg("num_tiles"), rd.RuntimeArg("lane")
	sx, sy := cclNoCArgs(rd, "sender")
	b = rd.Builder()
	n := k.laneCount(b, count, lane)
	tileOf := func(j kir.Expr) kir.Expr { return kir.Add(lane, kir.Mul(j, kir.Ci(m))) }
	l0 := blocks.Scratch(b, cbIn0, "local_base")
	b.If(kir.Gt(n, kir.C(0)), func() {
		at := func(j kir.Var, off int) kir.Expr { return kir.Add(kir.Add(l0, kir.Mul(j, kir.Ci(k.tb))), kir.Ci(off)) }
		b.Comment("this lane's local segments, all in flight")
		b.For("j", kir.C(0), n, func(j kir.Var) {
			pg := kir.Add(first, tileOf(j))
			for _, sg := range c.segs {
				b.NoCAsyncRead(kir.Add(k.dram(xa, pg), kir.Ci(sg.Off)), at(j, sg.Off), kir.Ci(sg.Size))
			}
		})
		b.NoCAsyncReadBarrier()
		b.Comment("to this card's slice of the output and, packed, to the sender's staging")
		b.For("j", kir.C(0), n, func(j kir.Var) {
			i := b.Let("i", kir.Add(first, tileOf(j)))
			coff := 0
			for _, sg := range c.segs {
				b.NoCAsyncWrite(at(j, sg.Off), kir.Add(k.dram(oa, k.page(dev, i)), kir.Ci(sg.Off)), kir.Ci(sg.Size))
				b.NoCAsyncWrite(at(j, sg.Off), kir.NoCAddr{X: sx, Y: sy, Addr: packed(pStaging, tileOf(j), coff)}, kir.Ci(sg.Size))
				coff += sg.Size
			}
		})
		b.NoCAsyncWriteBarrier()
	})
	blocks.ReleaseScratch(b, cbIn0)
	b.NoCSemaphoreInc(kir.NoCAddr{X: sx, Y: sy, Addr: kir.GetEthSemaphore{ID: kir.C(cclSemEth)}}, kir.C(1))

	// Unpackers: the peer's segments from the receiver's staging to its
	// slice of the output.
	wr := p.AddKernel(&kir.Kernel{Name: "writer", Role: kir.RoleWriter, Processor: kir.RISCV0, NoC: 0, Cores: rs})
	uStaging := wr.CompileArg("staging_addr", uint32(k.staging))
	wdev := wr.CommonArg("device_id", kir.DeviceID())
	woa := wr.CommonArg("out_addr", kir.BufferAddr(k.outName, 0))
	wfirst, wcount, wlane := wr.RuntimeArg("first_tile"), wr.RuntimeArg("num_tiles"), wr.RuntimeArg("lane")
	ex, ey := cclNoCArgs(wr, "receiver")
	b = wr.Builder()
	arrived := b.Let("arrived_sem", kir.GetSemaphore{ID: kir.C(cclSemArrived)})
	wn := k.laneCount(b, wcount, wlane)
	wTileOf := func(j kir.Expr) kir.Expr { return kir.Add(wlane, kir.Mul(j, kir.Ci(m))) }
	r0 := blocks.Scratch(b, cbIn1, "received_base")
	b.NoCSemaphoreWait(arrived, kir.C(1))
	b.If(kir.Gt(wn, kir.C(0)), func() {
		at := func(j kir.Var, off int) kir.Expr { return kir.Add(kir.Add(r0, kir.Mul(j, kir.Ci(k.tb))), kir.Ci(off)) }
		b.For("j", kir.C(0), wn, func(j kir.Var) {
			coff := 0
			for _, sg := range c.segs {
				b.NoCAsyncRead(kir.NoCAddr{X: ex, Y: ey, Addr: packed(uStaging, wTileOf(j), coff)}, at(j, sg.Off), kir.Ci(sg.Size))
				coff += sg.Size
			}
		})
		b.NoCAsyncReadBarrier()
		kk := b.Let("chunk", k.chunkIndex(wdev, kir.C(0), 1))
		b.For("j", kir.C(0), wn, func(j kir.Var) {
			i := b.Let("i", kir.Add(wfirst, wTileOf(j)))
			for _, sg := range c.segs {
				b.NoCAsyncWrite(at(j, sg.Off), kir.Add(k.dram(woa, k.page(kk, i)), kir.Ci(sg.Off)), kir.Ci(sg.Size))
			}
		})
		b.NoCAsyncWriteBarrier()
	})
	blocks.ReleaseScratch(b, cbIn1)
	b.NoCSemaphoreInc(kir.NoCAddr{X: ex, Y: ey, Addr: kir.GetEthSemaphore{ID: kir.C(cclSemEth)}}, kir.C(1))

	for l := range pl.Links {
		f, cnt := k.linkRange(l)
		es.SetRuntimeArgs(k.east[l], kir.U32(uint32(cnt)))
		vals := []kir.ArgValue{kir.U32(uint32(cnt))}
		for _, w := range k.workers[l] {
			vals = append(vals, kir.NoCX(w), kir.NoCY(w))
		}
		er.SetRuntimeArgs(k.west[l], vals...)
		for j, w := range k.workers[l] {
			lv := kir.U32(uint32(j))
			rd.SetRuntimeArgs(w, kir.U32(uint32(f)), kir.U32(uint32(cnt)), lv, kir.NoCX(k.east[l]), kir.NoCY(k.east[l]))
			wr.SetRuntimeArgs(w, kir.U32(uint32(f)), kir.U32(uint32(cnt)), lv, kir.NoCX(k.west[l]), kir.NoCY(k.west[l]))
		}
	}
	return nil
}
