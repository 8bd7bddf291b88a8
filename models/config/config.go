package config

import (
	_ "embed"
	"fmt"
	"math"
	"sync"
)

// LayerKind is the token mixer of one decoder layer.
type LayerKind uint8

// Layer kinds.
const (
	GDN       LayerKind = iota // Gated DeltaNet linear attention ("linear_attention")
	Attention                  // gated full attention ("full_attention")
)

// String returns "gdn" or "attention".
func (k LayerKind) String() string {
	switch k {
	case GDN:
		return "gdn"
	case Attention:
		return "attention"
	}
	return fmt.Sprintf("LayerKind(%d)", int(k))
}

// HFName returns the Hugging Face layer_types spelling: "linear_attention"
// or "full_attention".
func (k LayerKind) HFName() string {
	switch k {
	case GDN:
		return hfLinear
	case Attention:
		return hfFull
	}
	return k.String()
}

const (
	hfLinear = "linear_attention"
	hfFull   = "full_attention"
)

// Config is the text model of a Qwen3.5-style hybrid checkpoint. Field
// comments give the Hugging Face name. A Config returned by Parse, Load or
// Default27B has passed Validate; the derived helpers assume that.
type Config struct {
	ModelType             string  // model_type of the text config ("qwen3_5_text")
	HiddenSize            int     // hidden_size
	IntermediateSize      int     // intermediate_size (SwiGLU MLP)
	VocabSize             int     // vocab_size
	NumHiddenLayers       int     // num_hidden_layers
	MaxPositionEmbeddings int     // max_position_embeddings
	HiddenAct             string  // hidden_act ("silu")
	RMSNormEps            float64 // rms_norm_eps
	TieWordEmbeddings     bool    // tie_word_embeddings

	// Full attention.
	NumAttentionHeads int  // num_attention_heads (q heads)
	NumKeyValueHeads  int  // num_key_value_heads
	HeadDim           int  // head_dim
	AttnOutputGate    bool // attn_output_gate: q_proj also emits a sigmoid gate

	// Gated DeltaNet.
	LinearNumKeyHeads   int    // linear_num_key_heads
	LinearNumValueHeads int    // linear_num_value_heads
	LinearKeyHeadDim    int    // linear_key_head_dim
	LinearValueHeadDim  int    // linear_value_head_dim
	LinearConvKernelDim int    // linear_conv_kernel_dim
	MambaSSMDType       string // mamba_ssm_dtype: recurrent state dtype ("float32")

	// RoPE.
	RopeType            string  // rope_type ("default")
	RopeTheta           float64 // rope_theta
	PartialRotaryFactor float64 // partial_rotary_factor

	// FullAttentionInterval is full_attention_interval, 0 when the file
	// does not set it.
	FullAttentionInterval int
	// Layers holds the mixer of every decoder layer, len NumHiddenLayers.
	Layers []LayerKind
	// Quantization is quantization_config (nil when the checkpoint is not
	// quantised); Parse refuses methods tcc cannot dequantise.
	Quantization *Quantization
}

// Clone returns a deep copy of c.
func (c *Config) Clone() *Config {
	d := *c
	d.Layers = append([]LayerKind(nil), c.Layers...)
	if c.Quantization != nil {
		q := *c.Quantization
		q.BlockSize = append([]int(nil), q.BlockSize...)
		q.Ignore = append([]string(nil), q.Ignore...)
		d.Quantization = &q
	}
	return &d
}

// RotaryDim is the number of leading head dimensions RoPE rotates:
// HeadDim * PartialRotaryFactor (64 for the 27B).
func (c *Config) RotaryDim() int {
	return int(math.Round(float64(c.HeadDim) * c.PartialRotaryFactor))
}

// AttentionGroupSize is the number of q heads sharing one kv head
// (NumAttentionHeads / NumKeyValueHeads; 6 for the 27B).
func (c *Config) AttentionGroupSize() int {
	if c.NumKeyValueHeads == 0 {
		return 0
	}
	return c.NumAttentionHeads / c.NumKeyValueHeads
}

// LinearGroupSize is the number of GDN value heads sharing one key head
// (LinearNumValueHeads / LinearNumKeyHeads; 3 for the 27B). Value head h
// uses key head h / LinearGroupSize.
func (c *Config) LinearGroupSize() int {
	if c.LinearNumKeyHeads == 0 {
		return 0
	}
	return c.LinearNumValueHeads / c.LinearNumKeyHeads
}

// QDim is NumAttentionHeads * HeadDim (the attention q width).
func (c *Config) QDim() int { return c.NumAttentionHeads * c.HeadDim }

// QProjDim is the q_proj output width: QDim, doubled when AttnOutputGate
// (q and gate interleaved per head).
func (c *Config) QProjDim() int {
	if c.AttnOutputGate {
		return 2 * c.QDim()
	}
	return c.QDim()
}

// KVDim is NumKeyValueHeads * HeadDim (the k_proj and v_proj width).
func (c *Config) KVDim() int { return c.NumKeyValueHeads * c.HeadDim }

// LinearKeyDim is LinearNumKeyHeads * LinearKeyHeadDim: the width of each
// of the GDN q and k blocks (2048 for the 27B).
func (c *Config) LinearKeyDim() int { return c.LinearNumKeyHeads * c.LinearKeyHeadDim }

// LinearValueDim is LinearNumValueHeads * LinearValueHeadDim: the width of
// the GDN v block, of z and of the out_proj input (6144 for the 27B).
func (c *Config) LinearValueDim() int { return c.LinearNumValueHeads * c.LinearValueHeadDim }

// ConvChannels is the number of channels of the GDN causal conv, q|k|v:
// 2*LinearKeyDim + LinearValueDim (10240 for the 27B).
func (c *Config) ConvChannels() int { return 2*c.LinearKeyDim() + c.LinearValueDim() }

// ConvStateLen is the number of past inputs the GDN conv keeps per channel:
// LinearConvKernelDim - 1.
func (c *Config) ConvStateLen() int { return c.LinearConvKernelDim - 1 }

// AttentionLayers returns the zero-based indices of the full attention
// layers in increasing order.
func (c *Config) AttentionLayers() []int { return c.layersOf(Attention) }

// GDNLayers returns the zero-based indices of the GDN layers in increasing
// order.
func (c *Config) GDNLayers() []int { return c.layersOf(GDN) }

func (c *Config) layersOf(k LayerKind) []int {
	var idx []int
	for i, l := range c.Layers {
		if l == k {
			idx = append(idx, i)
		}
	}
	return idx
}

//go:embed qwen27b.json
var qwen27bJSON []byte

var default27B = sync.OnceValue(func() *Config {
	c, err := Parse(qwen27bJSON)
	if err != nil {
		// The embedded file is fixed data checked by the tests.
		panic("config: embedded qwen27b.json: " + err.Error())
	}
	return c
})

// Default27B returns a fresh copy of the Qwen3.8-27B config (embedded from
// qwen27b.json); callers may modify it.
func Default27B() *Config { return default27B().Clone() }

// Default27BJSON returns a copy of the embedded 27B config.json bytes.
func Default27BJSON() []byte { return append([]byte(nil), qwen27bJSON...) }
