package cpp

// This file maps every tt-metal function the printer can emit to the header
// of the pinned tt-metal release (codegen/target.TTMetalRelease:
// tt_metal/hw/inc for data movement, tt_metal/include for compute) that
// declares it. The instructions' names and headers are generated from the
// instruction table (codegen/internal/insnspec, into insn_gen.go); the
// value-returning calls' names come from kir.ExprAPIName. A name the
// printer meets that is in neither table is an error, so a renamed or new
// instruction cannot slip through without a header.

import (
	"maps"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/ir/sfpu"
)

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

// computeHeaders maps a compute API function to its header: the
// instruction table's calls (insn_gen.go), the SFPU ops' calls and inits
// from kir.SFPUTable and the value-returning compute calls of
// kir.ExprAPIName (computeExprHeaders).
var computeHeaders = withSFPU(withExprs(maps.Clone(insnComputeHeaders)))

// computeExprHeaders are the headers of the value-returning compute calls.
var computeExprHeaders = map[string]string{"read_tile_value": "compute_kernel_api/cb_api.h"}

func withExprs(m map[string]string) map[string]string {
	maps.Copy(m, computeExprHeaders)
	return m
}

// withSFPU adds every SFPU op's call and init with its header.
func withSFPU(m map[string]string) map[string]string {
	for _, sp := range kir.SFPUTable {
		m[sp.Call], m[sp.Init] = sp.Header, sp.Header
		// tcc's own code for the op (sfpu.CodeTCC): ir/sfpu's header,
		// written beside the kernels.
		m[sfpu.TileCall(sp.Op)], m[sfpu.TileInit(sp.Op)] = sfpu.HeaderName, sfpu.HeaderName
	}
	return m
}

// dataflowNames lists the data-movement functions (and globals) printed
// kernels may use: the instruction table's calls (insn_gen.go) and the
// value-returning calls of kir.ExprAPIName; all come from dataflowHeader.
var dataflowNames = func() map[string]bool {
	m := maps.Clone(insnDataflowNames)
	for _, n := range []string{"get_write_ptr", "get_read_ptr", "get_tile_size", "get_semaphore",
		"get_noc_addr", "get_noc_addr_from_bank_id", "get_noc_multicast_addr", "my_x", "my_y", "noc_index"} {
		m[n] = true
	}
	return m
}()

// ethHeader declares the ethernet data-movement calls of kernels on
// ethernet cores (ethNames, insn_gen.go). In the pinned release it is
// tt_metal/hw/inc/internal/ethernet/dataflow_api.h, which the active-erisc
// firmware wrapper includes itself: kernels include nothing for it.
const ethHeader = "internal/ethernet/dataflow_api.h"

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
