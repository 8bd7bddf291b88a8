// Package cpp prints kernel IR (codegen/kir) as tt-metal kernel sources:
// level 3 of the three levels in DESIGN.md.
//
// PrintKernel prints one kernel of a program as a complete C++17 source for
// the tt-metal tree of September 2026: a generated-code header comment, the
// includes the body needs, and `void kernel_main()` (the entry point of
// data-movement and compute kernels alike in that tree). The first lines of
// kernel_main declare one named local per row of the kernel's argument table:
//
//	constexpr uint32_t tile_bytes = get_compile_time_arg_val(0);  // compile-time arg 0 = 2048
//	const uint32_t a_addr = get_arg_val<uint32_t>(0);              // runtime arg 0 (per core)
//	const uint32_t out_addr = get_common_arg_val<uint32_t>(0);     // common runtime arg 0 = addr(out)
//
// codegen/hostcfg prints the host's argument vectors from the same table.
// After that every kir statement prints as one line: control statements as
// C++ (typed uint32_t / uint64_t declarations, for, if, assignments,
// comments) and every instruction as exactly one tt-metal API call whose
// name comes from kir.APIName / kir.ExprAPIName, the one table of API
// spellings. Semaphore addresses are cast to `volatile tt_l1_ptr
// uint32_t*` as the semaphore calls take them; L1Write32 / L1Read32 print as
// a volatile store / load.
//
// Includes: data-movement kernels include api/dataflow/dataflow_api.h;
// compute kernels include exactly the api/compute headers of the calls they
// make (keyed by API name: the instruction table's headers, generated into
// insn_gen.go from codegen/internal/insnspec, and the SFPU ops' from
// kir.SFPUTable; see headers.go) plus api/compute/common.h when they read
// arguments. The argument list of every call (callArgs) is generated from
// the table too, but for the few calls whose arguments depend on their
// values (hw startup order, reduce templates, SFPU params, pack_tile<true>),
// which name hand-written printer methods.
//
// Arithmetic is unsigned as kir defines it: inside binary expressions
// constants carry a u suffix and the int32_t / uint8_t results of
// get_tile_size and my_x / my_y are converted to uint32_t.
//
// A persistent program's merged kernel (kir.Persist, codegen/persist)
// prints with the device side of its phases (persist.go): the phase
// machinery (tcc_phase_begin / tcc_phase_end as core-local barriers, the
// phase's CBs installed from its record in L1 with
// setup_local_cb_read_write_interfaces, rta_l1_base / crta_l1_base moved
// to the phase's argument slices), one function per distinct phase body
// (the layers share one), and the signals to other cores as one loop over
// constant core lists; EstimatePersistentKernel is its code estimate.
//
// The output is deterministic. testdata/tt_api.h declares the API subset
// the printer uses (with the signatures of the real tree; its
// "// tcc-insn-decls SECTION" lines are replaced by the instruction
// table's declarations and the SFPU marker by kir.SFPUDecls), and the tests
// compile every sample kernel (package samples) with g++ -fsyntax-only
// against it; golden files under testdata/golden hold the printed kernels
// and host configs (go test ./codegen/cpp -update rewrites them).
package cpp
