package multicore

import (
	"testing"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower/blocks"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/sim/kexec"
)

// ringProgram builds a program that moves every card's src buffer to the
// next card's out buffer through r: the sender reads each packet's tiles
// from src into its staging at tile stride (or, packed, its workers pack
// their tiles' segments into its staging first); the receiver hands every
// packet to its workers, which store their tiles' segments in out.
func ringProgram(t *testing.T, tg *target.Target, r *Ring, packed bool) *kir.Program {
	t.Helper()
	p := kir.NewProgram("ring")
	src := dramBuffer(p, "src", r.TileBytes, r.ChunkTiles)
	out := dramBuffer(p, "out", r.TileBytes, r.ChunkTiles)
	var workers []kir.Core
	for _, w := range r.Workers {
		workers = append(workers, w...)
	}
	wrs := rangesOf(workers)
	p.AddSemaphore(kir.Semaphore{ID: r.SemEth, Cores: append(rangesOf(r.East), rangesOf(r.West)...)})
	p.AddSemaphore(kir.Semaphore{ID: r.SemArrived, Cores: wrs})
	cbs := blocks.NewCBPlan(p, tg, wrs)
	scratch := cbs.Pages(blocks.InputCB, "received", ir.FP32, r.TileBytes*r.LinkTiles, 1)

	es := p.AddKernel(&kir.Kernel{Name: "sender", Role: kir.RoleReader, Processor: kir.RISCV0, NoC: 0, Cores: rangesOf(r.East)})
	sAcc := access(t, tg, es, src)
	staging := es.CompileArg("staging_addr", uint32(r.Staging))
	first, count := es.RuntimeArg("first_tile"), es.RuntimeArg("num_tiles")
	b := es.Builder()
	ready := b.Let("ready_sem", kir.GetEthSemaphore{ID: kir.Ci(r.SemEth)})
	if packed {
		b.EthNoCSemaphoreWait(ready, kir.Ci(r.M()))
		r.Send(b, staging, true, true, count, staging)
	} else {
		r.Packets(b, count, func(base, cnt kir.Var) {
			b.For("t", kir.C(0), cnt, func(t kir.Var) {
				blocks.ReadPageTo(b, sAcc, kir.Add(kir.Add(first, base), t), r.TileAddr(staging, t, 0))
			})
			b.NoCAsyncReadBarrier()
			r.Send(b, staging, false, false, cnt, staging)
		})
	}

	er := p.AddKernel(&kir.Kernel{Name: "receiver", Role: kir.RoleWriter, Processor: kir.RISCV0, NoC: 0, Cores: rangesOf(r.West)})
	rcount := er.RuntimeArg("num_tiles")
	peers := r.DeclarePeers(er, "worker")
	b = er.Builder()
	free := b.Let("free_sem", kir.GetEthSemaphore{ID: kir.Ci(r.SemEth)})
	r.Packets(b, rcount, func(_, cnt kir.Var) {
		b.EthWaitForBytes(kir.Mul(cnt, kir.Ci(r.WireTile(packed, packed))))
		r.HandOff(b, free, peers, true)
	})

	// Workers: with packed, a packer (its lane's segments of src into the
	// sender's staging); always an unpacker into out.
	var pk *kir.Kernel
	if packed {
		pk = p.AddKernel(&kir.Kernel{Name: "packer", Role: kir.RoleReader, Processor: kir.RISCV1, NoC: 1, Cores: wrs})
		local := cbs.Pages(blocks.InputCB, "local", ir.FP32, r.TileBytes*r.LinkTiles, 1)
		pAcc := access(t, tg, pk, src)
		staging := pk.CompileArg("staging_addr", uint32(r.Staging))
		first, count, lane := pk.RuntimeArg("first_tile"), pk.RuntimeArg("num_tiles"), pk.RuntimeArg("lane")
		sx, sy := pk.RuntimeArg("sender_x"), pk.RuntimeArg("sender_y")
		b = pk.Builder()
		n := r.LaneCount(b, count, lane)
		l1 := blocks.Scratch(b, local, "l1")
		tile := func(j kir.Var) kir.Expr { return kir.Add(lane, kir.Mul(j, kir.Ci(r.M()))) }
		b.For("j", kir.C(0), n, func(j kir.Var) {
			for _, sg := range r.Segs {
				b.NoCAsyncRead(pAcc.PageAddrAt(kir.Add(first, tile(j)), sg.Off), r.TileAddr(l1, j, sg.Off), kir.Ci(sg.Size))
			}
		})
		b.NoCAsyncReadBarrier()
		b.For("j", kir.C(0), n, func(j kir.Var) {
			r.EachSegment(func(sg Span, coff int) {
				b.NoCAsyncWrite(r.TileAddr(l1, j, sg.Off), kir.NoCAddr{X: sx, Y: sy, Addr: r.PackedAddr(staging, tile(j), coff)}, kir.Ci(sg.Size))
			})
		})
		b.NoCAsyncWriteBarrier()
		blocks.ReleaseScratch(b, local)
		r.Signal(b, sx, sy)
	}
	up := p.AddKernel(&kir.Kernel{Name: "unpacker", Role: kir.RoleWriter, Processor: kir.RISCV0, NoC: 0, Cores: wrs})
	oAcc := access(t, tg, up, out)
	staging = up.CompileArg("staging_addr", uint32(r.Staging))
	ufirst, ucount, lane := up.RuntimeArg("first_tile"), up.RuntimeArg("num_tiles"), up.RuntimeArg("lane")
	ex, ey := up.RuntimeArg("receiver_x"), up.RuntimeArg("receiver_y")
	b = up.Builder()
	arrived := b.Let("arrived_sem", kir.GetSemaphore{ID: kir.Ci(r.SemArrived)})
	l1 := blocks.Scratch(b, scratch, "l1")
	r.Packets(b, ucount, func(base, cnt kir.Var) {
		Await(b, arrived, true)
		b.ForStep("t", lane, cnt, kir.Ci(r.M()), func(t kir.Var) {
			at := r.TileAddr(l1, t, 0)
			r.EachSegment(func(sg Span, coff int) {
				from := r.TileAddr(staging, t, sg.Off)
				if packed {
					from = r.PackedAddr(staging, kir.Add(base, t), coff)
				}
				b.NoCAsyncRead(kir.NoCAddr{X: ex, Y: ey, Addr: from}, kir.Add(at, kir.Ci(sg.Off)), kir.Ci(sg.Size))
			})
			b.NoCAsyncReadBarrier()
			for _, sg := range r.Segs {
				b.NoCAsyncWrite(kir.Add(at, kir.Ci(sg.Off)), oAcc.PageAddrAt(kir.Add(kir.Add(ufirst, base), t), sg.Off), kir.Ci(sg.Size))
			}
		})
		b.NoCAsyncWriteBarrier()
		r.Signal(b, ex, ey)
	})
	blocks.ReleaseScratch(b, scratch)

	for l := range r.East {
		_, n := r.LinkRange(l)
		es.SetRuntimeArgs(r.East[l], r.LinkValues(l, -1)...)
		er.SetRuntimeArgs(r.West[l], append([]kir.ArgValue{kir.U32(uint32(n))}, r.PeerValues(l)...)...)
		for j, w := range r.Workers[l] {
			if pk != nil {
				pk.SetRuntimeArgs(w, append(r.LinkValues(l, j), XY(r.East[l])...)...)
			}
			up.SetRuntimeArgs(w, append(r.LinkValues(l, j), XY(r.West[l])...)...)
		}
	}
	return p
}

// TestRingOnCluster runs Ring alone on two cards cabled as a ring: card
// d's src pages (a pattern of its own) must land, on their wire segments,
// in card d+1's out pages, through every link and worker lane and, with
// several packets per link, through the staging area's reuse.
func TestRingOnCluster(t *testing.T) {
	tg := target.Blackhole()
	const tb = 2048
	for _, tc := range []struct {
		name                          string
		links, m, chunk, link, packet int
		segs                          []Span
		packed                        bool
	}{
		{"whole tiles, packets on one link", 1, 3, 10, 10, 4, []Span{{0, tb}}, false},
		{"row segments, two links", 2, 2, 12, 6, 4, []Span{{0, 64}, {1024, 64}}, false},
		{"one segment, tile stride per segment", 2, 1, 7, 4, 3, []Span{{0, 512}}, false},
		{"packed by the workers, one packet", 2, 4, 16, 8, 8, []Span{{0, 64}, {1024, 64}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			workers, _ := blocks.FirstCores(tg, tc.links*tc.m)
			r := NewRing(tg, tc.links, workers, tc.m)
			r.ChunkTiles, r.LinkTiles, r.PacketTiles, r.TileBytes, r.Segs = tc.chunk, tc.link, tc.packet, tb, tc.segs
			r.Staging, r.SemEth, r.SemArrived = tg.Eth.L1UnreservedBase, 0, 0
			p := ringProgram(t, tg, r, tc.packed)
			kir.Finish(p)
			if err := kir.Validate(p, tg); err != nil {
				t.Fatal(err)
			}
			c, err := kexec.NewCluster(tg, 2, kexec.RingLinks(2, tg.Eth.RingEast, tg.Eth.RingWest))
			if err != nil {
				t.Fatal(err)
			}
			data := [][]byte{pattern(tb*tc.chunk, 1), pattern(tb*tc.chunk, 2)}
			for d, dev := range c.Devices {
				for _, b := range p.Buffers {
					if _, err := dev.Alloc(b); err != nil {
						t.Fatal(err)
					}
				}
				if err := dev.WritePages("src", 0, data[d]); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := c.RunAll(p, kexec.RunOptions{}); err != nil {
				t.Fatal(err)
			}
			for d, dev := range c.Devices {
				got, err := dev.ReadPages("out", 0, tc.chunk)
				if err != nil {
					t.Fatal(err)
				}
				want := data[1-d]
				for pg := 0; pg < tc.chunk; pg++ {
					for _, sg := range tc.segs {
						at := pg*tb + sg.Off
						if i := firstDiff(want[at:at+sg.Size], got[at:at+sg.Size]); i >= 0 {
							t.Fatalf("card %d page %d: byte %d of the segment at %d differs from card %d's", d, pg, i, sg.Off, 1-d)
						}
					}
				}
			}
		})
	}
}
