// Package blocks holds the kernel-IR building blocks device programs are
// assembled from: a lowering (package lower) or a fused program picks a
// core split, plans its circular buffers, and emits its reader, compute and
// writer kernels from these pieces instead of writing kernel bodies by hand.
//
// # Programs and CBs
//
// NewReaderKernel, NewWriterKernel and NewComputeKernel add the three kernels of the
// usual pipeline on a set of cores. CBPlan allocates CB indices and sizes
// with tt-metal's convention (inputs from c_0, outputs from c_16,
// intermediates from c_24, spilling into any free index) and checks the L1
// budget. Every block documents the CBs it consumes and produces; a block
// that consumes a CB pops exactly what it waited for, and one that produces
// pushes exactly what it reserved, unless its doc says otherwise.
//
// # Data movement
//
// Access addresses the pages of one buffer from a data-movement kernel,
// whatever its placement (its doc gives the page distributions, the
// simulator's and tt-metal's). NoC coordinates of L1 pages come from
// common runtime arguments resolved at load time (kir.NoCX/NoCY), so
// programs stay valid on a harvested chip.
//
// ReadPage / WritePage / ReadPages / WritePages stream whole pages between
// a buffer and a CB; Reserve and WaitFront open a CB's pages for direct
// L1 access. Gather assembles output tiles from the tiles of one or
// more source tensors by a per-run index map: it is the relayout engine
// behind reshape, slice, concat, pad, repeat_interleave, transposes of
// leading dims, row gathers (embedding), rotate-half and cache writes; use
// Emit for a page range, or Begin / Page / End to interleave its pages with
// other reads of the same reader. Local helpers fill
// words, copy runs of elements inside L1, zero the padding of a tile
// (ZeroPadding, for reductions and matmuls over a padded dim) and build
// constant and scaler tiles.
//
// # Compute
//
// Compute wraps a compute kernel's builder and tracks what the unpacker,
// the packer and the FPU/SFPU are configured for, so blocks emit
// reconfig_data_format, pack_reconfig_data_format and the op inits only
// when they change (and again at the top of every loop body, where the
// state is not known statically). On top of it: Unary (copy + SFPU chain +
// pack), BinaryTile (FPU add/sub/mul with row, column or scalar broadcast,
// optional negation), Reduce (row/column sums and maxima against a scaler
// tile), Matmul (tile products accumulated in DEST), and PackOut (commit,
// reserve, pack, push).
//
// # Tile geometry
//
// Image is the tile view of a tile-layout tensor; FaceOffset gives the
// byte offset of an element inside a tile (four 16x16 faces, row-major
// inside a face).
package blocks
