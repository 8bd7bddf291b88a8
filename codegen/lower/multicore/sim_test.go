package multicore

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower/blocks"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/sim/kexec"
)

// rangesOf is one core range per core.
func rangesOf(cores []kir.Core) []ir.CoreRange {
	rs := make([]ir.CoreRange, len(cores))
	for i, c := range cores {
		rs[i] = c.Range()
	}
	return rs
}

// dramBuffer adds a DRAM-interleaved buffer of pages pages of pageSize
// bytes to p.
func dramBuffer(p *kir.Program, name string, pageSize, pages int) kir.Buffer {
	b := kir.Buffer{Name: name, Mem: ir.DRAM, DType: ir.FP32, Layout: ir.TileLayout, PageSize: pageSize, Pages: pages}
	p.AddBuffer(b)
	return b
}

// access declares buf's address as common arg name+"_addr" of k.
func access(t *testing.T, tg *target.Target, k *kir.Kernel, buf kir.Buffer) *blocks.Access {
	t.Helper()
	a, err := blocks.NewAccess(k, tg, buf.Name+"_addr", buf)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// runSim finishes and validates p, writes in (buffer name -> bytes from
// page 0) to a fresh simulated device, runs p and returns buffer out.
func runSim(t *testing.T, tg *target.Target, p *kir.Program, in map[string][]byte, out string) []byte {
	t.Helper()
	return runSimL1(t, tg, p, in, out, nil)
}

// runSimL1 is runSim with every core of p's unreserved L1 (the CBs')
// filled with the word fill first (nil: left as the device has it), as
// a previous program may leave it: what a program reads there before it
// writes it is garbage.
func runSimL1(t *testing.T, tg *target.Target, p *kir.Program, in map[string][]byte, out string, fill *uint32) []byte {
	t.Helper()
	kir.Finish(p)
	if err := kir.Validate(p, tg); err != nil {
		t.Fatal(err)
	}
	d := kexec.NewDevice(tg)
	for _, b := range p.Buffers {
		_, err := d.Alloc(b)
		if data, ok := in[b.Name]; ok && err == nil {
			err = d.WritePages(b.Name, 0, data)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if fill != nil {
		lo := tg.L1UnreservedBase
		junk := make([]byte, tg.L1Size-lo)
		for i := 0; i < len(junk); i += 4 {
			binary.LittleEndian.PutUint32(junk[i:], *fill)
		}
		for _, c := range p.Cores() {
			if err := d.WriteL1(c, uint32(lo), junk); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := d.Run(p, kexec.RunOptions{}); err != nil {
		t.Fatal(err)
	}
	buf := p.Buffer(out)
	got, err := d.ReadPages(out, 0, buf.Pages)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// pattern is n bytes that differ from page to page and within a page.
func pattern(n, seed int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i/251 + seed)
	}
	return b
}

// firstDiff is the first index where a and b differ, or -1.
func firstDiff(a, b []byte) int {
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}

// exchangeValue is core i's partial in the exchange tests: fp32 numbers of
// mixed magnitudes, so that their sums round differently in different
// orders.
func exchangeValue(i int) float32 {
	v := math.Ldexp(1+float64(uint32(i*2654435761)>>9)/(1<<23), (i*5)%21-10)
	if i%3 == 1 {
		v = -v
	}
	return float32(v)
}

// exchangeSum is the sum of vals as an Exchange with subgroups of fan
// cores adds it (fan 0 or >= len(vals): one running sum in core order;
// else each subgroup's running sum, then those in order), in float32.
func exchangeSum(vals []float32, fan int) float32 {
	if fan <= 0 || fan >= len(vals) {
		fan = len(vals)
	}
	var total float32
	for s := 0; s < len(vals); s += fan {
		sub := vals[s]
		for _, v := range vals[s+1 : min(s+fan, len(vals))] {
			sub += v
		}
		if s == 0 {
			total = sub
		} else {
			total += sub
		}
	}
	return total
}

// TestExchangeOnSim runs Exchange alone: core i's partial page holds
// exchangeValue(i) in every fp32 word; every core must receive its group's
// sum, added in the exchange's order (exchangeSum) bit for bit, in the
// first Bytes of its result page. The two-level cases (fan > 0) cover odd
// groups, subgroups that do not divide the group (the last one smaller,
// down to one core) and groups over NoC gaps and grid rows; their values
// are chosen so that the one-level order gives another sum in at least
// one group.
func TestExchangeOnSim(t *testing.T) {
	tg := target.Blackhole()
	tb := ir.FP32.TileBytes()
	for _, tc := range []struct {
		name                 string
		first, group, groups int
		fan                  int // Exchange.Fan
		bytes                int
		shared               bool // Partial and Local are one CB (as in the GDN recurrence)
	}{
		{"pairs", 0, 2, 3, 0, tb, false},
		{"one row sums", 3, 4, 2, 0, 64, false},
		{"group across NoC gap", 0, 11, 1, 0, 64, true},
		{"groups over rows", 40, 7, 5, 0, tb, true},
		{"fan of group is one level", 0, 5, 2, 5, 64, false},
		{"tree 9 by 3", 0, 9, 2, 3, tb, false},
		{"tree 7 by 3 (3,3,1)", 5, 7, 3, 3, 64, false},
		{"tree 5 by 2 shared CB", 13, 5, 3, 2, tb, true},
		{"tree 27 by 7 across NoC gap and rows", 0, 27, 2, 7, 64, false},
		{"tree 13 by 4 (4,4,4,1) over rows", 30, 13, 4, 4, tb, true},
		{"tree fan 1", 2, 4, 2, 1, 64, false},
		{"tree 11 by 4 (4,4,3) across NoC gap", 0, 11, 3, 4, 64, false},
		{"tree 40 by 8 from a row's last core", 32, 40, 1, 8, 64, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := tc.group * tc.groups
			cores := coresFrom(tg, tc.first, n)
			rs := rangesOf(cores)
			p := kir.NewProgram("exchange")
			out := dramBuffer(p, "out", tb, n)
			cbs := blocks.NewCBPlan(p, tg, rs)
			x := &Exchange{T: tg, Group: tc.group, Fan: tc.fan, Cores: cores, Ranges: rs, Page: tb, Bytes: tc.bytes, PartialName: "partial", ResultName: "sum"}
			x.Partial = cbs.Output("partial", ir.FP32, 1)
			x.Gather = cbs.Input("gather", ir.FP32, x.GatherPages())
			x.Local = x.Partial
			if !tc.shared {
				x.Local = cbs.Output("local", ir.FP32, 1)
			}
			x.Result = cbs.Input("result", ir.FP32, 1)
			if n := x.SumsPages(); n > 0 {
				x.Sums = cbs.Input("sums", ir.FP32, n)
			}
			in := cbs.Input("value", ir.FP32, 1)
			x.AddSemaphores(p, 0, 1, 2)

			rd := blocks.NewReaderKernel(p, rs)
			value := rd.RuntimeArg("value")
			b := rd.Builder()
			b.CBReserveBack(in, kir.C(1))
			l1 := b.Let("l1", kir.GetWritePtr{CB: in})
			b.For("w", kir.C(0), kir.Ci(tb/4), func(w kir.Var) { b.L1Write32(kir.Add(l1, kir.Mul(w, kir.C(4))), value) })
			b.CBPushBack(in, kir.C(1))

			cp := blocks.NewComputeKernel(p, rs, kir.ComputeConfig{FP32DestAccEn: true})
			role := x.ComputeDeclare(cp)
			c := blocks.NewCompute(p, cp)
			c.Startup(in, in, x.Partial)
			c.B.CBWaitFront(in, kir.C(1))
			c.Acquire()
			c.Copy(in, kir.C(0), kir.C(0))
			c.PackOut(x.Partial, 1)
			c.B.CBPopFront(in, kir.C(1))
			x.Combine(c, role, "the group's sum", func() {}, nil)

			wr := blocks.NewWriterKernel(p, rs)
			ea := x.Declare(wr)
			page := wr.RuntimeArg("page")
			oAcc := access(t, tg, wr, out)
			b = wr.Builder()
			x.Emit(b, ea)
			blocks.WritePages(b, oAcc, x.Result, page, kir.C(1))

			vals := make([]float32, n)
			for i, core := range cores {
				ex, err := x.Values(i, wr.NoC)
				if err != nil {
					t.Fatal(err)
				}
				vals[i] = exchangeValue(i)
				rd.SetRuntimeArgs(core, kir.U32(math.Float32bits(vals[i])))
				cp.SetRuntimeArgs(core, x.ComputeValue(i))
				wr.SetRuntimeArgs(core, append(ex, kir.U32(uint32(i)))...)
			}
			want := make([]float32, tc.groups)
			discriminates := false
			for g := range want {
				grp := vals[g*tc.group : (g+1)*tc.group]
				want[g] = exchangeSum(grp, tc.fan)
				discriminates = discriminates || want[g] != exchangeSum(grp, 0)
			}
			if tc.fan > 1 && tc.fan < tc.group && !discriminates { // (fan 1 adds in the one-level order)
				t.Fatalf("the values sum alike on one and two levels: the case cannot tell the orders apart")
			}
			got := runSim(t, tg, p, nil, "out")
			for i := range cores {
				w := want[i/tc.group]
				for off := 0; off < tc.bytes; off += 4 {
					if v := math.Float32frombits(binary.LittleEndian.Uint32(got[i*tb+off:])); v != w {
						t.Fatalf("core %d: result word %d is %v, want the group's sum %v", i, off/4, v, w)
					}
				}
			}
		})
	}
}

// TestExchangeOneLevelUnchanged: Fan = 0 and Fan >= Group emit the same
// kernels and arguments (the one-level exchange), and a two-level fan
// changes them.
func TestExchangeOneLevelUnchanged(t *testing.T) {
	tg := target.Blackhole()
	build := func(fan int) *kir.Program {
		cores := coresFrom(tg, 0, 12)
		rs := rangesOf(cores)
		p := kir.NewProgram("exchange")
		cbs := blocks.NewCBPlan(p, tg, rs)
		x := &Exchange{T: tg, Group: 6, Fan: fan, Cores: cores, Ranges: rs, Page: 4096, Bytes: 64, PartialName: "partial", ResultName: "sum"}
		x.Partial = cbs.Output("partial", ir.FP32, 1)
		x.Gather = cbs.Input("gather", ir.FP32, x.GatherPages())
		x.Local, x.Result = x.Partial, cbs.Input("result", ir.FP32, 1)
		if n := x.SumsPages(); n > 0 {
			x.Sums = cbs.Input("sums", ir.FP32, n)
		}
		x.AddSemaphores(p, 0, 1, 2)
		cp := blocks.NewComputeKernel(p, rs, kir.ComputeConfig{FP32DestAccEn: true})
		x.Combine(blocks.NewCompute(p, cp), x.ComputeDeclare(cp), "", func() {}, nil)
		wr := blocks.NewWriterKernel(p, rs)
		x.Emit(wr.Builder(), x.Declare(wr))
		for i, core := range cores {
			ex, err := x.Values(i, wr.NoC)
			if err != nil {
				t.Fatal(err)
			}
			cp.SetRuntimeArgs(core, x.ComputeValue(i))
			wr.SetRuntimeArgs(core, ex...)
		}
		return p
	}
	one := build(0)
	if diff := cmp.Diff(one, build(6)); diff != "" {
		t.Errorf("Fan = Group emits another exchange than Fan = 0 (-want +got):\n%s", diff)
	}
	if cmp.Equal(one, build(3)) {
		t.Error("Fan = 3 of 6 emits the one-level exchange")
	}
}

// TestMulticastOnSim runs Multicast alone: the first n cores must each
// receive every page of a DRAM buffer in their CB, which a second kernel
// copies to the core's part of the output.
func TestMulticastOnSim(t *testing.T) {
	tg := target.Blackhole()
	for _, tc := range []struct {
		name                string
		cores, pages, psize int
	}{
		{"two cores one chunk", 2, 3, 2048},
		{"row across NoC gap", 11, 10, 4096}, // chunks of 4 pages: 4, 4, 2
		{"rows", 30, 9, 8192},
		{"whole grid", 110, 5, 16384}, // a page per chunk
	} {
		t.Run(tc.name, func(t *testing.T) {
			cores, rs := blocks.FirstCores(tg, tc.cores)
			p := kir.NewProgram("multicast")
			src := dramBuffer(p, "src", tc.psize, tc.pages)
			out := dramBuffer(p, "out", tc.psize, tc.pages*tc.cores)
			cbs := blocks.NewCBPlan(p, tg, rs)
			cb := cbs.Pages(blocks.InputCB, "shared", ir.FP32, tc.psize, tc.pages)

			wr := blocks.NewWriterKernel(p, rs)
			sAcc := access(t, tg, wr, src)
			m := Multicast{CB: cb, Pages: tc.pages, PageSize: tc.psize, SemReady: 0, SemValid: 1, Name: "src", What: "the pages",
				Read: func(b *kir.Builder, pg, l1 kir.Expr) { blocks.ReadPageTo(b, sAcc, pg, l1) }}
			vals, err := m.Emit(p, tg, wr, cores, rs)
			if err != nil {
				t.Fatal(err)
			}
			rd := blocks.NewReaderKernel(p, rs)
			oAcc := access(t, tg, rd, out)
			first := rd.RuntimeArg("first")
			blocks.WritePages(rd.Builder(), oAcc, cb, first, kir.Ci(tc.pages))
			for i, c := range cores {
				wr.SetRuntimeArgs(c, vals[c]...)
				rd.SetRuntimeArgs(c, kir.U32(uint32(i*tc.pages)))
			}
			data := pattern(tc.psize*tc.pages, 1)
			got := runSim(t, tg, p, map[string][]byte{"src": data}, "out")
			for i := range cores {
				if at := firstDiff(data, got[i*len(data):(i+1)*len(data)]); at >= 0 {
					t.Fatalf("core %d received byte %d of the pages wrong", i, at)
				}
			}
		})
	}
}

// TestMulticastRoundsOnSim runs Multicast for several rounds (Rounds):
// round r moves pages [r*pages, (r+1)*pages) of a DRAM buffer into a CB
// of one round's pages or of a ring of two, on every core; a second
// kernel copies each round to the core's part of the output, so every
// core must hold every round's pages in order.
func TestMulticastRoundsOnSim(t *testing.T) {
	tg := target.Blackhole()
	for _, tc := range []struct {
		name                              string
		cores, rounds, ring, pages, psize int
		blocks                            int
		loopback                          bool
	}{
		{"two cores ring of one", 2, 3, 1, 3, 2048, 1, false},
		{"across NoC gap ring of two", 11, 4, 2, 10, 4096, 1, false}, // chunks of 4 pages: 4, 4, 2
		{"whole grid ring of two", 110, 3, 2, 5, 16384, 1, false},    // a page per chunk
		// a sender per rectangle, multicasting to itself too
		{"loopback row and a bit", 14, 3, 2, 10, 4096, 1, true},
		{"loopback lone sender", 12, 2, 1, 3, 2048, 1, true}, // (0,1) alone in its rectangle
		{"loopback two row blocks", 108, 2, 2, 4, 4096, 2, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cores, rs := blocks.FirstCores(tg, tc.cores)
			p := kir.NewProgram("multicast_rounds")
			all := tc.pages * tc.rounds
			src := dramBuffer(p, "src", tc.psize, all)
			out := dramBuffer(p, "out", tc.psize, all*tc.cores)
			cbs := blocks.NewCBPlan(p, tg, rs)
			cb := cbs.Pages(blocks.InputCB, "shared", ir.FP32, tc.psize, tc.ring*tc.pages)

			wr := blocks.NewWriterKernel(p, rs)
			sAcc := access(t, tg, wr, src)
			m := Multicast{CB: cb, Pages: tc.pages, PageSize: tc.psize, SemReady: 0, SemValid: 1, Name: "src", What: "the pages",
				Read: func(b *kir.Builder, pg, l1 kir.Expr) { blocks.ReadPageTo(b, sAcc, pg, l1) }, Loopback: tc.loopback}
			if tc.blocks > 1 {
				// every run multicasts the same pages: each core must still get them all
				m.Blocks = tc.blocks
			}
			r, vals, err := m.Start(p, tg, wr, cores, rs)
			if err != nil {
				t.Fatal(err)
			}
			wb := wr.Builder()
			wb.For("r", kir.C(0), kir.Ci(tc.rounds), func(i kir.Var) { r.Round(wb, i) })
			r.Finish(wb)
			rd := blocks.NewReaderKernel(p, rs)
			oAcc := access(t, tg, rd, out)
			first := rd.RuntimeArg("first")
			blocks.WritePages(rd.Builder(), oAcc, cb, first, kir.Ci(all))
			for i, c := range cores {
				wr.SetRuntimeArgs(c, vals[c]...)
				rd.SetRuntimeArgs(c, kir.U32(uint32(i*all)))
			}
			data := pattern(tc.psize*all, 1)
			got := runSim(t, tg, p, map[string][]byte{"src": data}, "out")
			for i := range cores {
				if at := firstDiff(data, got[i*len(data):(i+1)*len(data)]); at >= 0 {
					t.Fatalf("core %d received byte %d (round %d) of the pages wrong", i, at, at/(tc.pages*tc.psize))
				}
			}
		})
	}
}

// TestPushOnSim runs Push alone: pusher j reads pages j, j+P, ... of a
// DRAM buffer (P pushers) and pushes their spans into the owners' CB;
// each owner writes its chunk out, so the output must equal the input on
// the spans.
func TestPushOnSim(t *testing.T) {
	tg := target.Blackhole()
	const psize = 2048
	for _, tc := range []struct {
		name         string
		pushers      int
		owners       []int // pages per owner (consecutive chunks)
		ownerFirst   int   // worker index of the first owner
		spans        []Span
		wantPushArgs int
	}{
		{"whole pages", 4, []int{3, 2, 2}, 20, []Span{{0, psize}}, 2},
		{"row segments", 3, []int{4, 4}, 50, []Span{{0, 64}, {512, 64}}, 3},
		{"pushers across rows", 25, []int{10, 10, 10}, 70, []Span{{0, 1024}}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const semAddr, semCount = 2, 3
			pushers, prs := blocks.FirstCores(tg, tc.pushers)
			owners := coresFrom(tg, tc.ownerFirst, len(tc.owners))
			ors := rangesOf(owners)
			pages, starts := 0, []int{}
			for _, n := range tc.owners {
				starts = append(starts, pages)
				pages += n
			}
			push, err := NewPush(pages, owners, func(i int) (int, int) { return starts[i], tc.owners[i] })
			if err != nil {
				t.Fatal(err)
			}
			slots := (pages + tc.pushers - 1) / tc.pushers
			if slots != tc.wantPushArgs {
				t.Fatalf("%d slots per pusher, want %d", slots, tc.wantPushArgs)
			}
			p := kir.NewProgram("push")
			src := dramBuffer(p, "src", psize, pages)
			out := dramBuffer(p, "out", psize, pages)
			maxOwned := 0
			for _, n := range tc.owners {
				maxOwned = max(maxOwned, n)
			}
			hCB := blocks.NewCBPlan(p, tg, ors).Pages(blocks.InputCB, "h", ir.FP32, psize, maxOwned)
			sCB := blocks.NewCBPlan(p, tg, prs).Pages(blocks.InputCB, "staged", ir.FP32, psize, slots)
			p.AddSemaphore(kir.Semaphore{ID: semAddr, Cores: append(append([]ir.CoreRange(nil), prs...), ors...)})
			p.AddSemaphore(kir.Semaphore{ID: semCount, Cores: append(append([]ir.CoreRange(nil), prs...), ors...)})

			// Owners: the first publishes the CB; each waits for its pages
			// and writes them out.
			ord := p.AddKernel(&kir.Kernel{Name: "owner_reader", Role: kir.RoleReader, Processor: kir.RISCV1, NoC: 1, Cores: ors})
			pub, err := DeclarePublish(tg, ord, "pushers", pushers)
			if err != nil {
				t.Fatal(err)
			}
			leader, count := ord.RuntimeArg("leader"), ord.RuntimeArg("count")
			b := ord.Builder()
			Publish(b, leader, semAddr, hCB, pub, "where the pushers write")
			b.CBReserveBack(hCB, count)
			b.NoCSemaphoreWait(kir.GetSemaphore{ID: kir.Ci(semCount)}, count)
			b.CBPushBack(hCB, count)
			owr := p.AddKernel(&kir.Kernel{Name: "owner_writer", Role: kir.RoleWriter, Processor: kir.RISCV0, NoC: 0, Cores: ors})
			oAcc := access(t, tg, owr, out)
			ostart, ocount := owr.RuntimeArg("start"), owr.RuntimeArg("count")
			blocks.WritePages(owr.Builder(), oAcc, hCB, ostart, ocount)
			for i, c := range owners {
				ord.SetRuntimeArgs(c, kir.U32(uint32(min(1, 1-i))), kir.U32(uint32(tc.owners[i])))
				owr.SetRuntimeArgs(c, kir.U32(uint32(starts[i])), kir.U32(uint32(tc.owners[i])))
			}

			// Pushers: stage pages j, j+P, ... and push them.
			prd := p.AddKernel(&kir.Kernel{Name: "pusher_reader", Role: kir.RoleReader, Processor: kir.RISCV1, NoC: 1, Cores: prs})
			sAcc := access(t, tg, prd, src)
			lane, n := prd.RuntimeArg("lane"), prd.RuntimeArg("n")
			b = prd.Builder()
			b.CBReserveBack(sCB, n)
			l1 := b.Let("l1", kir.GetWritePtr{CB: sCB})
			b.For("s", kir.C(0), n, func(s kir.Var) {
				blocks.ReadPageTo(b, sAcc, kir.Add(lane, kir.Mul(s, kir.Ci(tc.pushers))), kir.Add(l1, kir.Mul(s, kir.Ci(psize))))
			})
			b.NoCAsyncReadBarrier()
			b.CBPushBack(sCB, n)
			pwr := p.AddKernel(&kir.Kernel{Name: "pusher_writer", Role: kir.RoleWriter, Processor: kir.RISCV0, NoC: 0, Cores: prs})
			wn := pwr.RuntimeArg("n")
			pa := DeclarePushArgs(pwr, slots)
			b = pwr.Builder()
			base := AwaitAddress(b, semAddr)
			b.CBWaitFront(sCB, wn)
			pa.Writes(b, wn, kir.GetReadPtr{CB: sCB}, base, psize, tc.spans)
			b.NoCAsyncWriteBarrier()
			pa.Counts(b, wn, semCount)
			b.CBPopFront(sCB, wn)
			for j, c := range pushers {
				mine := (pages - j + tc.pushers - 1) / tc.pushers
				prd.SetRuntimeArgs(c, kir.U32(uint32(j)), kir.U32(uint32(mine)))
				pwr.SetRuntimeArgs(c, append([]kir.ArgValue{kir.U32(uint32(mine))}, push.Values(slots, psize, func(s int) int {
					if s < mine {
						return j + s*tc.pushers
					}
					return -1
				})...)...)
			}

			data := pattern(psize*pages, 3)
			got := runSim(t, tg, p, map[string][]byte{"src": data}, "out")
			for pg := 0; pg < pages; pg++ {
				for _, sp := range tc.spans {
					at := pg*psize + sp.Off
					if d := firstDiff(data[at:at+sp.Size], got[at:at+sp.Size]); d >= 0 {
						t.Fatalf("page %d: byte %d differs", pg, sp.Off+d)
					}
				}
			}
		})
	}
}

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
			r := NewRing(tg, tc.links, workers, tc.m, false)
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
