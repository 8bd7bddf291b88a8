package nn

import (
	"fmt"

	"github.com/tcc-dev/tcc/ir"
)

// Share says how one device's copy of a weight or state is cut from the
// whole tensor (the same value as built for a single device).
type Share struct {
	// Axis is the axis that is cut, or -1 when every device holds the
	// whole tensor.
	Axis int
	// Blocks are the sizes of consecutive blocks along Axis of the whole
	// tensor (the GDN q|k|v channels); each block is cut into Parts equal
	// pieces and a device's share is its piece of every block, in order.
	// Nil means one block spanning the axis.
	Blocks []int
	// Parts is the number of distinct shares: the device count, or fewer
	// when shares are replicated (device d of n holds part d*Parts/n).
	Parts int
	// Pad is the number of zero entries appended to the whole axis before
	// it is cut (lm_head's vocab padding).
	Pad int
}

// Replicate is the share of a tensor every device holds whole.
var Replicate = Share{Axis: -1}

// Split is the share of a tensor cut evenly on axis over devices.
func Split(axis, devices int) Share { return Share{Axis: axis, Parts: devices} }

// Cut returns device's share of whole (row-major, shape whole) on a mesh of
// devices devices, and its shape, or an error naming the rule the share
// breaks.
func (s Share) Cut(whole []float32, shape ir.Shape, device, devices int) ([]float32, ir.Shape, error) {
	if len(whole) != shape.Numel() {
		return nil, nil, fmt.Errorf("share: %d values for shape %s", len(whole), shape)
	}
	if device < 0 || device >= devices {
		return nil, nil, fmt.Errorf("share: device %d of %d", device, devices)
	}
	if s.Axis < 0 || devices == 1 && s.Pad == 0 {
		return append([]float32(nil), whole...), shape.Clone(), nil
	}
	if s.Axis >= shape.Rank() {
		return nil, nil, fmt.Errorf("share: axis %d of a rank-%d tensor", s.Axis, shape.Rank())
	}
	parts := s.Parts
	if devices == 1 {
		parts = 1
	}
	if parts < 1 || devices%parts != 0 {
		return nil, nil, fmt.Errorf("share: %d parts over %d devices", s.Parts, devices)
	}
	blocks := s.Blocks
	if blocks == nil {
		blocks = []int{shape[s.Axis]}
	}
	sum := 0
	for _, b := range blocks {
		sum += b
	}
	if sum != shape[s.Axis] {
		return nil, nil, fmt.Errorf("share: blocks %v add to %d, axis %d has %d", blocks, sum, s.Axis, shape[s.Axis])
	}
	sizes := append([]int(nil), blocks...)
	sizes[len(sizes)-1] += s.Pad
	p := device * parts / devices
	var idx []int // whole-axis indices of the share, in order (>= shape[axis] means padding)
	off := 0
	for _, bs := range sizes {
		if bs%parts != 0 {
			return nil, nil, fmt.Errorf("share: block of %d on axis %d does not split into %d parts", bs, s.Axis, parts)
		}
		piece := bs / parts
		for i := off + p*piece; i < off+(p+1)*piece; i++ {
			idx = append(idx, i)
		}
		off += bs
	}
	out := shape.Clone()
	out[s.Axis] = len(idx)
	inner := 1
	for _, d := range shape[s.Axis+1:] {
		inner *= d
	}
	outer := shape.Numel() / (shape[s.Axis] * inner)
	res := make([]float32, 0, out.Numel())
	for o := 0; o < outer; o++ {
		for _, i := range idx {
			if i >= shape[s.Axis] {
				res = append(res, make([]float32, inner)...)
				continue
			}
			base := (o*shape[s.Axis] + i) * inner
			res = append(res, whole[base:base+inner]...)
		}
	}
	return res, out, nil
}

// GDNShares returns the share of each GDN weight and state on devices
// devices, keyed by name relative to the layer prefix (as DeclareGDN names
// them, "linear_attn.in_proj_qkv.weight", ...) or to the state name
// (".conv", ".recurrent"). whole is the one-device GDNDims.
func GDNShares(whole GDNDims, devices int) map[string]Share {
	qkv := Share{Axis: 1, Blocks: []int{whole.KeyWidth(), whole.KeyWidth(), whole.ValueWidth()}, Parts: devices}
	return map[string]Share{
		"linear_attn.in_proj_qkv.weight": qkv,
		"linear_attn.in_proj_z.weight":   Split(1, devices),
		"linear_attn.in_proj_a.weight":   Split(1, devices),
		"linear_attn.in_proj_b.weight":   Split(1, devices),
		"linear_attn.conv1d.weight":      qkv,
		"linear_attn.A_log":              Split(0, devices),
		"linear_attn.dt_bias":            Split(0, devices),
		"linear_attn.norm.weight":        Replicate,
		"linear_attn.out_proj.weight":    Split(0, devices),
		".conv":                          {Axis: 2, Blocks: qkv.Blocks, Parts: devices},
		".recurrent":                     Split(1, devices),
	}
}

// AttentionShares returns the share of each attention weight and cache on
// devices devices, keyed like GDNShares ("self_attn.q_proj.weight", ...,
// ".k_cache", ".v_cache"). whole is the one-device AttnDims. When there are
// more devices than kv heads, k_proj, v_proj and the caches have one part
// per kv head, each held by devices/KVHeads consecutive devices.
func AttentionShares(whole AttnDims, devices int) map[string]Share {
	kv := Split(1, min(devices, whole.KVHeads))
	return map[string]Share{
		"self_attn.q_proj.weight": Split(1, devices),
		"self_attn.k_proj.weight": kv,
		"self_attn.v_proj.weight": kv,
		"self_attn.o_proj.weight": Split(0, devices),
		"self_attn.q_norm.weight": Replicate,
		"self_attn.k_norm.weight": Replicate,
		".k_cache":                kv,
		".v_cache":                kv,
	}
}

// MLPShares returns the share of each MLP weight, keyed like GDNShares.
func MLPShares(devices int) map[string]Share {
	return map[string]Share{
		"mlp.gate_proj.weight": Split(1, devices),
		"mlp.up_proj.weight":   Split(1, devices),
		"mlp.down_proj.weight": Split(0, devices),
	}
}
