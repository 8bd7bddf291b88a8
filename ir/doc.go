// Package ir is tcc's graph IR: what a model computes.
//
// A Graph holds SSA Values (inputs, weights, persistent state and op results)
// and Ops grouped into Regions, one Region per decoder layer plus the
// prologue (embedding) and epilogue (final norm, lm_head, sampling). Every op
// has a kind from the op table (declared as data in ir/opspec and generated
// into ops_gen.go), operands, typed attributes and results whose TensorType
// (shape in elements, dtype, layout, memory config, mesh distribution) is
// inferred by the op's shape rule.
//
// Graphs are built with Builder, whose typed methods (b.Add, b.Matmul, ...)
// are generated; checked by Verify; printed by Print and read back by Parse
// (the two round-trip). A fused op keeps the decomposition it replaced in
// Op.Decomp so the reference evaluator can check one against the other.
//
//go:generate go run ./internal/cmd/opgen -o ops_gen.go
package ir
