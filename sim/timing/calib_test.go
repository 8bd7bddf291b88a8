package timing

import (
	"fmt"
	"math"
	"testing"

	"github.com/tcc-dev/tcc/codegen"
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
	model "github.com/tcc-dev/tcc/models/qwen27b"
)

// matmulSpec describes a TTNN-like decode matmul [1, K] x [K, N] on the
// first Cores worker cores (row-major): the activation is read once by core
// (0,0) and multicast to the others; each core streams its columns of the
// DRAM-interleaved weights, KBlock k-rows of all its columns per barrier
// into a double-buffered CB, and computes with matmul_block.
type matmulSpec struct {
	Name     string
	Kt, Nt   int
	Cores    int
	Weights  ir.DType
	Fidelity ir.MathFidelity
	// KBlock is the number of k rows of weight tiles read per barrier; 0
	// means 4. InFlight1 forces one tile per barrier (the naive reader).
	KBlock    int
	InFlight1 bool
}

func dram(name string, d ir.DType, pages int) kir.Buffer {
	return kir.Buffer{Name: name, Mem: ir.MemoryConfig{Kind: ir.DRAMInterleaved}, DType: d, Layout: ir.TileLayout, PageSize: d.TileBytes(), Pages: pages}
}

// decodeMatmul builds the program of s with the project's kernel-IR builders.
func decodeMatmul(t *target.Target, s matmulSpec) (*kir.Program, error) {
	if s.Cores < 1 || s.Cores > t.NumWorkers() {
		return nil, fmt.Errorf("%d cores", s.Cores)
	}
	kb := s.KBlock
	if kb == 0 {
		kb = 4
	}
	if s.InFlight1 {
		kb = 1
	}
	per := (s.Nt + s.Cores - 1) / s.Cores
	group := min(per, 8) // output columns per DEST block (8 bf16 tiles in half-sync)
	rows := (s.Cores + t.GridX - 1) / t.GridX
	all := []ir.CoreRange{{X0: 0, Y0: 0, X1: t.GridX - 1, Y1: rows - 1}}
	if s.Cores%t.GridX != 0 {
		all = []ir.CoreRange{{X0: 0, Y0: 0, X1: t.GridX - 1, Y1: rows - 2}, {X0: 0, Y0: rows - 1, X1: s.Cores%t.GridX - 1, Y1: rows - 1}}
		if rows == 1 {
			all = all[1:]
		}
	}
	cores := kir.CoresOf(all)
	p := kir.NewProgram(s.Name)
	act, w, out := p.AddBuffer(dram("act", ir.BF16, s.Kt)), p.AddBuffer(dram("w", s.Weights, s.Kt*s.Nt)), p.AddBuffer(dram("out", ir.BF16, s.Nt))
	wb := s.Weights.TileBytes()
	p.AddCB(kir.CB{Index: 0, PageSize: 2048, Pages: s.Kt, Format: ir.BF16, Cores: all, Name: "act"})
	p.AddCB(kir.CB{Index: 1, PageSize: wb, Pages: 2 * kb * group, Format: s.Weights, Cores: all, Name: "weights"})
	p.AddCB(kir.CB{Index: 16, PageSize: 2048, Pages: group, Format: ir.BF16, Cores: all, Name: "out"})
	p.AddSemaphore(kir.Semaphore{ID: 0, Cores: all})
	last := cores[len(cores)-1]
	x0, y0, _ := t.WorkerNoC(0, 0)
	x1, y1, _ := t.WorkerNoC(t.GridX-1, last.Y)

	rd := p.AddKernel(&kir.Kernel{Name: "reader", Role: kir.RoleReader, Processor: kir.RISCV1, NoC: 1, Cores: all})
	n0, nc, sender := rd.RuntimeArg("n0"), rd.RuntimeArg("ncols"), rd.RuntimeArg("sender")
	actA, wA := rd.CommonArg("act", kir.BufferAddr(act, 0)), rd.CommonArg("w", kir.BufferAddr(w, 0))
	b := rd.Builder()
	sem := b.Let("sem", kir.GetSemaphore{ID: kir.C(0)})
	b.CBReserveBack(0, kir.Ci(s.Kt))
	l1 := b.Let("l1", kir.GetWritePtr{CB: 0})
	b.IfElse(sender, func() {
		b.For("k", kir.C(0), kir.Ci(s.Kt), func(k kir.Var) {
			b.NoCAsyncRead(kir.DRAMBankAddr{Bank: kir.Mod(k, kir.Ci(t.DRAMBanks)), Offset: kir.Add(actA, kir.Mul(kir.Div(k, kir.Ci(t.DRAMBanks)), kir.C(2048)))},
				kir.Add(l1, kir.Mul(k, kir.C(2048))), kir.C(2048))
		})
		b.NoCAsyncReadBarrier()
		const perPacket = 8
		b.ForStep("pk", kir.C(0), kir.Ci(s.Kt), kir.Ci(perPacket), func(pk kir.Var) {
			n := b.Let("n", kir.Sub(kir.Ci(s.Kt), pk))
			b.If(kir.Gt(n, kir.Ci(perPacket)), func() { b.Assign(n, kir.Ci(perPacket)) })
			off := b.Let("off", kir.Add(l1, kir.Mul(pk, kir.C(2048))))
			b.NoCAsyncWriteMulticast(off, kir.MulticastAddr{X0: kir.Ci(x0), Y0: kir.Ci(y0), X1: kir.Ci(x1), Y1: kir.Ci(y1), Addr: off}, kir.Mul(n, kir.C(2048)), kir.Ci(len(cores)-1))
		})
		b.NoCAsyncWriteBarrier()
		b.NoCSemaphoreSet(sem, kir.C(1))
		b.NoCSemaphoreSetMulticast(sem, kir.MulticastAddr{X0: kir.Ci(x0), Y0: kir.Ci(y0), X1: kir.Ci(x1), Y1: kir.Ci(y1), Addr: sem}, kir.Ci(len(cores)-1))
	}, func() {
		b.NoCSemaphoreWait(sem, kir.C(1))
	})
	b.CBPushBack(0, kir.Ci(s.Kt))
	b.ForStep("g", kir.C(0), nc, kir.Ci(group), func(g kir.Var) {
		gc := b.Let("gc", kir.Sub(nc, g))
		b.If(kir.Gt(gc, kir.Ci(group)), func() { b.Assign(gc, kir.Ci(group)) })
		b.ForStep("kb", kir.C(0), kir.Ci(s.Kt), kir.Ci(kb), func(k0 kir.Var) {
			b.CBReserveBack(1, kir.Mul(kir.Ci(kb), gc))
			wp := b.Let("wp", kir.GetWritePtr{CB: 1})
			b.For("kk", kir.C(0), kir.Ci(kb), func(kk kir.Var) {
				b.For("j", kir.C(0), gc, func(j kir.Var) {
					pg := b.Let("pg", kir.Add(kir.Mul(kir.Add(k0, kk), kir.Ci(s.Nt)), kir.Add(kir.Add(n0, g), j)))
					b.NoCAsyncRead(kir.DRAMBankAddr{Bank: kir.Mod(pg, kir.Ci(t.DRAMBanks)), Offset: kir.Add(wA, kir.Mul(kir.Div(pg, kir.Ci(t.DRAMBanks)), kir.Ci(wb)))},
						kir.Add(wp, kir.Mul(kir.Add(kir.Mul(kk, gc), j), kir.Ci(wb))), kir.Ci(wb))
					if s.InFlight1 {
						b.NoCAsyncReadBarrier()
					}
				})
			})
			b.NoCAsyncReadBarrier()
			b.CBPushBack(1, kir.Mul(kir.Ci(kb), gc))
		})
	})

	cp := p.AddKernel(&kir.Kernel{Name: "compute", Role: kir.RoleCompute, Processor: kir.ComputeProc, Cores: all, Compute: kir.ComputeConfig{MathFidelity: s.Fidelity}})
	cnc := cp.RuntimeArg("ncols")
	c := cp.Builder()
	c.MatmulHWStartup(0, 1, 16)
	c.MatmulBlockInit(0, 1, false, kir.Ci(group), kir.C(1), kir.Ci(kb))
	c.CBWaitFront(0, kir.Ci(s.Kt))
	c.ForStep("g", kir.C(0), cnc, kir.Ci(group), func(g kir.Var) {
		gc := c.Let("gc", kir.Sub(cnc, g))
		c.If(kir.Gt(gc, kir.Ci(group)), func() { c.Assign(gc, kir.Ci(group)) })
		c.TileRegsAcquire()
		c.ForStep("kb", kir.C(0), kir.Ci(s.Kt), kir.Ci(kb), func(k0 kir.Var) {
			c.CBWaitFront(1, kir.Mul(kir.Ci(kb), gc))
			c.For("kk", kir.C(0), kir.Ci(kb), func(kk kir.Var) {
				c.MatmulBlock(0, 1, kir.Add(k0, kk), kir.Mul(kk, gc), kir.C(0), false, gc, kir.C(1), kir.Ci(kb))
			})
			c.CBPopFront(1, kir.Mul(kir.Ci(kb), gc))
		})
		c.TileRegsCommit()
		c.CBReserveBack(16, gc)
		c.TileRegsWait()
		c.For("j", kir.C(0), gc, func(j kir.Var) { c.PackTile(j, 16) })
		c.TileRegsRelease()
		c.CBPushBack(16, gc)
	})
	c.CBPopFront(0, kir.Ci(s.Kt))

	wr := p.AddKernel(&kir.Kernel{Name: "writer", Role: kir.RoleWriter, Processor: kir.RISCV0, NoC: 0, Cores: all})
	wn0, wnc := wr.RuntimeArg("n0"), wr.RuntimeArg("ncols")
	outA := wr.CommonArg("out", kir.BufferAddr(out, 0))
	o := wr.Builder()
	o.ForStep("g", kir.C(0), wnc, kir.Ci(group), func(g kir.Var) {
		gc := o.Let("gc", kir.Sub(wnc, g))
		o.If(kir.Gt(gc, kir.Ci(group)), func() { o.Assign(gc, kir.Ci(group)) })
		o.CBWaitFront(16, gc)
		rp := o.Let("rp", kir.GetReadPtr{CB: 16})
		o.For("j", kir.C(0), gc, func(j kir.Var) {
			pg := o.Let("pg", kir.Add(kir.Add(wn0, g), j))
			o.NoCAsyncWrite(kir.Add(rp, kir.Mul(j, kir.C(2048))), kir.DRAMBankAddr{Bank: kir.Mod(pg, kir.Ci(t.DRAMBanks)), Offset: kir.Add(outA, kir.Mul(kir.Div(pg, kir.Ci(t.DRAMBanks)), kir.C(2048)))}, kir.C(2048))
		})
		o.NoCAsyncWriteBarrier()
		o.CBPopFront(16, gc)
	})

	first := 0
	for i, core := range cores {
		n := s.Nt / s.Cores
		if i < s.Nt%s.Cores {
			n++
		}
		isSender := uint32(0)
		if i == 0 {
			isSender = 1
		}
		rd.SetRuntimeArgs(core, kir.U32(uint32(first)), kir.U32(uint32(n)), kir.U32(isSender))
		cp.SetRuntimeArgs(core, kir.U32(uint32(n)))
		wr.SetRuntimeArgs(core, kir.U32(uint32(first)), kir.U32(uint32(n)))
		first += n
	}
	return p, nil
}

// calibrationRow is one measured row of reference/measured.md and the
// kernel structure that reproduces it.
type calibrationRow struct {
	name       string
	measuredUS float64
	tolerance  float64
	program    func(t *target.Target) (*kir.Program, int, error) // program and devices
}

func matmulRow(name string, us float64, s matmulSpec) calibrationRow {
	s.Name = name
	return calibrationRow{name: name, measuredUS: us, tolerance: 0.15, program: func(t *target.Target) (*kir.Program, int, error) {
		p, err := decodeMatmul(t, s)
		return p, 1, err
	}}
}

// matmulRows are the decode matmuls of measured.md (mesh 1x2, per device):
// bfp8_b at HiFi2, bfp4_b at LoFi (the tt-transformers decode policy).
var matmulRows = []calibrationRow{
	matmulRow("gdn in-projection", 117.6, matmulSpec{Kt: 160, Nt: 258, Cores: 44, Weights: ir.BFP8B, Fidelity: ir.HiFi2}),
	matmulRow("gdn out-projection", 49.1, matmulSpec{Kt: 96, Nt: 160, Cores: 33, Weights: ir.BFP8B, Fidelity: ir.HiFi2}),
	matmulRow("mlp gate", 94.7, matmulSpec{Kt: 160, Nt: 272, Cores: 44, Weights: ir.BFP4B, Fidelity: ir.LoFi}),
	matmulRow("mlp up", 90.5, matmulSpec{Kt: 160, Nt: 272, Cores: 44, Weights: ir.BFP4B, Fidelity: ir.LoFi}),
	matmulRow("mlp down", 122.2, matmulSpec{Kt: 272, Nt: 160, Cores: 33, Weights: ir.BFP8B, Fidelity: ir.HiFi2}),
}

// unfusedLayer0 compiles the first decoder layer (a GDN layer) of the full
// 27B unfused decode graph at mesh 1x2: the composed path measured.md's
// per-program rows come from, one op per program.
func unfusedLayer0(tb testing.TB) *codegen.Build {
	tb.Helper()
	g, _, err := model.BuildGraph(model.DefaultOptions(), ir.Mesh{Rows: 1, Cols: 2})
	if err != nil {
		tb.Fatal(err)
	}
	sub, _, err := ir.ExtractRegion(g, g.Layers()[0])
	if err != nil {
		tb.Fatal(err)
	}
	b, err := codegen.Compile(sub, target.Blackhole())
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// predictRow is the row's prediction with prm (the slowest device for mesh rows).
func predictRow(t *target.Target, prm *Params, r calibrationRow) (float64, error) {
	p, n, err := r.program(t)
	if err != nil {
		return 0, err
	}
	pt, err := Simulate(p, t, prm, Options{Devices: n})
	if err != nil {
		return 0, err
	}
	if n > 1 { // measured.md reports the mean of the two cards
		s := 0.0
		for _, d := range pt.Devices {
			s += d.US
		}
		return s / float64(len(pt.Devices)), nil
	}
	return pt.US(), nil
}

func relErr(pred, want float64) float64 { return math.Abs(pred-want) / want }

// smallEltwise builds a TTNN-like small decode program: a unary SFPU op on
// tiles bf16 tiles spread over the first cores of the grid, each core
// reading all its tiles with one barrier, computing, and writing them with
// one barrier.
func smallEltwise(t *target.Target, name string, tiles int) *kir.Program {
	cores := min(tiles, t.NumWorkers())
	per := (tiles + cores - 1) / cores
	cores = (tiles + per - 1) / per
	var rs []ir.CoreRange
	for i := 0; i < cores; i++ {
		rs = append(rs, kir.Core{X: i % t.GridX, Y: i / t.GridX}.Range())
	}
	p := kir.NewProgram(name)
	in, out := p.AddBuffer(dram("in", ir.BF16, tiles)), p.AddBuffer(dram("out", ir.BF16, tiles))
	p.AddCB(kir.CB{Index: 0, PageSize: 2048, Pages: per, Format: ir.BF16, Cores: rs})
	p.AddCB(kir.CB{Index: 16, PageSize: 2048, Pages: per, Format: ir.BF16, Cores: rs})
	page := func(a kir.Expr, pg kir.Var) kir.Expr {
		return kir.DRAMBankAddr{Bank: kir.Mod(pg, kir.Ci(t.DRAMBanks)), Offset: kir.Add(a, kir.Mul(kir.Div(pg, kir.Ci(t.DRAMBanks)), kir.C(2048)))}
	}
	rd := p.AddKernel(&kir.Kernel{Name: "reader", Role: kir.RoleReader, Processor: kir.RISCV1, NoC: 1, Cores: rs})
	first, n := rd.RuntimeArg("first"), rd.RuntimeArg("n")
	inA := rd.CommonArg("in", kir.BufferAddr(in, 0))
	b := rd.Builder()
	b.CBReserveBack(0, n)
	l1 := b.Let("l1", kir.GetWritePtr{CB: 0})
	b.For("i", kir.C(0), n, func(i kir.Var) {
		pg := b.Let("pg", kir.Add(first, i))
		b.NoCAsyncRead(page(inA, pg), kir.Add(l1, kir.Mul(i, kir.C(2048))), kir.C(2048))
	})
	b.NoCAsyncReadBarrier()
	b.CBPushBack(0, n)
	cp := p.AddKernel(&kir.Kernel{Name: "compute", Role: kir.RoleCompute, Processor: kir.ComputeProc, Cores: rs, Compute: kir.ComputeConfig{MathFidelity: ir.HiFi4}})
	cn := cp.RuntimeArg("n")
	c := cp.Builder()
	c.HWStartup(0, 0, 16)
	c.CopyTileInit(0)
	c.SFPUInit(kir.SFPUSquare)
	c.CBWaitFront(0, cn)
	c.CBReserveBack(16, cn)
	c.For("i", kir.C(0), cn, func(i kir.Var) {
		c.TileRegsAcquire()
		c.CopyTile(0, i, kir.C(0))
		c.SFPU(kir.SFPUSquare, kir.C(0))
		c.TileRegsCommit()
		c.TileRegsWait()
		c.PackTile(kir.C(0), 16)
		c.TileRegsRelease()
	})
	c.CBPushBack(16, cn)
	c.CBPopFront(0, cn)
	wr := p.AddKernel(&kir.Kernel{Name: "writer", Role: kir.RoleWriter, Processor: kir.RISCV0, NoC: 0, Cores: rs})
	wf, wn := wr.RuntimeArg("first"), wr.RuntimeArg("n")
	outA := wr.CommonArg("out", kir.BufferAddr(out, 0))
	o := wr.Builder()
	o.CBWaitFront(16, wn)
	rp := o.Let("rp", kir.GetReadPtr{CB: 16})
	o.For("i", kir.C(0), wn, func(i kir.Var) {
		pg := o.Let("pg", kir.Add(wf, i))
		o.NoCAsyncWrite(kir.Add(rp, kir.Mul(i, kir.C(2048))), page(outA, pg), kir.C(2048))
	})
	o.NoCAsyncWriteBarrier()
	o.CBPopFront(16, wn)
	for i, core := range kir.CoresOf(rs) {
		f := i * per
		cnt := min(per, tiles-f)
		rd.SetRuntimeArgs(core, kir.U32(uint32(f)), kir.U32(uint32(cnt)))
		cp.SetRuntimeArgs(core, kir.U32(uint32(cnt)))
		wr.SetRuntimeArgs(core, kir.U32(uint32(f)), kir.U32(uint32(cnt)))
	}
	return p
}

// smallTileCounts are the output tile counts of the composed GDN layer's
// small programs (every program of the tcc unfused GDN layer 0 but the
// matmuls and collectives), the sizes the 68 measured small programs work on.
func smallTileCounts(b *codegen.Build) []int {
	var out []int
	for _, p := range b.Programs {
		switch p.Op.Name() {
		case "matmul", "all_reduce", "reduce_scatter", "all_gather", "rms_norm":
			continue
		}
		if p.Op.Region == nil || p.Op.Region.Kind != "gdn" {
			continue
		}
		r := p.Op.Results[0]
		if b.BufferOf(r) == nil {
			continue
		}
		// The value's own pages: a shared buffer may be larger.
		_, pages, err := lower.PageLayout(r.Type)
		if err != nil {
			continue
		}
		out = append(out, pages)
	}
	return out
}
