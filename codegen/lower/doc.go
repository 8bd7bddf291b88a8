// Package lower turns one graph op into one kernel IR program: the second
// of the three levels of DESIGN.md.
//
// Lower takes an op of a graph that has been fused and placed (every tensor
// DRAM interleaved) and returns a *kir.Program: the cores it runs on, its
// circular buffers, and a reader, compute and writer kernel per core with
// their argument tables. Lowerings are looked up in a table keyed by
// ir.OpKind, filled from one file per op family (eltwise.go, matmul.go,
// norm.go, embedding.go, argmax.go). An op kind without an entry, or a shape
// a lowering does not handle, is an error naming the op (op.Where()), its
// operand and result types and the rule.
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
// Compute kernels use fp32 DEST accumulation for matmul and rmsnorm (DEST
// then holds 4 tiles in half-sync mode and output sub-blocks are at most
// that), and for eltwise ops whenever an operand or the result is not bf16;
// multiplies and matmuls run at Context.Fidelity (HiFi4 by default, the
// fidelity of ref.DefaultOptions). So a program reproduces the reference
// evaluator at the same formats up to accumulation order and the
// intermediate formats documented on each lowering.
//
// # Tiles and padding
//
// Tile-layout tensors are zero padded to whole tiles by whoever writes them
// first (the host upload); device programs may leave other values in
// padding. Lowerings that reduce over the last dimension (rmsnorm, matmul's
// K) therefore require it to be a multiple of 32, so padding never enters a
// reduction.
package lower
