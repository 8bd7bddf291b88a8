// Package qwen27b is the generated build of Qwen3.8-27B decode (the
// embedded config, batch 1, fused pipeline) for meshes 1x1 and 1x2: see
// kernels_gen and codegen/gogen. Layers of one kind share program
// signatures; what differs between them (buffer names, so addresses) is
// resolved at load time by gogen.Table.Program.
//
//go:generate go run ../../cmd/tcc gen-go qwen27b --meshes 1x1,1x2 -o table_gen.go
package qwen27b
