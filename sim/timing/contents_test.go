package timing

import (
	"strings"
	"testing"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
)

// positionProgram is a program whose work is a word of a DRAM buffer,
// the way a decode kernel reads the step's position: on core (0,0) the
// reader reads word 0 of buffer "pos" into a CB page and streams that
// many tiles of "w"; the writer on the same core waits for the page and
// spins a scalar loop as long as the word it reads there (a second
// kernel of the core sees the page). With forward, the reader also
// writes the word to core (5,5)'s CB page and signals it; the kernel
// there spins as long as the word it received.
func positionProgram(tg *target.Target, forward bool) *kir.Program {
	p := kir.NewProgram("position")
	pos := p.AddBuffer(kir.Buffer{Name: "pos", Mem: ir.MemoryConfig{Kind: ir.DRAMInterleaved}, DType: ir.UInt32, Layout: ir.RowMajorLayout, PageSize: 4, Pages: 1})
	w := p.AddBuffer(kir.Buffer{Name: "w", Mem: ir.MemoryConfig{Kind: ir.DRAMInterleaved}, DType: ir.BF16, Layout: ir.TileLayout, PageSize: 2048, Pages: 4096})
	a, b := kir.Core{X: 0, Y: 0}, kir.Core{X: 5, Y: 5}
	cores := []ir.CoreRange{a.Range()}
	if forward {
		cores = append(cores, b.Range())
		p.AddSemaphore(kir.Semaphore{ID: 0, Cores: cores})
	}
	p.AddCB(kir.CB{Index: 0, PageSize: 64, Pages: 1, Format: ir.UInt32, Cores: cores})
	p.AddCB(kir.CB{Index: 1, PageSize: 2048, Pages: 2, Format: ir.BF16, Cores: []ir.CoreRange{a.Range()}})

	rd := p.AddKernel(&kir.Kernel{Name: "reader", Role: kir.RoleReader, Processor: kir.RISCV1, NoC: 1, Cores: []ir.CoreRange{a.Range()}})
	posAddr, wAddr := rd.CommonArg("pos_addr", kir.BufferAddr(pos, 0)), rd.CommonArg("w_addr", kir.BufferAddr(w, 0))
	r := rd.Builder()
	r.CBReserveBack(0, kir.C(1))
	slot := r.Let("slot", kir.GetWritePtr{CB: 0})
	r.NoCAsyncRead(kir.DRAMBankAddr{Bank: kir.C(0), Offset: posAddr}, slot, kir.C(4))
	r.NoCAsyncReadBarrier()
	n := r.Let("n", kir.L1Read32{Addr: slot})
	if forward {
		bx, by, _ := tg.WorkerNoC(b.X, b.Y)
		r.NoCAsyncWrite(slot, kir.NoCAddr{X: kir.Ci(bx), Y: kir.Ci(by), Addr: kir.GetWritePtr{CB: 0}}, kir.C(4))
		r.NoCAsyncWriteBarrier()
		r.NoCSemaphoreInc(kir.NoCAddr{X: kir.Ci(bx), Y: kir.Ci(by), Addr: kir.GetSemaphore{ID: kir.C(0)}}, kir.C(1))
	}
	r.CBPushBack(0, kir.C(1))
	r.For("i", kir.C(0), n, func(i kir.Var) {
		r.CBReserveBack(1, kir.C(1))
		bank := kir.Mod(i, kir.Ci(tg.DRAMBanks))
		off := kir.Add(wAddr, kir.Mul(kir.Div(i, kir.Ci(tg.DRAMBanks)), kir.C(2048)))
		r.NoCAsyncRead(kir.DRAMBankAddr{Bank: bank, Offset: off}, kir.GetWritePtr{CB: 1}, kir.C(2048))
		r.NoCAsyncReadBarrier()
		r.CBPushBack(1, kir.C(1))
		r.CBWaitFront(1, kir.C(1)) // the reader consumes its own tiles
		r.CBPopFront(1, kir.C(1))
	})

	wr := p.AddKernel(&kir.Kernel{Name: "writer", Role: kir.RoleWriter, Processor: kir.RISCV0, NoC: 0, Cores: []ir.CoreRange{a.Range()}})
	x := wr.Builder()
	x.CBWaitFront(0, kir.C(1))
	m := x.Let("m", kir.L1Read32{Addr: kir.GetReadPtr{CB: 0}})
	x.For("j", kir.C(0), kir.Mul(m, kir.C(100)), func(kir.Var) {})
	x.CBPopFront(0, kir.C(1))

	if forward {
		fw := p.AddKernel(&kir.Kernel{Name: "remote", Role: kir.RoleWriter, Processor: kir.RISCV0, NoC: 0, Cores: []ir.CoreRange{b.Range()}})
		f := fw.Builder()
		f.NoCSemaphoreWait(kir.GetSemaphore{ID: kir.C(0)}, kir.C(1))
		k := f.Let("k", kir.L1Read32{Addr: kir.GetWritePtr{CB: 0}})
		f.For("j", kir.C(0), kir.Mul(k, kir.C(100)), func(kir.Var) {})
	}
	return p
}

// finish is each kernel's latest finish (us) in pt on device 0.
func finish(pt *ProgramTime) map[string]float64 {
	out := map[string]float64{}
	for _, k := range pt.Devices[0].Kernels {
		out[k.Kernel] = k.FinishUS
	}
	return out
}

// TestKnownContentsDriveLoops: the position word of a buffer of known
// contents (Options.Contents) reaches the L1 word a kernel loads, so the
// predicted time follows it: the reader streams pos tiles, the writer on
// the same core spins on the CB page's word, the remote core on the word
// written to it. Without contents the word reads 0, as any data.
func TestKnownContentsDriveLoops(t *testing.T) {
	tg := target.Blackhole()
	prm := Default()
	p := positionProgram(tg, true)
	at := func(words []uint32) map[string]float64 {
		t.Helper()
		opt := Options{}
		if words != nil {
			opt.Contents = map[string][]uint32{"pos": words}
		}
		pt, err := Simulate(p, tg, prm, opt)
		if err != nil {
			t.Fatal(err)
		}
		return finish(pt)
	}
	none, lo, hi := at(nil), at([]uint32{64}), at([]uint32{1024})
	if d := at([]uint32{0}); d["reader"] != none["reader"] || d["writer"] != none["writer"] || d["remote"] != none["remote"] {
		t.Errorf("position 0 %v differs from no contents %v", d, none)
	}
	for _, k := range []string{"reader", "writer", "remote"} {
		if !(none[k] < lo[k] && lo[k] < hi[k]) {
			t.Errorf("%s finishes at %.2f us (no contents), %.2f (64), %.2f (1024); want it to grow with the word", k, none[k], lo[k], hi[k])
		}
	}
	// The reader's tile stream scales with the word: 960 more tiles.
	if r := (hi["reader"] - none["reader"]) / (lo["reader"] - none["reader"]); r < 12 || r > 20 {
		t.Errorf("reader: 1024 tiles take %.1fx the time of 64", r)
	}
	// The spin loops: 100 iterations per unit of the word at ScalarCycles or more each.
	if d, min := hi["writer"]-lo["writer"], prm.cyclesToUS(960*100*prm.ScalarCycles); d < min {
		t.Errorf("writer: %.2f us more at 1024 than at 64, want at least %.2f", d, min)
	}
}

// TestKnownContentsRefused: contents of a buffer the program lacks, or of
// one the model cannot place data in, are errors.
func TestKnownContentsRefused(t *testing.T) {
	tg := target.Blackhole()
	p := positionProgram(tg, false)
	if _, err := Simulate(p, tg, Default(), Options{Contents: map[string][]uint32{"nope": {1}}}); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("unknown buffer: %v", err)
	}
	p.Buffers[0].Mem = ir.MemoryConfig{Kind: ir.L1Interleaved}
	if _, err := Simulate(p, tg, Default(), Options{Contents: map[string][]uint32{"pos": {1}}}); err == nil || !strings.Contains(err.Error(), "DRAM-interleaved") {
		t.Errorf("L1 buffer: %v", err)
	}
}

// TestKnownContentsPages: a word of a later page of a multi-page buffer
// is found in its bank: page i of an interleaved buffer is in bank i mod
// 8, at slot i / 8.
func TestKnownContentsPages(t *testing.T) {
	tg := target.Blackhole()
	m := &machine{t: tg, p: Default(), prog: kir.NewProgram("pages"), contents: map[string][]uint32{"b": make([]uint32, 20*16)}}
	m.prog.AddBuffer(kir.Buffer{Name: "b", Mem: ir.MemoryConfig{Kind: ir.DRAMInterleaved}, DType: ir.UInt32, Layout: ir.RowMajorLayout, PageSize: 64, Pages: 20})
	m.prog.AddBuffer(kir.Buffer{Name: "c", Mem: ir.MemoryConfig{Kind: ir.DRAMInterleaved}, DType: ir.UInt32, Layout: ir.RowMajorLayout, PageSize: 64, Pages: 20})
	for i := range m.contents["b"] {
		m.contents["b"][i] = uint32(i)
	}
	if err := m.place(); err != nil {
		t.Fatal(err)
	}
	base := uint64(m.bufAddr["b"])
	// page 13: bank 5, slot 1; its word 3 is word 13*16+3 of the buffer.
	ws := m.knownWords(5, base+64+12, 8)
	if len(ws) != 2 || ws[0] != (dataWord{0, 13*16 + 3}) || ws[1] != (dataWord{4, 13*16 + 4}) {
		t.Errorf("words %v", ws)
	}
	// slot 2 of bank 5 would be page 21: past the buffer.
	if ws := m.knownWords(5, base+128, 64); len(ws) != 0 {
		t.Errorf("past the end: %v", ws)
	}
	// the other buffer's pages are not the known one's
	if ws := m.knownWords(5, uint64(m.bufAddr["c"]), 64); len(ws) != 0 {
		t.Errorf("buffer c: %v", ws)
	}
}
