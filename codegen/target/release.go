package target

// TTMetalRelease is the tt-metal release whose kernel API (the calls, the
// header tree, the template parameters) the C++ printer emits and whose
// host API programs.json describes: tt-metal main at commit 923191064229
// (2026-02-03; the v0.65 development line, SFPI 7.22.0), the newest
// release this project can read whole (the caryzoumvp/tt-metal-sim
// snapshot). Its compute API lives under tt_metal/include/compute_kernel_api
// (mm_init_short, copy_tile_to_dst_init_short, *_tiles_init,
// *_init_short broadcasts, transpose_wh_*; no SrcOrder), the active-erisc
// firmware wrapper includes internal/ethernet/dataflow_api.h, and the JIT
// passes NUM_DRAM_BANKS. codegen/kir/api.go holds the names,
// codegen/cpp/headers.go their headers and codegen/cpp/testdata/tt_api.h the
// signatures.
const TTMetalRelease = "tt-metal@923191064229 (2026-02-03)"
