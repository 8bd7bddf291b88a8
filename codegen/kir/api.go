package kir

// The tt-metal API names are those of the release
// codegen/target.TTMetalRelease pins. The instructions' names (APIName),
// headers and declarations are the instruction table's
// (codegen/internal/insnspec); this file names the value-returning calls.
// A version bump of the kernel API that renames a call is a change there or
// here (and in codegen/cpp/headers.go for where an expression is declared).

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
	case ReadTileValue:
		return "read_tile_value"
	}
	return ""
}

// ReduceOpCpp and ReduceDimCpp are the C++ template arguments of the
// reduce calls (llk's PoolType and ReduceDim).
var (
	ReduceOpCpp  = map[ReduceOp]string{ReduceSum: "PoolType::SUM", ReduceMax: "PoolType::MAX"}
	ReduceDimCpp = map[ReduceDim]string{ReduceRow: "ReduceDim::REDUCE_ROW", ReduceCol: "ReduceDim::REDUCE_COL", ReduceScalar: "ReduceDim::REDUCE_SCALAR"}
)
