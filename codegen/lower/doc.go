// Package lower turns one graph op into one kernel IR program: the second
// of the three levels of DESIGN.md.
//
// Lower takes an op of a graph (unfused or fused, placed) and returns a
// *kir.Program: the cores it runs on, its circular buffers, and a reader,
// compute and writer kernel per core with their argument tables. Lowerings
// are looked up in a table keyed by ir.OpKind (lowerings, lower.go), filled
// from one file per op family, each opening with the family's doc:
// eltwise.go, matmul.go (built by the engine of matmul_engine.go with the
// epilogues of matmul_epilogue.go), bmm.go, norm.go, reduce.go, layout.go,
// embedding.go, argmax.go, rotary.go, cache.go, sdpa.go, prefill.go, the
// ring collectives (collective*.go) and the fused ops (fused_*.go). Most
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
// activation row (multicore.Multicast); norm_split.go and the GDN
// recurrence exchange partial sums with a group leader
// (multicore.Exchange); the all_reduce_add_rmsnorm ring pushes into its
// tail (multicore.Push). argmax.go folds per-range (index, key) pairs on
// a leader. Each states its semaphore protocol and why it cannot deadlock.
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
package lower
