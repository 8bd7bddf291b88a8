package cpp

// This file maps every tt-metal function the printer can emit to the header
// of the pinned tt-metal release (codegen/target.TTMetalRelease:
// tt_metal/hw/inc for data movement, tt_metal/include for compute) that
// declares it.
// The function NAMES come from kir.APIName / kir.ExprAPIName (the one
// dialect table); this file only says where each name lives. A name the
// printer meets that is in neither table is an error, so a renamed or new
// instruction cannot slip through without a header.
//

import "github.com/tcc-dev/tcc/codegen/kir"

const (
	// dataflowHeader declares every data-movement call tcc prints
	// (tt_metal/hw/inc/api/dataflow/dataflow_api.h; get_noc_addr and
	// friends come in through internal/dataflow/dataflow_api_addrgen.h,
	// get_compile_time_arg_val through api/compile_time_args.h).
	dataflowHeader = "api/dataflow/dataflow_api.h"
	// computeArgsHeader declares get_arg_val / get_common_arg_val for compute
	// kernels and pulls in get_compile_time_arg_val (through
	// common_globals.h and internal/firmware_common.h).
	computeArgsHeader = "compute_kernel_api/common.h"
)

// computeHeaders maps a compute API function to its header; the SFPU
// ops' calls come from kir.SFPUTable.
var computeHeaders = withSFPU(map[string]string{
	// compute_kernel_api/compute_kernel_hw_startup.h
	"compute_kernel_hw_startup": "compute_kernel_api/compute_kernel_hw_startup.h",

	// compute_kernel_api/cb_api.h (the compute-side CB calls)
	"cb_reserve_back": "compute_kernel_api/cb_api.h",
	"cb_push_back":    "compute_kernel_api/cb_api.h",
	"cb_wait_front":   "compute_kernel_api/cb_api.h",
	"cb_pop_front":    "compute_kernel_api/cb_api.h",

	// compute_kernel_api/reg_api.h
	"tile_regs_acquire": "compute_kernel_api/reg_api.h",
	"tile_regs_commit":  "compute_kernel_api/reg_api.h",
	"tile_regs_wait":    "compute_kernel_api/reg_api.h",
	"tile_regs_release": "compute_kernel_api/reg_api.h",

	// compute_kernel_api/tile_move_copy.h
	"copy_tile_to_dst_init_short": "compute_kernel_api/tile_move_copy.h",
	"copy_tile":                   "compute_kernel_api/tile_move_copy.h",

	// compute_kernel_api/eltwise_binary.h
	"add_tiles_init": "compute_kernel_api/eltwise_binary.h",
	"sub_tiles_init": "compute_kernel_api/eltwise_binary.h",
	"mul_tiles_init": "compute_kernel_api/eltwise_binary.h",
	"add_tiles":      "compute_kernel_api/eltwise_binary.h",
	"sub_tiles":      "compute_kernel_api/eltwise_binary.h",
	"mul_tiles":      "compute_kernel_api/eltwise_binary.h",

	// compute_kernel_api/bcast.h
	"add_bcast_rows_init_short":         "compute_kernel_api/bcast.h",
	"add_bcast_cols_init_short":         "compute_kernel_api/bcast.h",
	"add_bcast_scalar_init_short":       "compute_kernel_api/bcast.h",
	"sub_bcast_cols_init_short":         "compute_kernel_api/bcast.h",
	"sub_tiles_bcast_scalar_init_short": "compute_kernel_api/bcast.h",
	"mul_bcast_rows_init_short":         "compute_kernel_api/bcast.h",
	"mul_bcast_cols_init_short":         "compute_kernel_api/bcast.h",
	"mul_tiles_bcast_scalar_init_short": "compute_kernel_api/bcast.h",
	"add_tiles_bcast_rows":              "compute_kernel_api/bcast.h",
	"add_tiles_bcast_cols":              "compute_kernel_api/bcast.h",
	"add_tiles_bcast_scalar":            "compute_kernel_api/bcast.h",
	"sub_tiles_bcast_cols":              "compute_kernel_api/bcast.h",
	"sub_tiles_bcast_scalar":            "compute_kernel_api/bcast.h",
	"mul_tiles_bcast_rows":              "compute_kernel_api/bcast.h",
	"mul_tiles_bcast_cols":              "compute_kernel_api/bcast.h",
	"mul_tiles_bcast_scalar":            "compute_kernel_api/bcast.h",

	// compute_kernel_api/matmul.h
	"mm_init_short":       "compute_kernel_api/matmul.h",
	"mm_block_init_short": "compute_kernel_api/matmul.h",
	"matmul_tiles":        "compute_kernel_api/matmul.h",
	"matmul_block":        "compute_kernel_api/matmul.h",

	// compute_kernel_api/reduce.h
	"reduce_init":   "compute_kernel_api/reduce.h",
	"reduce_tile":   "compute_kernel_api/reduce.h",
	"reduce_uninit": "compute_kernel_api/reduce.h",

	// compute_kernel_api/transpose_wh.h
	"transpose_wh_init_short": "compute_kernel_api/transpose_wh.h",
	"transpose_wh_tile":       "compute_kernel_api/transpose_wh.h",

	// compute_kernel_api/pack.h
	"pack_tile": "compute_kernel_api/pack.h",

	// compute_kernel_api/reconfig_data_format.h
	"reconfig_data_format":      "compute_kernel_api/reconfig_data_format.h",
	"pack_reconfig_data_format": "compute_kernel_api/reconfig_data_format.h",
})

// withSFPU adds every SFPU op's call and init with its header.
func withSFPU(m map[string]string) map[string]string {
	for _, sp := range kir.SFPUTable {
		m[sp.Call], m[sp.Init] = sp.Header, sp.Header
	}
	return m
}

// dataflowNames lists the data-movement functions (and globals) printed
// kernels may use; all come from dataflowHeader.
var dataflowNames = map[string]bool{
	"cb_reserve_back": true, "cb_push_back": true, "cb_wait_front": true, "cb_pop_front": true,
	"get_write_ptr": true, "get_read_ptr": true, "get_tile_size": true, "get_semaphore": true,
	"get_noc_addr": true, "get_noc_addr_from_bank_id": true, "get_noc_multicast_addr": true,
	"noc_async_read": true, "noc_async_write": true, "noc_async_write_multicast": true,
	"noc_async_read_barrier": true, "noc_async_write_barrier": true, "noc_async_writes_flushed": true, "noc_async_atomic_barrier": true,
	"noc_semaphore_set": true, "noc_semaphore_wait": true, "noc_semaphore_wait_min": true,
	"noc_semaphore_inc": true, "noc_semaphore_set_multicast": true,
	"my_x": true, "my_y": true, "noc_index": true,
}

// ethHeader declares the ethernet data-movement calls of kernels on
// ethernet cores. In the pinned release it is
// tt_metal/hw/inc/internal/ethernet/dataflow_api.h, which the active-erisc
// firmware wrapper includes itself: kernels include nothing for it.
const ethHeader = "internal/ethernet/dataflow_api.h"

// ethNames lists the ethernet calls printed kernels may use; all come from
// ethHeader (channel 0 of erisc_info, see kir/eth.go).
var ethNames = map[string]bool{
	"eth_send_bytes": true, "eth_wait_for_receiver_done": true, "eth_wait_for_bytes": true, "eth_receiver_done": true,
}

// argFuncs are the argument accessors of both kernel kinds.
var argFuncs = []string{"get_arg_val", "get_common_arg_val", "get_compile_time_arg_val", "get_ct_arg"}

// cppKeywords are the C++17 keywords and alternative tokens; none may name a
// variable or argument.
var cppKeywords = []string{
	"alignas", "alignof", "and", "and_eq", "asm", "auto", "bitand", "bitor", "bool", "break", "case", "catch",
	"char", "char16_t", "char32_t", "class", "compl", "const", "const_cast", "constexpr", "continue",
	"decltype", "default", "delete", "do", "double", "dynamic_cast", "else", "enum", "explicit", "export",
	"extern", "false", "float", "for", "friend", "goto", "if", "inline", "int", "long", "mutable",
	"namespace", "new", "noexcept", "not", "not_eq", "nullptr", "operator", "or", "or_eq", "private",
	"protected", "public", "register", "reinterpret_cast", "return", "short", "signed", "sizeof", "static",
	"static_assert", "static_cast", "struct", "switch", "template", "this", "thread_local", "throw", "true",
	"try", "typedef", "typeid", "typename", "union", "unsigned", "using", "virtual", "void", "volatile",
	"wchar_t", "while", "xor", "xor_eq",
}

// otherReserved are identifiers the printed code itself refers to.
var otherReserved = []string{
	"kernel_main", "uint8_t", "uint32_t", "uint64_t", "int32_t", "tt_l1_ptr", "std", "ckernel",
	"PoolType", "ReduceDim", "SrcOrder", "SUM", "MAX", "REDUCE_ROW", "REDUCE_COL", "REDUCE_SCALAR",
	"ProgrammableCoreType", "ACTIVE_ETH",
}

// reserved is every identifier a kernel-level name must not take.
var reserved = func() map[string]bool {
	m := map[string]bool{}
	for n := range computeHeaders {
		m[n] = true
	}
	for n := range dataflowNames {
		m[n] = true
	}
	for n := range ethNames {
		m[n] = true
	}
	for _, list := range [][]string{argFuncs, cppKeywords, otherReserved} {
		for _, n := range list {
			m[n] = true
		}
	}
	return m
}()
