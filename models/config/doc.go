// Package config loads Hugging Face config.json files of Qwen3.5/3.8-style
// hybrid models (Gated DeltaNet linear attention interleaved with gated full
// attention) into a typed, validated Config.
//
// # Input forms
//
// The text model's fields may sit at the top level (a flat config, as written
// by a text-only checkpoint) or under "text_config" (the multimodal wrapper
// form of the reference 27B). When "text_config" is present it wins: every
// field is read from it and the top level is ignored, except
// "tie_word_embeddings", which is taken from the top level when the text
// config does not set it. Unknown fields are ignored; a JSON null counts as
// absent.
//
// The layer pattern comes from "layer_types" ("linear_attention" is a GDN
// layer, "full_attention" an attention layer) or from
// "full_attention_interval" N (1-based every Nth layer is attention, so the
// zero-based layers N-1, 2N-1, ... are). When both are given they must agree
// layer by layer and in length.
//
// RoPE comes from "rope_parameters" {rope_type, rope_theta,
// partial_rotary_factor} or from the flat fields "rope_theta",
// "partial_rotary_factor" and "rope_scaling" (null or an object with
// "rope_type" or "type"). A value given in both places must agree. Only the
// "default" rope type is supported; other keys of rope_parameters (such as
// Qwen3.5's mrope_section, which is the identity for text-only positions) are
// ignored.
//
// # Required fields and defaults
//
// Shape fields (hidden_size, intermediate_size, vocab_size,
// num_hidden_layers, num_attention_heads, num_key_value_heads, head_dim, the
// five linear_* fields), rms_norm_eps, max_position_embeddings and
// rope_theta are required; a missing one is an error naming its JSON path
// (for example "text_config.hidden_size"). The rest default as in the Hugging
// Face Qwen3.5 text config: attn_output_gate true, hidden_act "silu",
// tie_word_embeddings false, mamba_ssm_dtype "float32", rope type "default",
// partial_rotary_factor 0.25, model_type "".
//
// # Meshes
//
// Config.Shard and Config.CheckMesh describe tensor parallelism over a 1xN
// line of cards: attention q heads, GDN key and value heads and the MLP
// intermediate size are split evenly (the intermediate size in whole 32-wide
// tiles per card). KV heads are split when N divides them and replicated when
// N is a multiple of them (the 27B's 4 kv heads on 1x8: two cards hold each
// kv head, and each card's q heads all belong to that one kv head). The
// vocabulary never blocks a mesh: each card holds ceil(vocab/N) rows rounded
// up to a whole tile, and the padding rows (zero weights) must be masked out
// before sampling.
package config
