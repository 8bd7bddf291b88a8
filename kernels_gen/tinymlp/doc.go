// Package tinymlp is the generated build of the tiny-mlp model (default
// sizes, mesh 1x1): see kernels_gen and codegen/gogen.
//
//go:generate go run ../../cmd/tcc gen-go tiny-mlp --meshes 1x1 -o table_gen.go
package tinymlp
