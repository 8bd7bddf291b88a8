// Package lower turns one graph op into one kernel IR program: the second
// of the three levels of DESIGN.md.
//
// Lower takes an op of a graph (unfused or fused, placed) and returns a
// *kir.Program: the cores it runs on, its circular buffers, and a reader,
// compute and writer kernel per core with their argument tables. Lowerings
// are looked up in a table keyed by ir.OpKind (lowerings, lower.go), filled
// from one file per op family, each opening with the family's doc:
// eltwise.go, matmul.go (built by the engine of matmul_engine.go with the
// epilogues of matmul_epilogue.go), bmm.go, norm.go, reduce.go, layout.go
// (layout_chain.go: a chain of data movements through its composed index
// map), embedding.go, argmax.go, rotary.go, cache.go, sdpa.go, prefill.go, the
// ring collectives (collective*.go) and the fused ops (fused_*.go;
// sdpa_decode_gated's flash decoding in flash_sdpa.go; the attention
// prologues' rows into bfp8_b KV caches in kv_bfp8.go). Most
// start from a splitProgram (split.go): the program with its buffers, its
// work split over the first cores, the CB plan on them and the kernels'
// buffer bindings.
// An op kind without an entry, or a shape a lowering does not handle, is an
// error naming the op (op.Where()), its operand and result types and the
// rule.
//
// Programs are assembled from the building blocks of package blocks (CB
// plans, page addressing of any placement, page streams, the Gather
// relayout engine, the compute-state tracker and its tile ops), so a new
// lowering or fused program mostly composes existing pieces.
//
// Work shared between the cores of one program is built from the
// protocols of package multicore: mcast.go multicasts a decode matmul's
// activation row (multicore.Multicast) and, one round per tile row, a
// prefill matmul's rows when its weights are resident
// (multicore.Rounds, matmul_resident.go; a one-row ring in K chunks that
// its last product frees, matmul_rowchunks.go); norm_split.go and the GDN
// recurrence exchange partial sums with a group leader
// (multicore.Exchange); the all_reduce_add_rmsnorm ring pushes into its
// tail (multicore.Push); flash decoding merges its cores' partial
// softmax results on a leader (multicore.SplitCombine). argmax.go folds
// per-range (index, key) pairs on a leader. Each states its semaphore protocol and why it cannot deadlock.
//
// # Placement
//
// Operands and results may be DRAM interleaved, L1 interleaved or L1
// sharded (any sharded kind, with the simulator's page distribution:
// PagesPerCore consecutive pages per core of the shard grid); readers and
// writers address them through blocks.Access. DRAM width sharding is not
// supported.
//
// # Buffers
//
// Programs name the tensors they read and write symbolically: every
// kir.BufferAddr argument names a buffer declared in Program.Buffers with
// Context.BufferName (weights by checkpoint name, everything else "t<ID>"),
// so the runtime allocates each tensor once and resolves the names at load
// time. PageLayout gives the page size and count of a tensor: one tile per
// page in tile layout, one row of the last dimension per page in row-major
// layout. Buffer base addresses reach the kernels as common runtime
// arguments; the per-core work split (first page, page count) as per-core
// runtime arguments.
//
// # Work split
//
// Work is split over the first n cores of the worker grid in row-major order
// (Split). n minimises a small cost estimate in Tensix cycles:
//
//	cost(n) = n*DispatchCycles + max(ceil(items/n)*itemCycles + perCoreCycles, floorCycles)
//
// where DispatchCycles is what each extra core costs the host dispatch
// (launch message and runtime arguments), itemCycles the per-item time of
// one core, perCoreCycles the per-core work that does not shrink with n
// (reading a matmul's activation row) and floorCycles a bound no core count
// beats (DRAM bandwidth). Ties go to fewer cores. Matmul records its plan in
// the compute kernel's defines (MM_CORES, MM_TILES_PER_CORE, MM_SUBBLOCK).
//
// # Numerics
//
// Compute kernels use fp32 DEST accumulation (DEST then holds 4 tiles in
// half-sync mode and output sub-blocks are at most that; eltwise.go says
// why even an all-bf16 eltwise op needs it) except the bf16 adds of the
// ring collectives and their residual tails; multiplies and matmuls run
// at Context.Fidelity (HiFi4 by default, the fidelity of
// ref.DefaultOptions), or at the op's own fidelity attribute, or for the
// matmul family at the cheaper fidelity exact for its weights' format
// (ir.OpFidelity, which the reference reads too). Intermediates between compute stages are fp32 CBs.
// So a program reproduces the reference evaluator at the same formats up to
// accumulation order, the FPU's reading of fp32 operands as tf32, and the
// intermediate formats documented on each lowering. Data movement and
// typecasts reproduce it bit for bit.
//
// # Tiles and padding
//
// Tile-layout tensors are zero padded to whole tiles by whoever writes them
// first (the host upload); device programs may leave other values in
// padding (relayouts fill result padding with zeros). Lowerings that reduce
// over a padded dimension zero the operand's padding in the reader first
// (sum, mean, bmm's K, sdpa's cache rows past pos); the norms and matmul
// require the reduced last dimension to be a multiple of 32.
//
// # Persistent state
//
// When Context.Alias maps a result to a state, the result's buffer is the
// state's (BufferName) and the program updates it in place; update_cache
// then reads and writes only the tiles of the new position instead of
// copying the cache.
//
// # Adding an op (about three files)
//
//  1. Add an entry to the op table in ir/opspec/*.go: name, Go name,
//     operands, attributes, a one-line semantics comment and the name of its
//     shape rule.
//  2. If no existing shape rule fits, write one in ir/shape_rules*.go; run
//     go generate ./ir (regenerates ir/ops_gen.go: enum, info table, a typed
//     Builder method). TestOpsGenFresh fails while the generated file is
//     stale.
//  3. Give it semantics in the reference evaluator (sim/ref, one table
//     entry); TestEveryOpHasEvaluator fails until you do. To run it on the
//     device, add a lowering here (built from package blocks, and from
//     package multicore where its cores share work); most start from a
//     splitProgram (split.go: the program, its work split over the first
//     cores, the CB plan and the buffer bindings, and the writer of the
//     result's pages).
//
// A fused op is added the same way; its rule is described in package
// passes ("Adding a fusion rule").
//
// # A fused matmul with a new epilogue
//
// A fused matmul with a new epilogue (what happens to the products before
// they are stored, as matmul_add adds a residual) lowers through the matmul
// engine (matmul_engine.go): the epilogue is one type implementing
// mmEpilogue in matmul_epilogue.go (its inputs, its CBs, the CB each
// weight's products are packed to, its per-sub-block compute, its cost and
// whether it multiplies on the FPU, which keeps the kernel at the requested
// math fidelity) and its op a case of newFusedMatmul in matmul.go.
// TestMatmulEpilogueInOneFile defines one (silu(a @ w) * m) in its test
// file and runs it on the simulator.
//
// The engine's weights are placed in blocks its readers move whole
// (matmul_weights.go, kir.BlockLayout): runs of one core's columns of the
// op's decode plan, groups of the 4-column DEST sub-block, the K rows a
// reader moves per barrier, tiles back to back, blocks interleaved over the
// banks and numbered across runs first, so that cores streaming in step
// read from all eight banks at once. A reader moves each block as one
// contiguous run of whole tiles up to 16 KB (a bfp4_b tile per request is
// request-bound: 62% of a bank from one NoC). The layout depends only on the
// weight and its op, so the prefill build reads the same buffer;
// codegen.Compile places every weight that only engine ops read, and
// programs.json records it (buffers[].blocks).
//
// # A unary SFPU op (two table entries)
//
// A unary SFPU op is two hand-edited files (a binary one, as mul_binary,
// its Op constant and Table entry alone): its Op constant and Table entry in
// ir/sfpu/table.go (name, tt-metal call, init, header, declarations as read
// from the pinned release, template arguments for the init and the call,
// scalar or not, constant arguments, cycles per tile counted from the tt-llk
// function's instructions with the rules of ir/sfpu/cycles.go and their
// source in CyclesSource, pinned in TestCycles, semantics) and its op table
// line in ir/opspec flagged SFPU: true, then go generate ./ir (a third file
// when its semantics need a new ir/numerics function). Lowering
// (lowerUnary), the eltwise-chain rules and evaluator (ir.ChainableOps), the
// kernel executor, the timing model, the printer's includes, the g++
// declaration header and the reference evaluator all follow from the two
// tables. TestNewUnaryOpIsTwoTableLines (codegen/kir) adds tanh to a copy of
// the module with exactly those edits and checks it lowers, prints
// tanh_tile, passes the g++ syntax check, runs on the simulator and matches
// the reference.
//
// The printer prints an SFPU call purely from its entry: exp_tile_init<false,
// false>() and exp_tile<false, false>(i) are exp's InitTemplate and
// CallTemplate; softplus's beta, 1/beta and threshold are its Consts. The
// semantics (Eval) are the exact function, so a call must not run an
// approximation: TestSFPUApproxSwitchesOff (codegen/kir) parses every
// entry's declarations and fails when an approximation switch (a bool
// template or function parameter whose name contains approx or fast, in any
// case) is true, by default or set. So gelu, whose gelu_tile defaults
// fast_and_approx to true, needs CallTemplate: "false" (and InitTemplate:
// "false"); TestSFPUApproxCheckCatchesGelu shows the entry without them is
// refused. Approximations selected by the host's math_approx_mode are off:
// no lowering sets it.
//
// # A new device instruction
//
// A tt-metal call that is not an SFPU op is one entry in the instruction
// table codegen/internal/insnspec (Go type and fields, tt-metal call or call
// family, header, C++ argument order, kernel class, operands, FPU-read CBs,
// init/uninit pairing and its tt_api.h declaration) and go generate
// ./codegen/kir, which writes the kernel-IR type and every per-statement
// table (codegen/kir/stmt_gen.go) and the printer's headers, argument lists
// and g++ declarations (codegen/cpp/insn_gen.go); TestStmtGenFresh and
// TestInsnGenFresh fail while they are stale. What it does is then two
// hand-written cases: its effect in the kernel executor (sim/kexec,
// dataflow.go or compute.go) and its cost in the timing model
// (sim/timing/calls.go); TestEveryInstructionExecutes and
// TestEveryInstructionHasCost name each instruction that lacks one. A
// builder method (codegen/kir/builder.go) and a lowering that emits it
// complete it.
//
// # The tt-metal release and the rules a card enforces
//
// tcc prints the kernel API of one pinned tt-metal release,
// codegen/target.TTMetalRelease (tt-metal main at commit 923191064229,
// 2026-02-03). Its names live in one table (codegen/kir/api.go), their
// headers in codegen/cpp/headers.go and their signatures, template
// parameters included, in the declaration header the CI syntax check
// compiles against (codegen/cpp/testdata/tt_api.h, which cites file and line
// of each). What the release requires and tcc emits because of it:
// REDUCE_OP / REDUCE_DIM defines for every kernel that includes reduce.h,
// NUM_DRAM_BANKS for interleaved addressing, reduce_uninit before any
// non-reduce op after a reduction, noc_async_atomic_barrier after semaphore
// increments, unpack_to_dest_fp32_cbs for fp32 CBs that must copy exactly,
// and exp_tile<false, false>. The simulator reproduces each of these, so a
// kernel that forgets one fails a test.
//
// Rules a card enforces by hanging or refusing to load, which every program
// is held to (kir.Validate at build time, named [rule ...] in the error; the
// simulator again at run time where the value is only known then):
//
//   - mcast-range: NoC 1 multicasts from the bottom-right corner; a
//     rectangle given in NoC-0 order reaches other cores and the receivers
//     spin forever. Corners come from kir.McastCorners(noc, lo, hi).
//   - code-size: kernel binaries share the 69 KiB kernel-config ring with
//     runtime args, semaphores and CB configs. kir.EstimateCode sizes each
//     kernel from its kernel IR (calibrated on 175 kernels compiled with
//     riscv GCC against the pinned release: never below the real size, at
//     most 1.5x over 4 KiB) and checks each RISC's budget and the ring
//     (codegen/target/codesize.go).
//   - eth-send: eth_send_bytes with default arguments issues one transmit
//     command per 16 bytes; tcc sends whole transfers in the fewest commands.
//   - eth-wait: in 2-ERISC mode the base firmware shares ERISC0 and runs
//     only inside the ethernet waits, so ethernet kernels wait with
//     eth_noc_semaphore_wait*.
//   - l1-budget: a program's CBs must fit a core's L1.
//   - math_approx_mode switches tt-llk's SFPU functions to approximations:
//     the simulator refuses an SFPU op under it.
//
// Memory a program never wrote, L1 and DRAM, reads in the simulator as
// garbage (0x7FFF per 16-bit half, a NaN), as a card leaves stale bytes, so
// a consumer of padding rows that no producer wrote shows.
//
// Checked outside CI (nothing of tt-metal is in this repository): every
// distinct kernel of the tiny-mlp build and of the qwen27b decode and prefill
// builds at meshes 1x1 and 1x2 compiled with riscv64-unknown-elf-g++
// (-march=rv32im_zicsr_zifencei -mabi=ilp32 -Werror) through that release's
// firmware wrappers and generated descriptor headers, compute kernels once
// per TRISC with stubs for the SFPI builtins: 444 of 444 compile.
package lower
