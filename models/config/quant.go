package config

import (
	"encoding/json"
	"fmt"
	"slices"
)

// Quantization methods and formats tcc's checkpoint loader understands.
const (
	QuantFP8              = "fp8"                  // HF fine-grained FP8: F8_E4M3 weights, weight_scale_inv
	QuantCompressed       = "compressed-tensors"   // llm-compressor
	FormatNVFP4           = "nvfp4-pack-quantized" // compressed-tensors NVFP4
	defaultFP8Block       = 128
	nvfp4GroupSize        = 16
	quantizationConfigKey = "quantization_config"
)

// Quantization is a config's quantization_config: how the checkpoint's
// weights are stored. A config without one has a nil Quantization. Parse
// refuses any method or format tcc cannot dequantise, so a quantised
// checkpoint is never read as if it were bf16.
type Quantization struct {
	Method string // quant_method: QuantFP8 or QuantCompressed
	// FP8: fmt ("e4m3") and weight_block_size ([rows, cols] of one
	// weight_scale_inv entry; nil: one scale per tensor).
	Fmt       string
	BlockSize []int
	// Compressed tensors: the format of every config group (FormatNVFP4)
	// and the weights' group size along the input dimension (16).
	Format    string
	GroupSize int
	// Ignore lists the module names left unquantised ("lm_head", ...;
	// FP8 configs call it modules_to_not_convert).
	Ignore []string
}

// Ignores reports whether module (a weight name without ".weight") is in
// the ignore list.
func (q *Quantization) Ignores(module string) bool {
	return q != nil && slices.Contains(q.Ignore, module)
}

type rawQuant struct {
	QuantMethod     string   `json:"quant_method"`
	Fmt             string   `json:"fmt"`
	WeightBlockSize []int    `json:"weight_block_size"`
	Format          string   `json:"format"`
	Ignore          []string `json:"ignore"`
	NotConvert      []string `json:"modules_to_not_convert"`
	ConfigGroups    map[string]struct {
		Format  string `json:"format"`
		Weights *struct {
			NumBits   int    `json:"num_bits"`
			Type      string `json:"type"`
			GroupSize int    `json:"group_size"`
			Strategy  string `json:"strategy"`
		} `json:"weights"`
	} `json:"config_groups"`
}

// parseQuantization reads quantization_config from the nested text
// config or the top level (where HF writes it).
func parseQuantization(root, src object) (*Quantization, error) {
	o := src
	if !o.has(quantizationConfigKey) {
		o = root
	}
	if !o.has(quantizationConfigKey) {
		return nil, nil
	}
	path := o.path(quantizationConfigKey)
	var r rawQuant
	if err := json.Unmarshal(o.m[quantizationConfigKey], &r); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	q := &Quantization{Method: r.QuantMethod, Fmt: r.Fmt, Format: r.Format, Ignore: append(append([]string{}, r.Ignore...), r.NotConvert...)}
	switch r.QuantMethod {
	case QuantFP8:
		if r.Fmt != "" && r.Fmt != "e4m3" {
			return nil, fmt.Errorf("%s.fmt: %q is not supported (tcc dequantises fp8 e4m3)", path, r.Fmt)
		}
		q.Fmt = "e4m3"
		if r.WeightBlockSize != nil {
			if len(r.WeightBlockSize) != 2 || r.WeightBlockSize[0] < 1 || r.WeightBlockSize[1] < 1 {
				return nil, fmt.Errorf("%s.weight_block_size: %v, want [rows, cols] > 0", path, r.WeightBlockSize)
			}
			q.BlockSize = append([]int{}, r.WeightBlockSize...)
		}
	case QuantCompressed:
		formats := map[string]bool{}
		if r.Format != "" {
			formats[r.Format] = true
		}
		for name, g := range r.ConfigGroups {
			if g.Format != "" {
				formats[g.Format] = true
			}
			if w := g.Weights; w != nil && (w.NumBits != 4 || w.Type != "float" || (w.GroupSize != 0 && w.GroupSize != nvfp4GroupSize)) {
				return nil, fmt.Errorf("%s.config_groups.%s.weights: %d-bit %s, group size %d: tcc reads only NVFP4 (4-bit float, group size 16)", path, name, w.NumBits, w.Type, w.GroupSize)
			}
		}
		if len(formats) != 1 || !formats[FormatNVFP4] {
			var fs []string
			for f := range formats {
				fs = append(fs, f)
			}
			slices.Sort(fs)
			return nil, fmt.Errorf("%s: compressed-tensors format %v is not supported (tcc reads %q)", path, fs, FormatNVFP4)
		}
		q.Format, q.GroupSize = FormatNVFP4, nvfp4GroupSize
	default:
		return nil, fmt.Errorf("%s.quant_method: %q is not supported (tcc dequantises %q and %q with format %q)", path, r.QuantMethod, QuantFP8, QuantCompressed, FormatNVFP4)
	}
	return q, nil
}
