// Package kernels_gen holds committed, generated output of tcc for the
// reference models: one subpackage per model (tinymlp, qwen27b) declaring a
// gogen.Table — kernel sources deduplicated by content, one typed host
// program config per distinct program signature, and per mesh the program
// list and op-count report. Each subpackage has a freshness test; refresh
// with `go generate ./kernels_gen/...` and review the diff.
package kernels_gen
