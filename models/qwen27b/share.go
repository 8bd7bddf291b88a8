package qwen27b

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/models/config"
	"github.com/tcc-dev/tcc/models/nn"
)

// ShareOf returns how each device's copy of the named weight or state (as
// BuildGraph names them) is cut from the whole tensor, the value of the
// one-device (1x1) graph, on a 1xdevices mesh. Embedding and norm weights
// are replicated; lm_head is split on its vocab columns after zero padding
// to the per-device row count times devices. Errors name the value and the
// mesh rule.
func ShareOf(c *config.Config, name string, devices int) (nn.Share, error) {
	mesh := ir.Mesh{Rows: 1, Cols: devices}
	o := DefaultOptions()
	o.Config = c
	d, err := DimsFor(o, mesh)
	if err != nil {
		return nn.Share{}, err
	}
	whole, err := DimsFor(o, ir.Mesh{Rows: 1, Cols: 1})
	if err != nil {
		return nn.Share{}, err
	}
	switch name {
	case Prefix + "embed_tokens.weight", Prefix + "norm.weight", LoopTokens, LoopPos, RopeCosTable, RopeSinTable:
		return nn.Replicate, nil
	case "lm_head.weight":
		s := nn.Split(1, devices)
		s.Pad = d.Shard.VocabRows*devices - whole.Shard.VocabRows
		return s, nil
	}
	layer, rest, ok := splitLayer(name)
	if !ok || layer >= len(c.Layers) {
		return nn.Share{}, fmt.Errorf("qwen27b: %q is not a weight or state of this model", name)
	}
	var table map[string]nn.Share
	if c.Layers[layer] == config.GDN {
		table = nn.GDNShares(whole.GDN, devices)
	} else {
		table = nn.AttentionShares(whole.Attn, devices)
	}
	for k, v := range nn.MLPShares(devices) {
		table[k] = v
	}
	table["input_layernorm.weight"] = nn.Replicate
	table["post_attention_layernorm.weight"] = nn.Replicate
	if s, ok := table[rest]; ok {
		return s, nil
	}
	return nn.Share{}, fmt.Errorf("qwen27b: %q is not a weight or state of layer %d (%s)", name, layer, c.Layers[layer])
}

// splitLayer parses LayerPrefix(i)+rest or StateName(i)+rest.
func splitLayer(name string) (int, string, bool) {
	for _, p := range []struct{ prefix, sep string }{{Prefix + "layers.", "."}, {"state.layers.", ""}} {
		s, ok := strings.CutPrefix(name, p.prefix)
		if !ok {
			continue
		}
		i := strings.IndexByte(s, '.')
		if i < 0 {
			return 0, "", false
		}
		n, err := strconv.Atoi(s[:i])
		if err != nil || n < 0 {
			return 0, "", false
		}
		rest := s[i:]
		if p.sep != "" {
			rest = s[i+1:]
		}
		return n, rest, true
	}
	return 0, "", false
}
