// Package models is the registry of models tcc can build. Each model lives in
// its own subpackage (tinymlp, qwen27b, ...), is written in the decomposed
// form (fusion finds the fused form), and registers itself here under the
// name the CLI uses ("tiny-mlp", "qwen27b").
package models
