// Package srcbtable decides which of a model's weights are stored in
// transposed tiles and multiplied on SrcB (ir.WeightsOnSrcB), for a whole
// model build rather than one graph.
//
// One copy of a model's weights serves every step graph built from it: a
// prefill chunk, the prompt's remainder, decode. A weight can be stored
// in only one layout, so the table is the weights that the model's most
// fused step (decode, SharingArgs), after the pass pipeline, multiplies
// only as a matmul's weight (passes.WeightNamesOnSrcB). Names computes
// it; Store marks one graph's weights from it and refuses a graph that
// reads a weight of the table any other way (a fusion that fires only at
// that graph's shape), naming the weight and the op, so a build never
// holds a weight in a layout the other steps' copy does not have.
//
// tcc build, run and perf (cmd/tcc/cli, --weights-on-srcb) and the
// committed kernels (kernels_gen/gen) use the same table.
package srcbtable
