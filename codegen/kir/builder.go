package kir

import (
	"fmt"
	"maps"
	"math"
)

// Builder appends statements to a kernel body. Nested blocks (For, If) are
// built by closures; variables get kernel-unique names.
//
//	b := k.Builder()
//	n := k.RuntimeArg("num_tiles")
//	b.For("i", C(0), n, func(i Var) {
//		b.CBWaitFront(0, C(1))
//		...
//	})
type Builder struct {
	k     *Kernel
	cur   *[]Stmt
	names map[string]bool
}

// Builder returns a builder appending to k.Body. Names already declared in
// the body are reserved.
func (k *Kernel) Builder() *Builder {
	b := &Builder{k: k, cur: &k.Body, names: map[string]bool{}}
	Inspect(k.Body, func(s Stmt) bool {
		switch s := s.(type) {
		case Let:
			b.names[s.Var.Name] = true
		case For:
			b.names[s.Var.Name] = true
		}
		return true
	})
	for _, a := range k.Args {
		b.names[a.Name] = true
	}
	return b
}

// Kernel is the kernel being built.
func (b *Builder) Kernel() *Kernel { return b.k }

// Fresh returns name, or name_2, name_3, ... if taken; the result is reserved.
func (b *Builder) Fresh(name string) string {
	n := name
	for i := 2; b.names[n]; i++ {
		n = fmt.Sprintf("%s_%d", name, i)
	}
	b.names[n] = true
	return n
}

// Discard runs f and throws away the statements it emits and the names
// it reserves: the builder is as before the call. (Compute trackers build
// a loop body once this way to learn the configuration it ends in.)
func (b *Builder) Discard(f func()) {
	saved, names := b.cur, maps.Clone(b.names)
	var sink []Stmt
	b.cur = &sink
	f()
	b.cur, b.names = saved, names
}

// Emit appends statements to the current block.
func (b *Builder) Emit(s ...Stmt) { *b.cur = append(*b.cur, s...) }

func (b *Builder) block(f func()) []Stmt {
	var body []Stmt
	saved := b.cur
	b.cur = &body
	f()
	b.cur = saved
	return body
}

// Let declares a fresh variable of v's type initialised to v.
func (b *Builder) Let(name string, v Expr) Var { return b.LetT(name, TypeOf(v), v) }

// LetT declares a fresh variable of type t initialised to v.
func (b *Builder) LetT(name string, t Type, v Expr) Var {
	x := Var{Name: b.Fresh(name), Type: t}
	b.Emit(Let{Var: x, Value: v})
	return x
}

// Assign stores e into v.
func (b *Builder) Assign(v Var, e Expr) { b.Emit(Assign{Var: v, Value: e}) }

// For emits `for (i = start; i < end; i++)` with body built by body(i).
func (b *Builder) For(name string, start, end Expr, body func(i Var)) {
	b.ForStep(name, start, end, nil, body)
}

// ForStep is For with an explicit step (nil means 1).
func (b *Builder) ForStep(name string, start, end, step Expr, body func(i Var)) {
	i := Var{Name: b.Fresh(name), Type: U32T}
	stmts := b.block(func() { body(i) })
	b.Emit(For{Var: i, Start: start, End: end, Step: step, Body: stmts})
}

// If emits `if (cond) { then }`.
func (b *Builder) If(cond Expr, then func()) { b.IfElse(cond, then, nil) }

// IfElse emits `if (cond) { then } else { els }`; els may be nil.
func (b *Builder) IfElse(cond Expr, then, els func()) {
	t := b.block(then)
	var e []Stmt
	if els != nil {
		e = b.block(els)
	}
	b.Emit(If{Cond: cond, Then: t, Else: e})
}

// Comment emits a comment.
func (b *Builder) Comment(text string) { b.Emit(Comment{Text: text}) }

// CBReserveBack emits cb_reserve_back(cb, n).
func (b *Builder) CBReserveBack(cb int, n Expr) { b.Emit(CBReserveBack{cb, n}) }

// CBPushBack emits cb_push_back(cb, n).
func (b *Builder) CBPushBack(cb int, n Expr) { b.Emit(CBPushBack{cb, n}) }

// CBWaitFront emits cb_wait_front(cb, n).
func (b *Builder) CBWaitFront(cb int, n Expr) { b.Emit(CBWaitFront{cb, n}) }

// CBPopFront emits cb_pop_front(cb, n).
func (b *Builder) CBPopFront(cb int, n Expr) { b.Emit(CBPopFront{cb, n}) }

// NoCAsyncRead emits noc_async_read(src, dst, size).
func (b *Builder) NoCAsyncRead(src, dst, size Expr) { b.Emit(NoCAsyncRead{src, dst, size}) }

// NoCAsyncWrite emits noc_async_write(src, dst, size).
func (b *Builder) NoCAsyncWrite(src, dst, size Expr) { b.Emit(NoCAsyncWrite{src, dst, size}) }

// NoCAsyncWriteMulticast emits noc_async_write_multicast(src, dst, size, numDests).
func (b *Builder) NoCAsyncWriteMulticast(src, dst, size, numDests Expr) {
	b.Emit(NoCAsyncWriteMulticast{src, dst, size, numDests})
}

// NoCAsyncWriteMulticastLoopbackSrc emits
// noc_async_write_multicast_loopback_src(src, dst, size, numDests).
func (b *Builder) NoCAsyncWriteMulticastLoopbackSrc(src, dst, size, numDests Expr) {
	b.Emit(NoCAsyncWriteMulticastLoopbackSrc{src, dst, size, numDests})
}

// NoCAsyncReadBarrier emits noc_async_read_barrier().
func (b *Builder) NoCAsyncReadBarrier() { b.Emit(NoCAsyncReadBarrier{}) }

// NoCAsyncWriteBarrier emits noc_async_write_barrier().
func (b *Builder) NoCAsyncWriteBarrier() { b.Emit(NoCAsyncWriteBarrier{}) }

// NoCAsyncWritesFlushed emits noc_async_writes_flushed().
func (b *Builder) NoCAsyncWritesFlushed() { b.Emit(NoCAsyncWritesFlushed{}) }

// NoCAsyncAtomicBarrier emits noc_async_atomic_barrier().
func (b *Builder) NoCAsyncAtomicBarrier() { b.Emit(NoCAsyncAtomicBarrier{}) }

// NoCSemaphoreSet emits noc_semaphore_set(addr, v).
func (b *Builder) NoCSemaphoreSet(addr, v Expr) { b.Emit(NoCSemaphoreSet{addr, v}) }

// NoCSemaphoreWait emits noc_semaphore_wait(addr, v).
func (b *Builder) NoCSemaphoreWait(addr, v Expr) { b.Emit(NoCSemaphoreWait{addr, v}) }

// NoCSemaphoreWaitMin emits noc_semaphore_wait_min(addr, v).
func (b *Builder) NoCSemaphoreWaitMin(addr, v Expr) { b.Emit(NoCSemaphoreWaitMin{addr, v}) }

// NoCSemaphoreInc emits noc_semaphore_inc(nocAddr, incr).
func (b *Builder) NoCSemaphoreInc(nocAddr, incr Expr) { b.Emit(NoCSemaphoreInc{nocAddr, incr}) }

// NoCSemaphoreSetMulticast emits noc_semaphore_set_multicast(src, dst, numDests).
func (b *Builder) NoCSemaphoreSetMulticast(src, dst, numDests Expr) {
	b.Emit(NoCSemaphoreSetMulticast{src, dst, numDests})
}

// NoCSemaphoreSetMulticastLoopbackSrc emits
// noc_semaphore_set_multicast_loopback_src(src, dst, numDests).
func (b *Builder) NoCSemaphoreSetMulticastLoopbackSrc(src, dst, numDests Expr) {
	b.Emit(NoCSemaphoreSetMulticastLoopbackSrc{src, dst, numDests})
}

// L1Write32 emits a 32-bit store to local L1.
func (b *Builder) L1Write32(addr, v Expr) { b.Emit(L1Write32{addr, v}) }

// HWStartup emits compute_kernel_hw_startup(icb0, icb1, ocb).
func (b *Builder) HWStartup(icb0, icb1, ocb int) {
	b.Emit(ComputeKernelHWStartup{ICB0: icb0, ICB1: icb1, OCB: ocb})
}

// MatmulHWStartup emits compute_kernel_hw_startup<SrcOrder::Reverse>(in0, in1, ocb).
func (b *Builder) MatmulHWStartup(in0, in1, ocb int) {
	b.Emit(ComputeKernelHWStartup{ICB0: in0, ICB1: in1, OCB: ocb, SrcReverse: true})
}

// TileRegsAcquire emits tile_regs_acquire().
func (b *Builder) TileRegsAcquire() { b.Emit(TileRegsAcquire{}) }

// TileRegsCommit emits tile_regs_commit().
func (b *Builder) TileRegsCommit() { b.Emit(TileRegsCommit{}) }

// TileRegsWait emits tile_regs_wait().
func (b *Builder) TileRegsWait() { b.Emit(TileRegsWait{}) }

// TileRegsRelease emits tile_regs_release().
func (b *Builder) TileRegsRelease() { b.Emit(TileRegsRelease{}) }

// CopyTileInit emits copy_tile_to_dst_init_short(cb).
func (b *Builder) CopyTileInit(cb int) { b.Emit(CopyTileInit{cb}) }

// CopyTile emits copy_tile(cb, tile, dst).
func (b *Builder) CopyTile(cb int, tile, dst Expr) { b.Emit(CopyTile{cb, tile, dst}) }

// BinaryInit emits add/sub/mul_tiles_init(icb0, icb1).
func (b *Builder) BinaryInit(op EltwiseOp, icb0, icb1 int) { b.Emit(BinaryInit{op, icb0, icb1}) }

// BinaryTiles emits add/sub/mul_tiles(icb0, icb1, t0, t1, dst).
func (b *Builder) BinaryTiles(op EltwiseOp, icb0, icb1 int, t0, t1, dst Expr) {
	b.Emit(BinaryTiles{op, icb0, icb1, t0, t1, dst})
}

// AddTiles emits add_tiles(icb0, icb1, t0, t1, dst).
func (b *Builder) AddTiles(icb0, icb1 int, t0, t1, dst Expr) {
	b.BinaryTiles(EltAdd, icb0, icb1, t0, t1, dst)
}

// SubTiles emits sub_tiles(icb0, icb1, t0, t1, dst).
func (b *Builder) SubTiles(icb0, icb1 int, t0, t1, dst Expr) {
	b.BinaryTiles(EltSub, icb0, icb1, t0, t1, dst)
}

// MulTiles emits mul_tiles(icb0, icb1, t0, t1, dst).
func (b *Builder) MulTiles(icb0, icb1 int, t0, t1, dst Expr) {
	b.BinaryTiles(EltMul, icb0, icb1, t0, t1, dst)
}

// BcastInit emits the short init of a broadcast op.
func (b *Builder) BcastInit(op EltwiseOp, dim BcastDim, icb0, icb1 int) {
	b.Emit(BcastInit{op, dim, icb0, icb1})
}

// BcastTiles emits a broadcast op, e.g. mul_tiles_bcast_cols(icb0, icb1, t0, t1, dst).
func (b *Builder) BcastTiles(op EltwiseOp, dim BcastDim, icb0, icb1 int, t0, t1, dst Expr) {
	b.Emit(BcastTiles{op, dim, icb0, icb1, t0, t1, dst})
}

// MatmulInit emits matmul_init(in0, in1, transpose).
func (b *Builder) MatmulInit(in0, in1 int, transpose bool) { b.Emit(MatmulInit{in0, in1, transpose}) }

// MatmulTiles emits matmul_tiles(in0, in1, t0, t1, dst).
func (b *Builder) MatmulTiles(in0, in1 int, t0, t1, dst Expr) {
	b.Emit(MatmulTiles{in0, in1, t0, t1, dst})
}

// MatmulBlockInit emits matmul_block_init(in0, in1, transpose, ct, rt, kt).
func (b *Builder) MatmulBlockInit(in0, in1 int, transpose bool, ct, rt, kt Expr) {
	b.Emit(MatmulBlockInit{in0, in1, transpose, ct, rt, kt})
}

// MatmulBlock emits matmul_block(in0, in1, t0, t1, dst, transpose, ct, rt, kt).
func (b *Builder) MatmulBlock(in0, in1 int, t0, t1, dst Expr, transpose bool, ct, rt, kt Expr) {
	b.Emit(MatmulBlock{in0, in1, t0, t1, dst, transpose, ct, rt, kt})
}

// ReduceInit emits reduce_init<op, dim>(icb, scaler, ocb).
func (b *Builder) ReduceInit(op ReduceOp, dim ReduceDim, icb, scaler, ocb int) {
	b.Emit(ReduceInit{op, dim, icb, scaler, ocb})
}

// ReduceTile emits reduce_tile<op, dim>(icb, scaler, tile, scalerTile, dst).
func (b *Builder) ReduceTile(op ReduceOp, dim ReduceDim, icb, scaler int, tile, scalerTile, dst Expr) {
	b.Emit(ReduceTile{op, dim, icb, scaler, tile, scalerTile, dst})
}

// ReduceUninit emits reduce_uninit().
func (b *Builder) ReduceUninit() { b.Emit(ReduceUninit{}) }

// TransposeInit emits transpose_wh_init_short(cb).
func (b *Builder) TransposeInit(cb int) { b.Emit(TransposeInit{cb}) }

// TransposeTile emits transpose_wh_tile(cb, tile, dst).
func (b *Builder) TransposeTile(cb int, tile, dst Expr) { b.Emit(TransposeTile{cb, tile, dst}) }

// TransposeDestInit emits transpose_wh_dest_init_short<is32>(); is32 is
// DEST's fp32 mode.
func (b *Builder) TransposeDestInit(is32 bool) { b.Emit(TransposeDestInit{is32}) }

// TransposeDest emits transpose_wh_dest<is32>(dst): DEST[dst] transposed
// in place.
func (b *Builder) TransposeDest(is32 bool, dst Expr) { b.Emit(TransposeDest{is32, dst}) }

// SFPUInit emits the init of op.
func (b *Builder) SFPUInit(op SFPUOp) { b.Emit(SFPUInit{op}) }

// SFPU emits op on DEST[dst].
func (b *Builder) SFPU(op SFPUOp, dst Expr) { b.Emit(SFPU{Op: op, Dst: dst}) }

// SFPUBinary emits a binary op (IsBinary): DEST[dst] = DEST[dst] op DEST[src].
func (b *Builder) SFPUBinary(op SFPUOp, dst, src Expr) { b.Emit(SFPU{Op: op, Dst: dst, Src: src}) }

// SFPUScalar emits a scalar op (SFPUAddScalar, SFPUMulScalar) with scalar v.
func (b *Builder) SFPUScalar(op SFPUOp, dst Expr, v float32) {
	b.Emit(SFPU{Op: op, Dst: dst, Param: math.Float32bits(v)})
}

// PackTile emits pack_tile(dst, cb).
func (b *Builder) PackTile(dst Expr, cb int) { b.Emit(PackTile{Dst: dst, CB: cb}) }

// PackTileAt emits pack_tile<true>(dst, cb, outTile).
func (b *Builder) PackTileAt(dst Expr, cb int, outTile Expr) {
	b.Emit(PackTile{Dst: dst, CB: cb, OutTile: outTile})
}

// ReconfigDataFormat emits reconfig_data_format(srcA, srcB).
func (b *Builder) ReconfigDataFormat(srcA, srcB int) { b.Emit(ReconfigDataFormat{srcA, srcB}) }

// PackReconfigDataFormat emits pack_reconfig_data_format(cb).
func (b *Builder) PackReconfigDataFormat(cb int) { b.Emit(PackReconfigDataFormat{cb}) }

// InterleavedPageAddr is the NoC address of page `page` of an interleaved
// DRAM buffer whose bank base address is base:
// get_noc_addr_from_bank_id<true>(page % banks, base + (page / banks) * stride),
// where stride is the page size aligned to the DRAM alignment.
func InterleavedPageAddr(base, page Expr, stride int) Expr {
	return DRAMBankAddr{
		Bank:   Mod(page, NumDRAMBanks{}),
		Offset: Add(base, Mul(Div(page, NumDRAMBanks{}), Ci(stride))),
	}
}
