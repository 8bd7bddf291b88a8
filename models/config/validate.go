package config

import (
	"fmt"
	"math"
)

// TileWidth is the width of a Blackhole tile; per-device MLP and vocab
// shards are whole multiples of it.
const TileWidth = 32

// supportedSSMDTypes are the accepted mamba_ssm_dtype values.
var supportedSSMDTypes = []string{"float32", "bfloat16", "float16"}

// Validate checks that c is internally consistent: every size is positive;
// NumAttentionHeads is a multiple of NumKeyValueHeads and
// LinearNumValueHeads of LinearNumKeyHeads; len(Layers) equals
// NumHiddenLayers and every entry is GDN or Attention; RoPE is the default
// type with a positive theta and a rotary dim (HeadDim *
// PartialRotaryFactor) that is a positive even integer <= HeadDim;
// rms_norm_eps is positive; hidden_act is "silu"; mamba_ssm_dtype is
// float32, bfloat16 or float16. The first violation is returned.
func (c *Config) Validate() error {
	positive := []struct {
		name string
		v    int
	}{
		{"hidden_size", c.HiddenSize},
		{"intermediate_size", c.IntermediateSize},
		{"vocab_size", c.VocabSize},
		{"num_hidden_layers", c.NumHiddenLayers},
		{"num_attention_heads", c.NumAttentionHeads},
		{"num_key_value_heads", c.NumKeyValueHeads},
		{"head_dim", c.HeadDim},
		{"linear_num_key_heads", c.LinearNumKeyHeads},
		{"linear_num_value_heads", c.LinearNumValueHeads},
		{"linear_key_head_dim", c.LinearKeyHeadDim},
		{"linear_value_head_dim", c.LinearValueHeadDim},
		{"linear_conv_kernel_dim", c.LinearConvKernelDim},
		{"max_position_embeddings", c.MaxPositionEmbeddings},
	}
	for _, p := range positive {
		if p.v <= 0 {
			return fmt.Errorf("%s is %d, want > 0", p.name, p.v)
		}
	}
	if c.NumAttentionHeads%c.NumKeyValueHeads != 0 {
		return fmt.Errorf("num_attention_heads %d is not divisible by num_key_value_heads %d",
			c.NumAttentionHeads, c.NumKeyValueHeads)
	}
	if c.LinearNumValueHeads%c.LinearNumKeyHeads != 0 {
		return fmt.Errorf("linear_num_value_heads %d is not divisible by linear_num_key_heads %d",
			c.LinearNumValueHeads, c.LinearNumKeyHeads)
	}
	if len(c.Layers) != c.NumHiddenLayers {
		return fmt.Errorf("num_hidden_layers is %d but the layer pattern has %d layers",
			c.NumHiddenLayers, len(c.Layers))
	}
	for i, k := range c.Layers {
		if k != GDN && k != Attention {
			return fmt.Errorf("layer %d has invalid kind %v", i, k)
		}
	}
	if !(c.RMSNormEps > 0) || math.IsInf(c.RMSNormEps, 0) {
		return fmt.Errorf("rms_norm_eps is %v, want a finite number > 0", c.RMSNormEps)
	}
	if c.RopeType != defaultRopeType {
		return fmt.Errorf("unsupported rope type %q (only %q is supported)", c.RopeType, defaultRopeType)
	}
	if !(c.RopeTheta > 0) || math.IsInf(c.RopeTheta, 0) {
		return fmt.Errorf("rope_theta is %v, want a finite number > 0", c.RopeTheta)
	}
	if !(c.PartialRotaryFactor > 0 && c.PartialRotaryFactor <= 1) {
		return fmt.Errorf("partial_rotary_factor is %v, want 0 < factor <= 1", c.PartialRotaryFactor)
	}
	exact := float64(c.HeadDim) * c.PartialRotaryFactor
	rot := c.RotaryDim()
	if math.Abs(exact-float64(rot)) > 1e-9 || rot <= 0 || rot%2 != 0 || rot > c.HeadDim {
		return fmt.Errorf("rotary dim head_dim %d x partial_rotary_factor %v = %v, want a positive even integer <= head_dim",
			c.HeadDim, c.PartialRotaryFactor, exact)
	}
	if c.HiddenAct != defaultHiddenAct {
		return fmt.Errorf("unsupported hidden_act %q (only %q is supported)", c.HiddenAct, defaultHiddenAct)
	}
	okDType := false
	for _, d := range supportedSSMDTypes {
		okDType = okDType || c.MambaSSMDType == d
	}
	if !okDType {
		return fmt.Errorf("unsupported mamba_ssm_dtype %q (want one of %q)", c.MambaSSMDType, supportedSSMDTypes)
	}
	return nil
}

// Shard is the per-device share of a Config under tensor parallelism over
// a 1xDevices mesh.
type Shard struct {
	Devices int
	// AttentionHeads is the q (and gate) heads per device.
	AttentionHeads int
	// KVHeads is the kv heads per device: NumKeyValueHeads/Devices when
	// Devices divides them, else 1 (replicated).
	KVHeads int
	// KVReplicas is how many devices hold a copy of each kv head: 1 when
	// split, Devices/NumKeyValueHeads when replicated.
	KVReplicas int
	// LinearKeyHeads and LinearValueHeads are the GDN heads per device.
	LinearKeyHeads, LinearValueHeads int
	// ConvChannels is the GDN q|k|v conv channels per device.
	ConvChannels int
	// IntermediateSize is the MLP gate/up width per device (whole tiles).
	IntermediateSize int
	// VocabRows is the lm_head rows per device: ceil(vocab/Devices) rounded
	// up to whole tiles.
	VocabRows int
	// VocabPadding is VocabRows*Devices - VocabSize: zero rows at the end of
	// the last shard(s) whose logits must be masked before sampling.
	VocabPadding int
}

// Shard returns the per-device shapes of c on a 1xdevices mesh, or an error
// naming the first field that does not split (see CheckMesh for the rules).
// c is validated first.
func (c *Config) Shard(devices int) (Shard, error) {
	if devices < 1 {
		return Shard{}, fmt.Errorf("mesh 1x%d: device count must be >= 1", devices)
	}
	if err := c.Validate(); err != nil {
		return Shard{}, fmt.Errorf("mesh 1x%d: %w", devices, err)
	}
	s := Shard{Devices: devices}
	notDivisible := func(name string, v int) error {
		return fmt.Errorf("mesh 1x%d: %s %d is not divisible by %d devices", devices, name, v, devices)
	}
	if c.NumAttentionHeads%devices != 0 {
		return Shard{}, notDivisible("num_attention_heads", c.NumAttentionHeads)
	}
	s.AttentionHeads = c.NumAttentionHeads / devices

	kv := c.NumKeyValueHeads
	switch {
	case kv%devices == 0:
		s.KVHeads, s.KVReplicas = kv/devices, 1
	case devices%kv == 0:
		// Each device's q heads (a contiguous block of
		// NumAttentionHeads/devices) lie inside one kv group because
		// that block size divides the group size.
		s.KVHeads, s.KVReplicas = 1, devices/kv
	default:
		return Shard{}, fmt.Errorf("mesh 1x%d: num_key_value_heads %d is neither divisible by %d devices nor replicable over them (%d is not a multiple of %d)",
			devices, kv, devices, devices, kv)
	}

	if c.LinearNumKeyHeads%devices != 0 {
		return Shard{}, notDivisible("linear_num_key_heads", c.LinearNumKeyHeads)
	}
	if c.LinearNumValueHeads%devices != 0 {
		return Shard{}, notDivisible("linear_num_value_heads", c.LinearNumValueHeads)
	}
	s.LinearKeyHeads = c.LinearNumKeyHeads / devices
	s.LinearValueHeads = c.LinearNumValueHeads / devices
	s.ConvChannels = 2*s.LinearKeyHeads*c.LinearKeyHeadDim + s.LinearValueHeads*c.LinearValueHeadDim

	if c.IntermediateSize%(TileWidth*devices) != 0 {
		return Shard{}, fmt.Errorf("mesh 1x%d: intermediate_size %d does not split into whole %d-wide tiles over %d devices (needs a multiple of %d)",
			devices, c.IntermediateSize, TileWidth, devices, TileWidth*devices)
	}
	s.IntermediateSize = c.IntermediateSize / devices

	perDevice := (c.VocabSize + devices - 1) / devices
	s.VocabRows = (perDevice + TileWidth - 1) / TileWidth * TileWidth
	s.VocabPadding = s.VocabRows*devices - c.VocabSize
	return s, nil
}

// CheckMesh reports whether c shards over a 1xdevices mesh: q heads, GDN
// key and value heads split evenly; kv heads split evenly or, when devices
// is a multiple of them, are replicated; the MLP intermediate size splits
// into whole 32-wide tiles per device. The vocabulary is padded and never
// fails. The error names the field, its value and the device count, e.g.
// "mesh 1x5: num_attention_heads 24 is not divisible by 5 devices".
func (c *Config) CheckMesh(devices int) error {
	_, err := c.Shard(devices)
	return err
}
