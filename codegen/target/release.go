package target

// TTMetalRelease is the tt-metal release whose kernel API (the calls, the
// header tree, the template parameters) the C++ printer emits and whose
// host API programs.json describes: the v0.79 development line of
// September 2026 (kernel_main entry points, api/dataflow and api/compute
// headers, matmul_init / copy_init / SrcOrder, ethernet/dataflow_api.h).
// codegen/cpp/testdata/tt_api.h declares that release's signatures.
const TTMetalRelease = "v0.79"
