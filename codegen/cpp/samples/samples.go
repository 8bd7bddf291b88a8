// Package samples builds the kernel IR programs the C++ printer and the host
// config are tested on: an element-wise add (reader, compute, writer over two
// cores), a tile matmul, a two-core semaphore handshake, a coverage
// program that uses every statement and expression kind of kir, every SFPU
// op, broadcast and reduce variant and every binary operator, and two
// programs every card of a mesh row runs over ethernet (Cards): a
// one-tile link with a worker core, and a ring shift on ethernet cores
// only that uses the device index (kir.DeviceID) and a semaphore on a
// range of ethernet cores.
//
// All programs pass kir.Validate for the Blackhole target. They are
// built here (not taken from kir/kirtest) so the golden files under
// codegen/cpp/testdata/golden change only when these builders or the
// printers change.
package samples

import (
	"math"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/ir"
)

// CB indices used by the samples.
const (
	CBIn0   = 0
	CBIn1   = 1
	CBIn2   = 2
	CBOut   = 16
	CBInter = 24
)

// Sample is one named program.
type Sample struct {
	Name    string
	Program *kir.Program
}

// All returns every sample in a fixed order: the single-card samples,
// then the card samples (Cards).
func All() []Sample {
	return append([]Sample{
		{"eltwise_add", EltwiseAdd()},
		{"matmul", Matmul()},
		{"semaphore_handshake", SemaphoreHandshake()},
		{"coverage", Coverage()},
	}, Cards()...)
}

func rangeOf(cs ...kir.Core) []ir.CoreRange {
	rs := make([]ir.CoreRange, len(cs))
	for i, c := range cs {
		rs[i] = c.Range()
	}
	return rs
}

func dramTiles(name string, pages int) kir.Buffer {
	return kir.Buffer{Name: name, Mem: ir.DRAM, DType: ir.BF16, Layout: ir.TileLayout, PageSize: ir.BF16.TileBytes(), Pages: pages}
}

// stride is the DRAM stride of one bf16 tile page (2048, already 64-aligned).
var stride = ir.BF16.TileBytes()

// EltwiseAdd returns out = a + b over 8 bf16 tiles on cores (0,0) and (1,0),
// four tiles per core. The reader reads both operands page by page from
// interleaved DRAM, the compute kernel adds one tile at a time and the
// writer writes the sums back; the output buffer address is a common
// runtime arg, the tile size a compile-time arg.
func EltwiseAdd() *kir.Program {
	const perCore = 4
	cores := []kir.Core{{X: 0, Y: 0}, {X: 1, Y: 0}}
	rs := []ir.CoreRange{{X0: 0, Y0: 0, X1: 1, Y1: 0}}
	p := kir.NewProgram("eltwise_add")
	for _, n := range []string{"a", "b", "out"} {
		p.AddBuffer(dramTiles(n, perCore*len(cores)))
	}
	tile := ir.BF16.TileBytes()
	p.AddCB(kir.CB{Index: CBIn0, PageSize: tile, Pages: 2, Format: ir.BF16, Cores: rs, Name: "in0"})
	p.AddCB(kir.CB{Index: CBIn1, PageSize: tile, Pages: 2, Format: ir.BF16, Cores: rs, Name: "in1"})
	p.AddCB(kir.CB{Index: CBOut, PageSize: tile, Pages: 2, Format: ir.BF16, Cores: rs, Name: "out"})

	rd := p.AddKernel(&kir.Kernel{Name: "reader", Role: kir.RoleReader, Processor: kir.RISCV1, NoC: 1, Cores: rs})
	tb := rd.CompileArg("tile_bytes", uint32(tile))
	aAddr, bAddr := rd.RuntimeArg("a_addr"), rd.RuntimeArg("b_addr")
	start, n := rd.RuntimeArg("start_tile"), rd.RuntimeArg("num_tiles")
	b := rd.Builder()
	b.For("i", kir.C(0), n, func(i kir.Var) {
		page := b.Let("page", kir.Add(start, i))
		b.CBReserveBack(CBIn0, kir.C(1))
		b.CBReserveBack(CBIn1, kir.C(1))
		b.NoCAsyncRead(kir.InterleavedPageAddr(aAddr, page, stride), kir.GetWritePtr{CB: CBIn0}, tb)
		b.NoCAsyncRead(kir.InterleavedPageAddr(bAddr, page, stride), kir.GetWritePtr{CB: CBIn1}, tb)
		b.NoCAsyncReadBarrier()
		b.CBPushBack(CBIn0, kir.C(1))
		b.CBPushBack(CBIn1, kir.C(1))
	})

	cp := p.AddKernel(&kir.Kernel{Name: "compute", Role: kir.RoleCompute, Processor: kir.ComputeProc, Cores: rs,
		Compute: kir.ComputeConfig{MathFidelity: ir.LoFi}})
	cn := cp.CompileArg("num_tiles", perCore)
	b = cp.Builder()
	b.HWStartup(CBIn0, CBIn1, CBOut)
	b.BinaryInit(kir.EltAdd, CBIn0, CBIn1)
	b.For("i", kir.C(0), cn, func(kir.Var) {
		b.CBWaitFront(CBIn0, kir.C(1))
		b.CBWaitFront(CBIn1, kir.C(1))
		b.TileRegsAcquire()
		b.AddTiles(CBIn0, CBIn1, kir.C(0), kir.C(0), kir.C(0))
		b.TileRegsCommit()
		b.CBReserveBack(CBOut, kir.C(1))
		b.TileRegsWait()
		b.PackTile(kir.C(0), CBOut)
		b.TileRegsRelease()
		b.CBPushBack(CBOut, kir.C(1))
		b.CBPopFront(CBIn0, kir.C(1))
		b.CBPopFront(CBIn1, kir.C(1))
	})

	wr := p.AddKernel(&kir.Kernel{Name: "writer", Role: kir.RoleWriter, Processor: kir.RISCV0, NoC: 0, Cores: rs})
	wtb := wr.CompileArg("tile_bytes", uint32(tile))
	wstart, wn := wr.RuntimeArg("start_tile"), wr.RuntimeArg("num_tiles")
	oAddr := wr.CommonArg("out_addr", kir.BufferAddr("out", 0))
	b = wr.Builder()
	b.For("i", kir.C(0), wn, func(i kir.Var) {
		b.CBWaitFront(CBOut, kir.C(1))
		l1 := b.Let("l1", kir.GetReadPtr{CB: CBOut})
		b.NoCAsyncWrite(l1, kir.InterleavedPageAddr(oAddr, kir.Add(wstart, i), stride), wtb)
		b.NoCAsyncWriteBarrier()
		b.CBPopFront(CBOut, kir.C(1))
	})

	for i, c := range cores {
		s := kir.U32(uint32(i * perCore))
		rd.SetRuntimeArgs(c, kir.BufferAddr("a", 0), kir.BufferAddr("b", 0), s, kir.U32(perCore))
		wr.SetRuntimeArgs(c, s, kir.U32(perCore))
	}
	return finish(p)
}

// Matmul returns c = a x b on core (0,0) for a 2x3-tile a and a 3x2-tile b
// at HiFi2: for every output tile the reader streams the three tile pairs,
// compute accumulates them with matmul_tiles in DEST[0] and packs, and the
// writer stores the tile. The kernel defines MM_THROTTLE, as the matmul
// header reads it.
func Matmul() *kir.Program {
	const mt, kt, nt = 2, 3, 2
	core := kir.Core{}
	rs := rangeOf(core)
	p := kir.NewProgram("matmul")
	p.AddBuffer(dramTiles("a", mt*kt))
	p.AddBuffer(dramTiles("b", kt*nt))
	p.AddBuffer(dramTiles("c", mt*nt))
	tile := ir.BF16.TileBytes()
	p.AddCB(kir.CB{Index: CBIn0, PageSize: tile, Pages: 2, Format: ir.BF16, Cores: rs, Name: "a tiles"})
	p.AddCB(kir.CB{Index: CBIn1, PageSize: tile, Pages: 2, Format: ir.BF16, Cores: rs, Name: "b tiles"})
	p.AddCB(kir.CB{Index: CBOut, PageSize: tile, Pages: 2, Format: ir.BF16, Cores: rs, Name: "c tiles"})

	rd := p.AddKernel(&kir.Kernel{Name: "reader", Role: kir.RoleReader, Processor: kir.RISCV1, NoC: 1, Cores: rs})
	M, K, N := rd.CompileArg("mt", mt), rd.CompileArg("kt", kt), rd.CompileArg("nt", nt)
	aAddr, bAddr := rd.RuntimeArg("a_addr"), rd.RuntimeArg("b_addr")
	b := rd.Builder()
	b.For("m", kir.C(0), M, func(m kir.Var) {
		b.For("n", kir.C(0), N, func(n kir.Var) {
			b.For("k", kir.C(0), K, func(k kir.Var) {
				b.CBReserveBack(CBIn0, kir.C(1))
				b.NoCAsyncRead(kir.InterleavedPageAddr(aAddr, kir.Add(kir.Mul(m, K), k), stride), kir.GetWritePtr{CB: CBIn0}, kir.Ci(tile))
				b.CBReserveBack(CBIn1, kir.C(1))
				b.NoCAsyncRead(kir.InterleavedPageAddr(bAddr, kir.Add(kir.Mul(k, N), n), stride), kir.GetWritePtr{CB: CBIn1}, kir.Ci(tile))
				b.NoCAsyncReadBarrier()
				b.CBPushBack(CBIn0, kir.C(1))
				b.CBPushBack(CBIn1, kir.C(1))
			})
		})
	})

	cp := p.AddKernel(&kir.Kernel{Name: "compute", Role: kir.RoleCompute, Processor: kir.ComputeProc, Cores: rs,
		Compute: kir.ComputeConfig{MathFidelity: ir.HiFi2, FP32DestAccEn: true}})
	cp.Define("MM_THROTTLE", "0")
	tiles, K2 := cp.CompileArg("out_tiles", mt*nt), cp.CompileArg("kt", kt)
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

	wr := p.AddKernel(&kir.Kernel{Name: "writer", Role: kir.RoleWriter, Processor: kir.RISCV0, NoC: 0, Cores: rs})
	cAddr := wr.RuntimeArg("c_addr")
	ntiles := wr.CompileArg("out_tiles", mt*nt)
	b = wr.Builder()
	b.For("i", kir.C(0), ntiles, func(i kir.Var) {
		b.CBWaitFront(CBOut, kir.C(1))
		b.NoCAsyncWrite(kir.GetReadPtr{CB: CBOut}, kir.InterleavedPageAddr(cAddr, i, stride), kir.Ci(tile))
		b.NoCAsyncWriteBarrier()
		b.CBPopFront(CBOut, kir.C(1))
	})

	rd.SetRuntimeArgs(core, kir.BufferAddr("a", 0), kir.BufferAddr("b", 0))
	wr.SetRuntimeArgs(core, kir.BufferAddr("c", 0))
	return finish(p)
}

// Semaphore IDs of the handshake.
const (
	SemReady = 0 // on the sender: the receiver is ready for the tile
	SemData  = 1 // on the receiver: the tile has landed in its staging buffer
)

// SemaphoreHandshake returns a two-core program that moves one bf16 tile
// from DRAM buffer "src" through core (0,0) to core (1,0) and on to DRAM
// buffer "dst". The sender's reader loads the tile into c_0; its writer
// waits until the receiver signals ready (semaphore 0, incremented
// remotely), clears the flag, writes the tile into the receiver's L1
// staging buffer, and increments the receiver's semaphore 1. The receiver's
// reader signals ready, waits for semaphore 1, copies the staged tile into
// c_16 over its own NoC address, and the receiver's writer stores it.
func SemaphoreHandshake() *kir.Program {
	sender, receiver := kir.Core{X: 0, Y: 0}, kir.Core{X: 1, Y: 0}
	both := rangeOf(sender, receiver)
	p := kir.NewProgram("semaphore_handshake")
	tile := ir.BF16.TileBytes()
	p.AddBuffer(dramTiles("src", 1))
	p.AddBuffer(dramTiles("dst", 1))
	p.AddBuffer(kir.Buffer{Name: "staging", DType: ir.BF16, Layout: ir.TileLayout, PageSize: tile, Pages: 1,
		Mem: ir.MemoryConfig{Kind: ir.L1HeightSharded, Shard: &ir.ShardSpec{Grid: receiver.Range(), Shape: [2]int{32, 32}}}})
	p.AddCB(kir.CB{Index: CBIn0, PageSize: tile, Pages: 1, Format: ir.BF16, Cores: rangeOf(sender), Name: "outgoing"})
	p.AddCB(kir.CB{Index: CBOut, PageSize: tile, Pages: 1, Format: ir.BF16, Cores: rangeOf(receiver), Name: "incoming"})
	p.AddSemaphore(kir.Semaphore{ID: SemReady, Cores: both})
	p.AddSemaphore(kir.Semaphore{ID: SemData, Cores: both})

	// Sender reader: DRAM -> c_0.
	sr := p.AddKernel(&kir.Kernel{Name: "sender_reader", Role: kir.RoleReader, Processor: kir.RISCV1, NoC: 1, Cores: rangeOf(sender)})
	srcAddr := sr.RuntimeArg("src_addr")
	b := sr.Builder()
	b.CBReserveBack(CBIn0, kir.C(1))
	b.NoCAsyncRead(kir.DRAMBankAddr{Bank: kir.C(0), Offset: srcAddr}, kir.GetWritePtr{CB: CBIn0}, kir.Ci(tile))
	b.NoCAsyncReadBarrier()
	b.CBPushBack(CBIn0, kir.C(1))

	// Sender writer: wait for ready, write the tile, signal data.
	sw := p.AddKernel(&kir.Kernel{Name: "sender_writer", Role: kir.RoleWriter, Processor: kir.RISCV0, NoC: 0, Cores: rangeOf(sender)})
	rx, ry := sw.RuntimeArg("receiver_x"), sw.RuntimeArg("receiver_y")
	staging := sw.RuntimeArg("staging_addr")
	b = sw.Builder()
	b.CBWaitFront(CBIn0, kir.C(1))
	ready := b.Let("ready_sem", kir.GetSemaphore{ID: kir.C(SemReady)})
	b.Comment("Wait until the receiver has room, then re-arm the flag.")
	b.NoCSemaphoreWait(ready, kir.C(1))
	b.NoCSemaphoreSet(ready, kir.C(0))
	b.NoCAsyncWrite(kir.GetReadPtr{CB: CBIn0}, kir.NoCAddr{X: rx, Y: ry, Addr: staging}, kir.Ci(tile))
	b.NoCAsyncWriteBarrier()
	dataSem := b.Let("data_sem", kir.NoCAddr{X: rx, Y: ry, Addr: kir.GetSemaphore{ID: kir.C(SemData)}})
	b.NoCSemaphoreInc(dataSem, kir.C(1))
	b.CBPopFront(CBIn0, kir.C(1))

	// Receiver reader: signal ready, wait for data, stage -> c_16.
	rr := p.AddKernel(&kir.Kernel{Name: "receiver_reader", Role: kir.RoleReader, Processor: kir.RISCV1, NoC: 1, Cores: rangeOf(receiver)})
	sx, sy := rr.RuntimeArg("sender_x"), rr.RuntimeArg("sender_y")
	rstaging := rr.RuntimeArg("staging_addr")
	b = rr.Builder()
	b.CBReserveBack(CBOut, kir.C(1))
	b.NoCSemaphoreInc(kir.NoCAddr{X: sx, Y: sy, Addr: kir.GetSemaphore{ID: kir.C(SemReady)}}, kir.C(1))
	b.NoCSemaphoreWaitMin(kir.GetSemaphore{ID: kir.C(SemData)}, kir.C(1))
	b.NoCAsyncRead(kir.NoCAddr{X: kir.MyNoCX{}, Y: kir.MyNoCY{}, Addr: rstaging}, kir.GetWritePtr{CB: CBOut}, kir.Ci(tile))
	b.NoCAsyncReadBarrier()
	b.CBPushBack(CBOut, kir.C(1))

	// Receiver writer: c_16 -> DRAM.
	rw := p.AddKernel(&kir.Kernel{Name: "receiver_writer", Role: kir.RoleWriter, Processor: kir.RISCV0, NoC: 0, Cores: rangeOf(receiver)})
	dstAddr := rw.RuntimeArg("dst_addr")
	b = rw.Builder()
	b.CBWaitFront(CBOut, kir.C(1))
	b.NoCAsyncWrite(kir.GetReadPtr{CB: CBOut}, kir.DRAMBankAddr{Bank: kir.C(0), Offset: dstAddr}, kir.Ci(tile))
	b.NoCAsyncWriteBarrier()
	b.CBPopFront(CBOut, kir.C(1))

	sr.SetRuntimeArgs(sender, kir.BufferAddr("src", 0))
	sw.SetRuntimeArgs(sender, kir.NoCX(receiver), kir.NoCY(receiver), kir.BufferAddr("staging", 0))
	rr.SetRuntimeArgs(receiver, kir.NoCX(sender), kir.NoCY(sender), kir.BufferAddr("staging", 0))
	rw.SetRuntimeArgs(receiver, kir.BufferAddr("dst", 0))
	return finish(p)
}

// Coverage returns a one-core program (core (0,0), plus a 2x1 multicast
// rectangle) whose kernels together use every kir statement and expression
// kind and every variant the printer spells differently: all binary
// operators, For with and without a step, If with and without an else,
// every element-wise op, every broadcast op
// and dimension, every reduce op and dimension, every SFPU op, pack_tile in
// both forms, and both reconfig calls. It is not meant to compute anything
// useful; it is meant to print, compile and validate.
func Coverage() *kir.Program {
	core := kir.Core{}
	rs := rangeOf(core)
	p := kir.NewProgram("coverage")
	tile := ir.BF16.TileBytes()
	p.AddBuffer(dramTiles("in", 4))
	p.AddBuffer(dramTiles("out", 1))
	p.AddCB(kir.CB{Index: CBIn0, PageSize: tile, Pages: 2, Format: ir.BF16, Cores: rs, Name: "x"})
	p.AddCB(kir.CB{Index: CBIn1, PageSize: tile, Pages: 2, Format: ir.BF16, Cores: rs, Name: "y"})
	p.AddCB(kir.CB{Index: CBIn2, PageSize: tile, Pages: 1, Format: ir.BF16, Cores: rs, Name: "scaler"})
	p.AddCB(kir.CB{Index: CBOut, PageSize: tile, Pages: 2, Format: ir.BF16, Cores: rs, Name: "result"})
	p.AddCB(kir.CB{Index: CBInter, PageSize: tile, Pages: 2, Format: ir.BF16, Cores: rs, Name: "intermediate"})
	p.AddSemaphore(kir.Semaphore{ID: 0, Cores: rangeOf(core, kir.Core{X: 1, Y: 0}), Initial: 0})

	// Reader: every binary operator, a stepped loop, If/else, Assign, a
	// uint64_t local, DRAM bank addressing, get_tile_size.
	rd := p.AddKernel(&kir.Kernel{Name: "reader", Role: kir.RoleReader, Processor: kir.RISCV1, NoC: 1, Cores: rs})
	inAddr := rd.RuntimeArg("in_addr")
	flags := rd.CommonArg("flags", kir.U32(5))
	b := rd.Builder()
	b.Comment("Every binary operator, folded into one value.\nA second comment line.")
	acc := b.Let("acc", kir.C(0))
	ops := []kir.BinOp{kir.OpAdd, kir.OpSub, kir.OpMul, kir.OpDiv, kir.OpMod, kir.OpShl, kir.OpShr, kir.OpAnd, kir.OpOr,
		kir.OpXor, kir.OpLt, kir.OpLe, kir.OpGt, kir.OpGe, kir.OpEq, kir.OpNe, kir.OpLAnd, kir.OpLOr}
	for i, op := range ops {
		b.Assign(acc, kir.Add(acc, kir.Bin{Op: op, X: flags, Y: kir.Ci(i + 1)}))
	}
	b.Assign(acc, kir.Shl(kir.Add(acc, kir.C(1)), kir.Sub(kir.C(3), kir.Sub(kir.C(2), kir.C(1)))))
	tsize := b.Let("tsize", kir.Mul(kir.GetTileSize{CB: CBIn0}, kir.C(1)))
	b.ForStep("j", kir.C(0), kir.C(4), kir.C(2), func(j kir.Var) {
		b.For("h", kir.C(0), kir.C(2), func(h kir.Var) {
			page := b.Let("page", kir.Add(j, h))
			src := b.LetT("src", kir.U64T, kir.InterleavedPageAddr(inAddr, page, stride))
			cbIdx := b.Let("which", kir.Mod(h, kir.C(2)))
			b.IfElse(kir.LAnd(kir.Eq(cbIdx, kir.C(0)), kir.Ne(acc, kir.C(0))), func() {
				b.CBReserveBack(CBIn0, kir.C(1))
				b.NoCAsyncRead(src, kir.GetWritePtr{CB: CBIn0}, tsize)
				b.NoCAsyncReadBarrier()
				b.CBPushBack(CBIn0, kir.C(1))
			}, func() {
				b.CBReserveBack(CBIn1, kir.C(1))
				b.NoCAsyncRead(src, kir.GetWritePtr{CB: CBIn1}, tsize)
				b.NoCAsyncReadBarrier()
				b.CBPushBack(CBIn1, kir.C(1))
			})
		})
	})
	b.If(kir.Gt(acc, kir.C(0)), func() {
		b.CBReserveBack(CBIn2, kir.C(1))
		b.NoCAsyncRead(kir.InterleavedPageAddr(inAddr, kir.C(0), stride), kir.GetWritePtr{CB: CBIn2}, tsize)
		b.NoCAsyncReadBarrier()
		b.CBPushBack(CBIn2, kir.C(1))
	})

	// Compute: every compute instruction and variant.
	cp := p.AddKernel(&kir.Kernel{Name: "compute", Role: kir.RoleCompute, Processor: kir.ComputeProc, Cores: rs,
		Compute: kir.ComputeConfig{MathFidelity: ir.HiFi4, MathApproxMode: true}})
	cp.Define("SFPU_OP_CHAIN", "1")
	cp.Define("APPROX_EXP", "true")
	b = cp.Builder()
	b.HWStartup(CBIn0, CBIn1, CBOut)
	b.CBWaitFront(CBIn0, kir.C(2))
	b.CBWaitFront(CBIn1, kir.C(2))
	b.CBWaitFront(CBIn2, kir.C(1))
	b.ReconfigDataFormat(CBIn0, CBIn1)
	b.PackReconfigDataFormat(CBInter)
	round := 0
	// pack emits one tile into c_24 and reads it back through copy_tile.
	pack := func(body func()) {
		b.TileRegsAcquire()
		body()
		b.TileRegsCommit()
		b.CBReserveBack(CBInter, kir.C(1))
		b.TileRegsWait()
		if round%2 == 0 {
			b.PackTile(kir.C(0), CBInter)
		} else {
			b.PackTileAt(kir.C(0), CBInter, kir.C(0))
		}
		round++
		b.TileRegsRelease()
		b.CBPushBack(CBInter, kir.C(1))
		b.CBWaitFront(CBInter, kir.C(1))
		b.CBPopFront(CBInter, kir.C(1))
	}
	for _, op := range []kir.EltwiseOp{kir.EltAdd, kir.EltSub, kir.EltMul} {
		b.BinaryInit(op, CBIn0, CBIn1)
		pack(func() { b.BinaryTiles(op, CBIn0, CBIn1, kir.C(0), kir.C(1), kir.C(0)) })
		for _, dim := range []kir.BcastDim{kir.BcastRows, kir.BcastCols, kir.BcastScalar} {
			if op == kir.EltSub && dim == kir.BcastRows {
				continue // the pinned release has no row-broadcast subtract
			}
			b.BcastInit(op, dim, CBIn0, CBIn1)
			pack(func() { b.BcastTiles(op, dim, CBIn0, CBIn1, kir.C(1), kir.C(0), kir.C(0)) })
		}
	}
	for _, op := range []kir.ReduceOp{kir.ReduceSum, kir.ReduceMax} {
		for _, dim := range []kir.ReduceDim{kir.ReduceRow, kir.ReduceCol, kir.ReduceScalar} {
			b.ReduceInit(op, dim, CBIn0, CBIn2, CBInter)
			pack(func() { b.ReduceTile(op, dim, CBIn0, CBIn2, kir.C(0), kir.C(0), kir.C(0)) })
			b.ReduceUninit()
		}
	}
	// read_tile_value: a word of a waited page (the scaler's first, 1.0 in
	// bf16 pairs), used as a tile index (times 0: tile 1).
	word := b.Let("scaler_word", kir.ReadTileValue{CB: CBIn2, Tile: kir.C(0), Offset: kir.C(0)})
	b.TransposeInit(CBIn0)
	pack(func() { b.TransposeTile(CBIn0, kir.Add(kir.Mul(word, kir.C(0)), kir.C(1)), kir.C(0)) })
	// transpose_wh_dest: the copied tile transposed in DEST (16-bit).
	b.CopyTileInit(CBIn0)
	pack(func() {
		b.CopyTile(CBIn0, kir.C(0), kir.C(0))
		b.TransposeDestInit(false)
		b.TransposeDest(false, kir.C(0))
	})
	b.CopyTileInit(CBIn0)
	pack(func() {
		b.CopyTile(CBIn0, kir.C(0), kir.C(0))
		b.CopyTile(CBIn0, kir.C(1), kir.C(1))
		for _, op := range kir.SFPUOps {
			b.SFPUInit(op)
			switch {
			case op.IsBinary():
				b.SFPUBinary(op, kir.C(0), kir.C(1))
			case op == kir.SFPUAddScalar:
				b.SFPUScalar(op, kir.C(0), 0.5)
			case op == kir.SFPUMulScalar:
				b.SFPUScalar(op, kir.C(0), float32(math.Pi))
			default:
				b.SFPU(op, kir.C(0))
			}
		}
	})
	b.MatmulBlockInit(CBIn0, CBIn1, true, kir.C(1), kir.C(1), kir.C(2))
	pack(func() {
		b.MatmulBlock(CBIn0, CBIn1, kir.C(0), kir.C(0), kir.C(0), true, kir.C(1), kir.C(1), kir.C(2))
	})
	// One tile of x into c_16 for the writer.
	b.PackReconfigDataFormat(CBOut)
	b.CopyTileInit(CBIn0)
	b.TileRegsAcquire()
	b.CopyTile(CBIn0, kir.C(0), kir.C(0))
	b.TileRegsCommit()
	b.CBReserveBack(CBOut, kir.C(1))
	b.TileRegsWait()
	b.PackTile(kir.C(0), CBOut)
	b.TileRegsRelease()
	b.CBPushBack(CBOut, kir.C(1))
	b.CBPopFront(CBIn0, kir.C(2))
	b.CBPopFront(CBIn1, kir.C(2))
	b.CBPopFront(CBIn2, kir.C(1))

	// Writer: multicast, semaphores, L1 loads and stores, NoC coordinates.
	wr := p.AddKernel(&kir.Kernel{Name: "writer", Role: kir.RoleWriter, Processor: kir.RISCV0, NoC: 0, Cores: rs})
	outAddr := wr.RuntimeArg("out_addr")
	x0, y0 := wr.RuntimeArg("mcast_x0"), wr.RuntimeArg("mcast_y0")
	x1, y1 := wr.RuntimeArg("mcast_x1"), wr.RuntimeArg("mcast_y1")
	lx0, ly0 := wr.RuntimeArg("loop_x0"), wr.RuntimeArg("loop_y0") // the rectangle from the sender itself
	b = wr.Builder()
	b.CBWaitFront(CBOut, kir.C(1))
	l1 := b.Let("l1", kir.GetReadPtr{CB: CBOut})
	sem := b.Let("sem", kir.GetSemaphore{ID: kir.C(0)})
	mcast := b.Let("mcast", kir.MulticastAddr{X0: x0, Y0: y0, X1: x1, Y1: y1, Addr: l1})
	b.NoCAsyncWriteMulticast(l1, mcast, kir.Ci(tile), kir.C(1))
	b.NoCAsyncWritesFlushed()
	b.L1Write32(sem, kir.Add(kir.L1Read32{Addr: sem}, kir.C(1)))
	b.NoCSemaphoreSetMulticast(sem, kir.MulticastAddr{X0: x0, Y0: y0, X1: x1, Y1: y1, Addr: sem}, kir.C(1))
	b.NoCAsyncWriteMulticastLoopbackSrc(l1, kir.MulticastAddr{X0: lx0, Y0: ly0, X1: x1, Y1: y1, Addr: l1}, kir.Ci(tile), kir.C(2))
	b.NoCAsyncWritesFlushed()
	b.NoCSemaphoreSetMulticastLoopbackSrc(sem, kir.MulticastAddr{X0: lx0, Y0: ly0, X1: x1, Y1: y1, Addr: sem}, kir.C(2))
	self := b.Let("self", kir.NoCAddr{X: kir.MyNoCX{}, Y: kir.MyNoCY{}, Addr: sem})
	b.NoCSemaphoreInc(self, kir.Sub(kir.MyNoCX{}, kir.MyNoCY{}))
	b.NoCAsyncWriteBarrier()
	b.NoCAsyncWrite(l1, kir.DRAMBankAddr{Bank: kir.C(0), Offset: outAddr}, kir.Ci(tile))
	b.NoCAsyncWriteBarrier()
	b.CBPopFront(CBOut, kir.C(1))

	rd.SetRuntimeArgs(core, kir.BufferAddr("in", 0))
	other := kir.Core{X: 1, Y: 0}
	wr.SetRuntimeArgs(core, kir.BufferAddr("out", 0), kir.NoCX(other), kir.NoCY(other), kir.NoCX(other), kir.NoCY(other), kir.NoCX(core), kir.NoCY(core))
	return finish(p)
}

// finish applies what codegen/lower applies to every lowered program: the
// reduce defaults and the closing atomic barrier.
func finish(p *kir.Program) *kir.Program {
	kir.Finish(p)
	return p
}
