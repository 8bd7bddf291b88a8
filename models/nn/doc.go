// Package nn holds the building blocks of Qwen-style hybrid models written
// against ir.Builder: RMSNorm (as one composed-path program, and decomposed),
// L2Norm, the SwiGLU MLP, the Gated DeltaNet (GDN) mixer and the gated
// full-attention mixer, for a decode step (GDNDecode, GatedAttentionDecode:
// one new token per user) and a prefill step (GDNPrefill in the chunked WY
// form, GatedAttentionPrefill: S tokens per user).
//
// # Per-device graphs and tensor parallelism
//
// Every block builds the graph of ONE device of a 1xN mesh row (TP): value
// types are per-device shapes and ir.TensorType.Dist records which axis is
// split over the devices (ir.Replicated when each device holds the whole
// tensor, and always on one device). The split is Megatron style:
//
//   - column-parallel projections (in-projections, q/k/v, MLP gate/up,
//     lm_head) hold this device's output features: heads, intermediate
//     columns or vocab rows; their results are split and need no collective;
//   - row-parallel projections (GDN out_proj, attention o_proj, MLP down)
//     hold this device's input features and leave a partial sum, which an
//     all_reduce (mixers) or a reduce_scatter (MLP; TP.Gather then makes it
//     whole with an all_gather) completes. ir.Dist has no "partial" state,
//     so a partial sum is marked replicated (its shape is the whole
//     tensor's) until its collective;
//   - with one device no collective is emitted.
//
// Weights carry their Hugging Face checkpoint names. A projection's IR
// weight is the HF [out, in] tensor transposed to [in, out] (matmul takes
// w as [K, N]) and restricted to the device's share; the Declare functions
// document each share (e.g. in_proj_qkv takes the device's heads from each
// of the q, k and v blocks, so its per-device tensor is not one contiguous
// slice of the HF tensor). The conv taps are stored tap-major, [K, channels].
// Share (with GDNShares, AttentionShares, MLPShares) states each cut as data
// and cuts a whole tensor into a device's share, so a loader and the tests
// use one definition.
//
// # Mirroring the composed path
//
// The unfused graph is meant to have one op per device program of the
// composed TTNN decode path (reference/qwen27b.md), including its reshapes,
// typecasts, memory moves and collectives, so that op counts and the timing
// model compare with the measured numbers and the fusion passes have the
// real overhead to remove. Where the composed path's sequence is forced by
// TTNN (a rotary op that wants one row per user, a cache update that wants
// one user per core), the blocks emit the same ops. Where the checkpoint's
// form differs from what the composed path precomputed at load time (one
// matmul per checkpoint tensor instead of one fused in-projection;
// -exp(A_log) computed on device), the blocks follow the checkpoint.
// models/qwen27b's doc lists every difference in count.
//
// # Parts
//
// Blocks charge the ops they emit to named parts through an optional Tally
// (in_proj, conv, split, gates, recurrence, state_copy, norm_gate, out_proj
// for GDN; qkv_proj, heads, qk_norm, rope, kv_update, sdpa, gate, o_proj for
// attention; mlp for the MLP; prefill GDN has chunk_prep and chunks in
// place of recurrence) so that per-part counts can be reported and tested
// without tagging ops.
//
// # Tests
//
// The tests evaluate each block's graph with the reference evaluator
// (sim/ref) in both of its modes, ExactOptions (float32 math, no storage
// rounding) and DefaultOptions (the device's storage formats: bf16
// activations, bfp8_b/bfp4_b weights), and compare it with float64 code
// written in the tests from the published equations (reference/qwen27b.md,
// the HF modelling code): the GDN decode recurrence over several steps with
// its conv output, recurrence output and both states; the chunked GDN
// prefill against the token-by-token recurrence (one partial chunk, whole
// chunks, padded chunks, the default chunk length); gated attention decode
// and causal prefill with the cache rows they write; the SwiGLU MLP; the
// norms. In the device-format mode the equations start from the inputs as
// the evaluator stored them (bf16, block-float), so the figures measure the
// rounding of intermediates. Figures are PCC and max relative error
// (ir/numerics); exact mode
// must reach PCC >= 0.99999 and max rel err <= 1e-3, the device formats
// PCC >= 0.999. The tensor-parallel split of every block on 2 and 4
// devices (ref.EvalMesh, shares cut by Share.Cut; kv heads split and
// replicated) is compared with one device the same way.
package nn
