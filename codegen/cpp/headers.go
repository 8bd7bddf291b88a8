package cpp

// This file maps every tt-metal function the printer can emit to the header
// of the tt-metal tree (September 2026, tt_metal/hw/inc) that declares it.
// The function NAMES come from kir.APIName / kir.ExprAPIName (the one
// dialect table); this file only says where each name lives. A name the
// printer meets that is in neither table is an error, so a renamed or new
// instruction cannot slip through without a header.
//
// Old and new spellings of renamed calls are both listed (for example
// add_tiles_init, deprecated in favour of add_init), so the table keeps
// working while kir's names move to the new spelling.

const (
	// dataflowHeader declares every data-movement call tcc prints
	// (tt_metal/hw/inc/api/dataflow/dataflow_api.h; get_noc_addr and
	// friends come in through internal/dataflow/dataflow_api_addrgen.h,
	// get_compile_time_arg_val through api/compile_time_args.h).
	dataflowHeader = "api/dataflow/dataflow_api.h"
	// computeArgsHeader declares get_arg_val / get_common_arg_val for compute
	// kernels and pulls in get_compile_time_arg_val (through
	// common_globals.h and internal/firmware_common.h).
	computeArgsHeader = "api/compute/common.h"
)

// computeHeaders maps a compute API function to its header.
var computeHeaders = map[string]string{
	// api/compute/compute_kernel_hw_startup.h
	"compute_kernel_hw_startup": "api/compute/compute_kernel_hw_startup.h",

	// api/compute/cb_api.h (the compute-side CB calls)
	"cb_reserve_back": "api/compute/cb_api.h",
	"cb_push_back":    "api/compute/cb_api.h",
	"cb_wait_front":   "api/compute/cb_api.h",
	"cb_pop_front":    "api/compute/cb_api.h",

	// api/compute/reg_api.h
	"tile_regs_acquire": "api/compute/reg_api.h",
	"tile_regs_commit":  "api/compute/reg_api.h",
	"tile_regs_wait":    "api/compute/reg_api.h",
	"tile_regs_release": "api/compute/reg_api.h",

	// api/compute/tile_move_copy.h
	"copy_init":                   "api/compute/tile_move_copy.h",
	"copy_tile_to_dst_init_short": "api/compute/tile_move_copy.h", // deprecated: copy_init
	"copy_tile":                   "api/compute/tile_move_copy.h",

	// api/compute/eltwise_binary.h
	"add_init":       "api/compute/eltwise_binary.h",
	"sub_init":       "api/compute/eltwise_binary.h",
	"mul_init":       "api/compute/eltwise_binary.h",
	"add_tiles_init": "api/compute/eltwise_binary.h", // deprecated: add_init
	"sub_tiles_init": "api/compute/eltwise_binary.h", // deprecated: sub_init
	"mul_tiles_init": "api/compute/eltwise_binary.h", // deprecated: mul_init
	"add_tiles":      "api/compute/eltwise_binary.h",
	"sub_tiles":      "api/compute/eltwise_binary.h",
	"mul_tiles":      "api/compute/eltwise_binary.h",

	// api/compute/bcast.h
	"add_bcast_rows_init":               "api/compute/bcast.h",
	"add_bcast_cols_init":               "api/compute/bcast.h",
	"add_bcast_scalar_init":             "api/compute/bcast.h",
	"sub_bcast_rows_init":               "api/compute/bcast.h",
	"sub_bcast_cols_init":               "api/compute/bcast.h",
	"sub_bcast_scalar_init":             "api/compute/bcast.h",
	"mul_bcast_rows_init":               "api/compute/bcast.h",
	"mul_bcast_cols_init":               "api/compute/bcast.h",
	"mul_bcast_scalar_init":             "api/compute/bcast.h",
	"add_bcast_rows_init_short":         "api/compute/bcast.h", // deprecated: add_bcast_rows_init
	"add_bcast_cols_init_short":         "api/compute/bcast.h", // deprecated: add_bcast_cols_init
	"add_bcast_scalar_init_short":       "api/compute/bcast.h", // deprecated: add_bcast_scalar_init
	"sub_bcast_rows_init_short":         "api/compute/bcast.h", // deprecated: sub_bcast_rows_init
	"sub_bcast_cols_init_short":         "api/compute/bcast.h", // deprecated: sub_bcast_cols_init
	"sub_tiles_bcast_scalar_init_short": "api/compute/bcast.h", // deprecated: sub_bcast_scalar_init
	"mul_bcast_rows_init_short":         "api/compute/bcast.h", // deprecated: mul_bcast_rows_init
	"mul_bcast_cols_init_short":         "api/compute/bcast.h", // deprecated: mul_bcast_cols_init
	"mul_tiles_bcast_scalar_init_short": "api/compute/bcast.h", // deprecated: mul_bcast_scalar_init
	"add_tiles_bcast_rows":              "api/compute/bcast.h",
	"add_tiles_bcast_cols":              "api/compute/bcast.h",
	"add_tiles_bcast_scalar":            "api/compute/bcast.h",
	"sub_tiles_bcast_rows":              "api/compute/bcast.h",
	"sub_tiles_bcast_cols":              "api/compute/bcast.h",
	"sub_tiles_bcast_scalar":            "api/compute/bcast.h",
	"mul_tiles_bcast_rows":              "api/compute/bcast.h",
	"mul_tiles_bcast_cols":              "api/compute/bcast.h",
	"mul_tiles_bcast_scalar":            "api/compute/bcast.h",

	// api/compute/matmul.h
	"matmul_init":       "api/compute/matmul.h",
	"matmul_tiles":      "api/compute/matmul.h",
	"matmul_block_init": "api/compute/matmul.h",
	"matmul_block":      "api/compute/matmul.h",

	// api/compute/reduce.h
	"reduce_init":   "api/compute/reduce.h",
	"reduce_tile":   "api/compute/reduce.h",
	"reduce_uninit": "api/compute/reduce.h",

	// api/compute/transpose.h (current) and the deprecated transpose_wh.h shim
	"transpose_init":          "api/compute/transpose.h",
	"transpose_tile":          "api/compute/transpose.h",
	"transpose_wh_init_short": "api/compute/transpose_wh.h", // deprecated: transpose_init
	"transpose_wh_tile":       "api/compute/transpose_wh.h", // deprecated: transpose_tile

	// SFPU ops declared in api/compute/compute_kernel_api.h
	"log_tile_init":     "api/compute/compute_kernel_api.h",
	"log_tile":          "api/compute/compute_kernel_api.h",
	"sigmoid_tile_init": "api/compute/compute_kernel_api.h",
	"sigmoid_tile":      "api/compute/compute_kernel_api.h",
	"silu_tile_init":    "api/compute/compute_kernel_api.h",
	"silu_tile":         "api/compute/compute_kernel_api.h",
	"square_tile_init":  "api/compute/compute_kernel_api.h",
	"square_tile":       "api/compute/compute_kernel_api.h",
	"abs_tile_init":     "api/compute/compute_kernel_api.h",
	"abs_tile":          "api/compute/compute_kernel_api.h",

	// SFPU ops with their own header under api/compute/eltwise_unary/
	"exp_tile_init":               "api/compute/eltwise_unary/exp.h",
	"exp_tile":                    "api/compute/eltwise_unary/exp.h",
	"rsqrt_tile_init":             "api/compute/eltwise_unary/rsqrt.h",
	"rsqrt_tile":                  "api/compute/eltwise_unary/rsqrt.h",
	"sqrt_tile_init":              "api/compute/eltwise_unary/sqrt.h",
	"sqrt_tile":                   "api/compute/eltwise_unary/sqrt.h",
	"recip_tile_init":             "api/compute/eltwise_unary/recip.h",
	"recip_tile":                  "api/compute/eltwise_unary/recip.h",
	"negative_tile_init":          "api/compute/eltwise_unary/negative.h",
	"negative_tile":               "api/compute/eltwise_unary/negative.h",
	"relu_tile_init":              "api/compute/eltwise_unary/relu.h",
	"relu_tile":                   "api/compute/eltwise_unary/relu.h",
	"softplus_tile_init":          "api/compute/eltwise_unary/softplus.h",
	"softplus_tile":               "api/compute/eltwise_unary/softplus.h",
	"binop_with_scalar_tile_init": "api/compute/eltwise_unary/binop_with_scalar.h",
	"add_unary_tile":              "api/compute/eltwise_unary/binop_with_scalar.h",
	"mul_unary_tile":              "api/compute/eltwise_unary/binop_with_scalar.h",

	// api/compute/pack.h
	"pack_tile": "api/compute/pack.h",

	// api/compute/reconfig_data_format.h
	"reconfig_data_format":      "api/compute/reconfig_data_format.h",
	"pack_reconfig_data_format": "api/compute/reconfig_data_format.h",
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
// ethernet cores (tt_metal/hw/inc/ethernet/dataflow_api.h); it includes the
// dataflow API itself.
const ethHeader = "ethernet/dataflow_api.h"

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
