// Package kirtest builds small, valid kernel IR programs (element-wise
// binary ops and a tile matmul over DRAM-interleaved tensors) for the tests
// of kir, the C++ printer and the simulator.
package kirtest

import (
	"fmt"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/ir"
)

// CB indices used by the programs.
const (
	CBIn0 = 0
	CBIn1 = 1
	CBOut = 16
)

// Banks is the number of DRAM banks the programs interleave over.
const Banks = 8

func dramBuffer(name string, dt ir.DType, pages int) kir.Buffer {
	return kir.Buffer{Name: name, Mem: ir.DRAM, DType: dt, Layout: ir.TileLayout, PageSize: dt.TileBytes(), Pages: pages}
}

// stride is the DRAM stride of one tile page (tile sizes are 64-aligned already).
func stride(dt ir.DType) int { return (dt.TileBytes() + 63) / 64 * 64 }

// EltwiseBinary returns a program computing out = a op b for DRAM tensors
// "a", "b", "out" of tilesPerCore*len(cores) tiles of dt: core i handles
// tiles [i*tilesPerCore, (i+1)*tilesPerCore). CBs c_0, c_1 and c_16 have
// two pages each; a reader on RISCV_1, a compute kernel and a writer on
// RISCV_0 run on every core.
func EltwiseBinary(op kir.EltwiseOp, dt ir.DType, tilesPerCore int, cores []kir.Core) *kir.Program {
	n := tilesPerCore * len(cores)
	ranges := make([]ir.CoreRange, len(cores))
	for i, c := range cores {
		ranges[i] = c.Range()
	}
	p := kir.NewProgram(fmt.Sprintf("eltwise_%s", op))
	for _, name := range []string{"a", "b", "out"} {
		p.AddBuffer(dramBuffer(name, dt, n))
	}
	for _, idx := range []int{CBIn0, CBIn1, CBOut} {
		p.AddCB(kir.CB{Index: idx, PageSize: dt.TileBytes(), Pages: 2, Format: dt, Cores: ranges})
	}
	tile := dt.TileBytes()

	rd := p.AddKernel(&kir.Kernel{Name: "reader", Role: kir.RoleReader, Processor: kir.RISCV1, NoC: 1, Cores: ranges})
	aAddr, bAddr := rd.RuntimeArg("a_addr"), rd.RuntimeArg("b_addr")
	start, count := rd.RuntimeArg("start_tile"), rd.RuntimeArg("num_tiles")
	tb := rd.CompileArg("tile_bytes", uint32(tile))
	b := rd.Builder()
	b.For("i", kir.C(0), count, func(i kir.Var) {
		page := b.Let("page", kir.Add(start, i))
		for _, in := range []struct {
			cb   int
			addr kir.Expr
		}{{CBIn0, aAddr}, {CBIn1, bAddr}} {
			b.CBReserveBack(in.cb, kir.C(1))
			l1 := b.Let("l1", kir.GetWritePtr{CB: in.cb})
			b.NoCAsyncRead(kir.InterleavedPageAddr(in.addr, page, stride(dt)), l1, tb)
		}
		b.NoCAsyncReadBarrier()
		b.CBPushBack(CBIn0, kir.C(1))
		b.CBPushBack(CBIn1, kir.C(1))
	})

	cp := p.AddKernel(&kir.Kernel{Name: "compute", Role: kir.RoleCompute, Processor: kir.ComputeProc, Cores: ranges,
		Compute: kir.ComputeConfig{MathFidelity: ir.HiFi4}})
	cn := cp.CompileArg("num_tiles", uint32(tilesPerCore))
	b = cp.Builder()
	b.HWStartup(CBIn0, CBIn1, CBOut)
	b.BinaryInit(op, CBIn0, CBIn1)
	b.For("i", kir.C(0), cn, func(kir.Var) {
		b.CBWaitFront(CBIn0, kir.C(1))
		b.CBWaitFront(CBIn1, kir.C(1))
		b.TileRegsAcquire()
		b.BinaryTiles(op, CBIn0, CBIn1, kir.C(0), kir.C(0), kir.C(0))
		b.TileRegsCommit()
		b.CBReserveBack(CBOut, kir.C(1))
		b.TileRegsWait()
		b.PackTile(kir.C(0), CBOut)
		b.TileRegsRelease()
		b.CBPushBack(CBOut, kir.C(1))
		b.CBPopFront(CBIn0, kir.C(1))
		b.CBPopFront(CBIn1, kir.C(1))
	})

	wr := p.AddKernel(&kir.Kernel{Name: "writer", Role: kir.RoleWriter, Processor: kir.RISCV0, NoC: 0, Cores: ranges})
	oAddr := wr.RuntimeArg("out_addr")
	wstart, wcount := wr.RuntimeArg("start_tile"), wr.RuntimeArg("num_tiles")
	wtb := wr.CompileArg("tile_bytes", uint32(tile))
	b = wr.Builder()
	b.For("i", kir.C(0), wcount, func(i kir.Var) {
		b.CBWaitFront(CBOut, kir.C(1))
		l1 := b.Let("l1", kir.GetReadPtr{CB: CBOut})
		b.NoCAsyncWrite(l1, kir.InterleavedPageAddr(oAddr, kir.Add(wstart, i), stride(dt)), wtb)
		b.NoCAsyncWriteBarrier()
		b.CBPopFront(CBOut, kir.C(1))
	})

	for i, c := range cores {
		s := kir.U32(uint32(i * tilesPerCore))
		rd.SetRuntimeArgs(c, kir.BufferAddr("a", 0), kir.BufferAddr("b", 0), s, kir.U32(uint32(tilesPerCore)))
		wr.SetRuntimeArgs(c, kir.BufferAddr("out", 0), s, kir.U32(uint32(tilesPerCore)))
	}
	return p
}

// Matmul returns a one-core program (core (0,0)) computing c = a x b for
// DRAM tensors "a" (mt x kt tiles), "b" (kt x nt tiles) and "c" (mt x nt
// tiles), tiles row-major, all in dt, at the given fidelity. For every
// output tile the reader streams the kt tile pairs and compute accumulates
// them with matmul_tiles in DEST[0].
func Matmul(mt, kt, nt int, dt ir.DType, fid ir.MathFidelity) *kir.Program {
	core := kir.Core{}
	ranges := []ir.CoreRange{core.Range()}
	p := kir.NewProgram("matmul")
	p.AddBuffer(dramBuffer("a", dt, mt*kt))
	p.AddBuffer(dramBuffer("b", dt, kt*nt))
	p.AddBuffer(dramBuffer("c", dt, mt*nt))
	for _, idx := range []int{CBIn0, CBIn1, CBOut} {
		p.AddCB(kir.CB{Index: idx, PageSize: dt.TileBytes(), Pages: 2, Format: dt, Cores: ranges})
	}
	tile := dt.TileBytes()

	rd := p.AddKernel(&kir.Kernel{Name: "reader", Role: kir.RoleReader, Processor: kir.RISCV1, NoC: 1, Cores: ranges})
	aAddr, bAddr := rd.RuntimeArg("a_addr"), rd.RuntimeArg("b_addr")
	M, K, N := rd.CompileArg("mt", uint32(mt)), rd.CompileArg("kt", uint32(kt)), rd.CompileArg("nt", uint32(nt))
	b := rd.Builder()
	b.For("m", kir.C(0), M, func(m kir.Var) {
		b.For("n", kir.C(0), N, func(n kir.Var) {
			b.For("k", kir.C(0), K, func(k kir.Var) {
				b.CBReserveBack(CBIn0, kir.C(1))
				b.NoCAsyncRead(kir.InterleavedPageAddr(aAddr, kir.Add(kir.Mul(m, K), k), stride(dt)), kir.GetWritePtr{CB: CBIn0}, kir.Ci(tile))
				b.CBReserveBack(CBIn1, kir.C(1))
				b.NoCAsyncRead(kir.InterleavedPageAddr(bAddr, kir.Add(kir.Mul(k, N), n), stride(dt)), kir.GetWritePtr{CB: CBIn1}, kir.Ci(tile))
				b.NoCAsyncReadBarrier()
				b.CBPushBack(CBIn0, kir.C(1))
				b.CBPushBack(CBIn1, kir.C(1))
			})
		})
	})

	cp := p.AddKernel(&kir.Kernel{Name: "compute", Role: kir.RoleCompute, Processor: kir.ComputeProc, Cores: ranges,
		Compute: kir.ComputeConfig{MathFidelity: fid}})
	tiles, K2 := cp.CompileArg("out_tiles", uint32(mt*nt)), cp.CompileArg("kt", uint32(kt))
	b = cp.Builder()
	b.MatmulHWStartup(CBIn0, CBIn1, CBOut)
	b.MatmulInit(CBIn0, CBIn1, false)
	b.For("t", kir.C(0), tiles, func(kir.Var) {
		b.TileRegsAcquire()
		b.For("k", kir.C(0), K2, func(kir.Var) {
			b.CBWaitFront(CBIn0, kir.C(1))
			b.CBWaitFront(CBIn1, kir.C(1))
			b.MatmulTiles(CBIn0, CBIn1, kir.C(0), kir.C(0), kir.C(0))
			b.CBPopFront(CBIn0, kir.C(1))
			b.CBPopFront(CBIn1, kir.C(1))
		})
		b.TileRegsCommit()
		b.CBReserveBack(CBOut, kir.C(1))
		b.TileRegsWait()
		b.PackTile(kir.C(0), CBOut)
		b.TileRegsRelease()
		b.CBPushBack(CBOut, kir.C(1))
	})

	wr := p.AddKernel(&kir.Kernel{Name: "writer", Role: kir.RoleWriter, Processor: kir.RISCV0, NoC: 0, Cores: ranges})
	cAddr := wr.RuntimeArg("c_addr")
	ntiles := wr.CompileArg("out_tiles", uint32(mt*nt))
	b = wr.Builder()
	b.For("i", kir.C(0), ntiles, func(i kir.Var) {
		b.CBWaitFront(CBOut, kir.C(1))
		b.NoCAsyncWrite(kir.GetReadPtr{CB: CBOut}, kir.InterleavedPageAddr(cAddr, i, stride(dt)), kir.Ci(tile))
		b.NoCAsyncWriteBarrier()
		b.CBPopFront(CBOut, kir.C(1))
	})

	rd.SetRuntimeArgs(core, kir.BufferAddr("a", 0), kir.BufferAddr("b", 0))
	wr.SetRuntimeArgs(core, kir.BufferAddr("c", 0))
	return p
}

// PingPong returns an interpreter-bound program for benchmarks of the
// simulator and the timing model: on cores (0,0)..(cores-1,0) a producer
// and a consumer pass pages through a 4-page CB, each page with a few lines
// of address arithmetic, a branch and an L1 store; the consumer sums a
// word of every page and ends with a semaphore set and wait.
func PingPong(cores, pages int) *kir.Program {
	p := kir.NewProgram("ping_pong")
	rs := []ir.CoreRange{{X0: 0, Y0: 0, X1: cores - 1, Y1: 0}}
	p.AddCB(kir.CB{Index: 0, PageSize: 2048, Pages: 4, Format: ir.BF16, Cores: rs})
	p.AddSemaphore(kir.Semaphore{ID: 0, Cores: rs, Initial: 0})
	rd := p.AddKernel(&kir.Kernel{Name: "producer", Role: kir.RoleReader, Processor: kir.RISCV1, NoC: 1, Cores: rs})
	rb := rd.Builder()
	rb.For("i", kir.C(0), kir.Ci(pages), func(i kir.Var) {
		rb.CBReserveBack(0, kir.C(1))
		a := rb.Let("a", kir.Add(kir.GetWritePtr{CB: 0}, kir.Mul(kir.Mod(i, kir.C(4)), kir.C(4))))
		rb.IfElse(kir.Lt(kir.And(i, kir.C(1)), kir.C(1)), func() {
			rb.L1Write32(a, i)
		}, func() {
			rb.L1Write32(a, kir.Add(i, kir.C(1)))
		})
		rb.CBPushBack(0, kir.C(1))
	})
	wr := p.AddKernel(&kir.Kernel{Name: "consumer", Role: kir.RoleWriter, Processor: kir.RISCV0, NoC: 0, Cores: rs})
	wb := wr.Builder()
	s := wb.Let("s", kir.C(0))
	wb.For("i", kir.C(0), kir.Ci(pages), func(i kir.Var) {
		wb.CBWaitFront(0, kir.C(1))
		wb.Assign(s, kir.Add(s, kir.L1Read32{Addr: kir.GetReadPtr{CB: 0}}))
		wb.CBPopFront(0, kir.C(1))
	})
	sem := wb.Let("sem", kir.GetSemaphore{ID: kir.C(0)})
	wb.NoCSemaphoreSet(sem, kir.C(1))
	wb.NoCSemaphoreWait(sem, kir.C(1))
	return p
}
