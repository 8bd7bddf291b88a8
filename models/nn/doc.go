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
// Package nntest is a float64 interpreter of graphs on all devices of a
// mesh. The tests check every block against a direct implementation of the
// published equations, every block's tensor-parallel split against one
// device (2 and 4 devices, kv heads split and replicated), and prefill
// against repeated decode steps.
package nn
