package kir

import "fmt"

// This file is the one table of tt-metal API names, those of the release
// codegen/target.TTMetalRelease pins. A version bump of the kernel API that
// renames a call is a change here (and in codegen/cpp/headers.go for where
// it is declared).

var eltNames = [...]string{EltAdd: "add", EltSub: "sub", EltMul: "mul"}

// bcastInitNames are the broadcast inits of the pinned release
// (compute_kernel_api/bcast.h): it has no row-broadcast subtract, so
// sub + rows has no name and cannot be printed.
var bcastInitNames = map[[2]uint8]string{
	{uint8(EltAdd), uint8(BcastRows)}:   "add_bcast_rows_init_short",
	{uint8(EltAdd), uint8(BcastCols)}:   "add_bcast_cols_init_short",
	{uint8(EltAdd), uint8(BcastScalar)}: "add_bcast_scalar_init_short",
	{uint8(EltSub), uint8(BcastCols)}:   "sub_bcast_cols_init_short",
	{uint8(EltSub), uint8(BcastScalar)}: "sub_tiles_bcast_scalar_init_short",
	{uint8(EltMul), uint8(BcastRows)}:   "mul_bcast_rows_init_short",
	{uint8(EltMul), uint8(BcastCols)}:   "mul_bcast_cols_init_short",
	{uint8(EltMul), uint8(BcastScalar)}: "mul_tiles_bcast_scalar_init_short",
}

// APIName is the tt-metal function a statement prints as ("" for the
// control statements Let, Assign, For, If, Comment and for L1Write32, which
// prints as a volatile store). Template arguments are not included
// (reduce_tile, not reduce_tile<...>).
func APIName(s Stmt) string {
	switch s := s.(type) {
	case CBReserveBack:
		return "cb_reserve_back"
	case CBPushBack:
		return "cb_push_back"
	case CBWaitFront:
		return "cb_wait_front"
	case CBPopFront:
		return "cb_pop_front"
	case NoCAsyncRead:
		return "noc_async_read"
	case NoCAsyncWrite:
		return "noc_async_write"
	case NoCAsyncWriteMulticast:
		return "noc_async_write_multicast"
	case NoCAsyncReadBarrier:
		return "noc_async_read_barrier"
	case NoCAsyncWriteBarrier:
		return "noc_async_write_barrier"
	case NoCAsyncWritesFlushed:
		return "noc_async_writes_flushed"
	case NoCAsyncAtomicBarrier:
		return "noc_async_atomic_barrier"
	case NoCSemaphoreSet:
		return "noc_semaphore_set"
	case NoCSemaphoreWait:
		return "noc_semaphore_wait"
	case NoCSemaphoreWaitMin:
		return "noc_semaphore_wait_min"
	case NoCSemaphoreInc:
		return "noc_semaphore_inc"
	case NoCSemaphoreSetMulticast:
		return "noc_semaphore_set_multicast"
	case ComputeKernelHWStartup:
		return "compute_kernel_hw_startup"
	case TileRegsAcquire:
		return "tile_regs_acquire"
	case TileRegsCommit:
		return "tile_regs_commit"
	case TileRegsWait:
		return "tile_regs_wait"
	case TileRegsRelease:
		return "tile_regs_release"
	case CopyTileInit:
		return "copy_tile_to_dst_init_short"
	case CopyTile:
		return "copy_tile"
	case BinaryInit:
		return eltName(s.Op) + "_tiles_init"
	case BinaryTiles:
		return eltName(s.Op) + "_tiles"
	case BcastInit:
		if n, ok := bcastInitNames[[2]uint8{uint8(s.Op), uint8(s.Dim)}]; ok {
			return n
		}
	case BcastTiles:
		if _, ok := bcastInitNames[[2]uint8{uint8(s.Op), uint8(s.Dim)}]; ok {
			return eltName(s.Op) + "_tiles_bcast_" + s.Dim.String()
		}
	case MatmulInit:
		return "mm_init_short"
	case MatmulTiles:
		return "matmul_tiles"
	case MatmulBlockInit:
		return "mm_block_init_short"
	case MatmulBlock:
		return "matmul_block"
	case ReduceInit:
		return "reduce_init"
	case ReduceTile:
		return "reduce_tile"
	case ReduceUninit:
		return "reduce_uninit"
	case TransposeInit:
		return "transpose_wh_init_short"
	case TransposeTile:
		return "transpose_wh_tile"
	case SFPUInit:
		if int(s.Op) < len(SFPUTable) {
			return SFPUTable[s.Op].Init
		}
	case SFPU:
		if int(s.Op) < len(SFPUTable) {
			return SFPUTable[s.Op].Call
		}
	case PackTile:
		return "pack_tile"
	case ReconfigDataFormat:
		return "reconfig_data_format"
	case PackReconfigDataFormat:
		return "pack_reconfig_data_format"
	case EthSendBytes:
		return "eth_send_bytes"
	case EthWaitForReceiverDone:
		return "eth_wait_for_receiver_done"
	case EthWaitForBytes:
		return "eth_wait_for_bytes"
	case EthReceiverDone:
		return "eth_receiver_done"
	}
	return ""
}

func eltName(o EltwiseOp) string {
	if int(o) < len(eltNames) {
		return eltNames[o]
	}
	return fmt.Sprintf("elt%d", int(o))
}

// ExprAPIName is the tt-metal function a value-returning call prints as
// ("" for Const, Var, ArgRef, Bin and L1Read32).
func ExprAPIName(e Expr) string {
	switch e.(type) {
	case GetWritePtr:
		return "get_write_ptr"
	case GetReadPtr:
		return "get_read_ptr"
	case GetTileSize:
		return "get_tile_size"
	case GetSemaphore, GetEthSemaphore:
		return "get_semaphore"
	case NoCAddr:
		return "get_noc_addr"
	case DRAMBankAddr:
		return "get_noc_addr_from_bank_id"
	case MulticastAddr:
		return "get_noc_multicast_addr"
	case MyNoCX:
		return "my_x"
	case MyNoCY:
		return "my_y"
	case NumDRAMBanks:
		return "NUM_DRAM_BANKS"
	}
	return ""
}

// IsComputeOnly reports whether s may only appear in a compute kernel.
func IsComputeOnly(s Stmt) bool {
	switch s.(type) {
	case ComputeKernelHWStartup, TileRegsAcquire, TileRegsCommit, TileRegsWait, TileRegsRelease,
		CopyTileInit, CopyTile, BinaryInit, BinaryTiles, BcastInit, BcastTiles, MatmulInit, MatmulTiles,
		MatmulBlockInit, MatmulBlock, ReduceInit, ReduceTile, ReduceUninit, TransposeInit, TransposeTile,
		SFPUInit, SFPU, PackTile, ReconfigDataFormat, PackReconfigDataFormat:
		return true
	}
	return false
}

// IsDataMovementOnly reports whether s may only appear in a data-movement
// (reader / writer) kernel.
func IsDataMovementOnly(s Stmt) bool {
	switch s.(type) {
	case NoCAsyncRead, NoCAsyncWrite, NoCAsyncWriteMulticast, NoCAsyncReadBarrier, NoCAsyncWriteBarrier,
		NoCAsyncWritesFlushed, NoCAsyncAtomicBarrier, NoCSemaphoreSet, NoCSemaphoreWait, NoCSemaphoreWaitMin, NoCSemaphoreInc,
		NoCSemaphoreSetMulticast, L1Write32,
		EthSendBytes, EthWaitForReceiverDone, EthWaitForBytes, EthReceiverDone:
		return true
	}
	return false
}

// ReduceOpCpp and ReduceDimCpp are the C++ template arguments of the
// reduce calls (llk's PoolType and ReduceDim).
var (
	ReduceOpCpp  = map[ReduceOp]string{ReduceSum: "PoolType::SUM", ReduceMax: "PoolType::MAX"}
	ReduceDimCpp = map[ReduceDim]string{ReduceRow: "ReduceDim::REDUCE_ROW", ReduceCol: "ReduceDim::REDUCE_COL", ReduceScalar: "ReduceDim::REDUCE_SCALAR"}
)
