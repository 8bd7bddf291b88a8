// Package tinymlp is the smallest model that exercises the whole tcc path:
//
//	embedding -> N x [rmsnorm -> SwiGLU MLP -> residual add] -> rmsnorm -> lm_head -> argmax
//
// Activations are bf16 and weights bfp8_b (the embedding table and norm
// weights stay bf16). Norms are written decomposed (square, mean, add eps,
// rsqrt, two multiplies) with zero-centred (1 + w) weights; the fuse pass
// turns each into one rms_norm op. It registers itself as "tiny-mlp".
package tinymlp
