package checkpoint

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/tcc-dev/tcc/codegen/hostcfg"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/models"
	"github.com/tcc-dev/tcc/models/config"
	"github.com/tcc-dev/tcc/models/safetensors"
)

// This file writes synthetic checkpoints for tests and benchmarks.

// HFTensor is one float32 tensor in its HF name, shape and layout.
type HFTensor struct {
	Name  string
	Shape []int
	Data  []float32
}

// Form is the storage of a synthetic checkpoint.
type Form string

// Synthetic checkpoint forms.
const (
	FormBF16  Form = "bf16"
	FormFP8   Form = "fp8"
	FormNVFP4 Form = "nvfp4"
)

type hostInfoer interface {
	HostInfo(models.Args) (hostcfg.HostInfo, error)
}

// RandomHF draws every weight of m's one-device graph for args with the
// model's InitWeight (seeded) and returns them as the HF checkpoint holds
// them: the source tensor's name and HF layout ([out, in] for transposed
// projections, [C, 1, K] for conv1d), sorted by name.
func RandomHF(m models.Model, args models.Args, seed int64) ([]HFTensor, error) {
	hi, ok := m.(hostInfoer)
	if !ok {
		return nil, fmt.Errorf("checkpoint: model %s does not describe its checkpoint (no HostInfo)", m.Name())
	}
	info, err := hi.HostInfo(args)
	if err != nil {
		return nil, err
	}
	g, err := m.Build(args, ir.Mesh{Rows: 1, Cols: 1})
	if err != nil {
		return nil, err
	}
	env := models.InitAll(m, g, seed)
	var out []HFTensor
	for _, v := range g.Weights {
		src, err := info.WeightSource(v.Name, 1)
		if err != nil {
			return nil, err
		}
		s := v.Type.Shape
		t := HFTensor{Name: src.Tensor, Shape: append([]int{}, s...), Data: env[v]}
		if src.Transposed {
			if s.Rank() != 2 {
				return nil, fmt.Errorf("checkpoint: %q: cannot transpose shape %s", v.Name, s)
			}
			r, c := s[0], s[1]
			t.Data = make([]float32, len(env[v]))
			for i := 0; i < r; i++ {
				for j := 0; j < c; j++ {
					t.Data[j*r+i] = env[v][i*c+j]
				}
			}
			t.Shape = []int{c, r}
			if strings.HasSuffix(src.Tensor, "conv1d.weight") {
				t.Shape = []int{c, 1, r}
			}
		}
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// fp8Quantised: official FP8 releases keep in_proj_a/b, lm_head, norms,
// conv1d and embeddings in BF16.
func fp8Quantised(name string) bool {
	return strings.HasSuffix(name, "proj.weight") && !strings.Contains(name, "in_proj_a") && !strings.Contains(name, "in_proj_b") && name != "lm_head.weight"
}

// nvfp4Quantised: llm-compressor's recipes quantise attention and MLP
// projections only.
func nvfp4Quantised(name string) bool {
	return strings.HasSuffix(name, "proj.weight") && (strings.Contains(name, ".self_attn.") || strings.Contains(name, ".mlp."))
}

// WriteSynthetic writes ts as a checkpoint of the given form into dir,
// spread over shards files (tensor i of the sorted names, and each part
// of a quantised weight separately, round robin), with
// model.safetensors.index.json and config.json: configJSON plus the
// form's quantization_config. FP8 uses [128, 128] blocks with BF16
// weight_scale_inv; NVFP4 uses llm-compressor's scheme (QuantizeNVFP4)
// and ignores lm_head and the linear_attn projections.
func WriteSynthetic(dir string, configJSON []byte, form Form, ts []HFTensor, shards int) error {
	var cfg map[string]any
	if err := json.Unmarshal(configJSON, &cfg); err != nil {
		return fmt.Errorf("checkpoint: config: %v", err)
	}
	var ignore []string
	var out []safetensors.Tensor
	add := func(name string, dt safetensors.DType, shape []int, data []byte) {
		out = append(out, safetensors.Tensor{Name: name, DType: dt, Shape: shape, Data: data})
	}
	bf16 := func(v []float32) []byte { b, _ := safetensors.FromFloat32(safetensors.BF16, v); return b }
	f32 := func(v ...float32) []byte { b, _ := safetensors.FromFloat32(safetensors.F32, v); return b }
	for _, t := range ts {
		base := strings.TrimSuffix(t.Name, ".weight")
		switch {
		case form == FormFP8 && fp8Quantised(t.Name) && len(t.Shape) == 2:
			q, s := quantizeFP8(t.Data, t.Shape[0], t.Shape[1], 128)
			add(t.Name, safetensors.F8E4M3, t.Shape, q)
			add(base+".weight_scale_inv", safetensors.BF16, []int{(t.Shape[0] + 127) / 128, (t.Shape[1] + 127) / 128}, bf16(s))
		case form == FormNVFP4 && nvfp4Quantised(t.Name) && len(t.Shape) == 2 && t.Shape[1]%16 == 0:
			p, s, g := QuantizeNVFP4(t.Data, t.Shape[0], t.Shape[1])
			add(base+".weight_packed", safetensors.U8, []int{t.Shape[0], t.Shape[1] / 2}, p)
			add(base+".weight_scale", safetensors.F8E4M3, []int{t.Shape[0], t.Shape[1] / 16}, s)
			add(base+".weight_global_scale", safetensors.F32, []int{1}, f32(g))
			add(base+".input_global_scale", safetensors.F32, []int{1}, f32(1000))
		case strings.HasSuffix(t.Name, ".A_log") || strings.HasSuffix(t.Name, "linear_attn.norm.weight"):
			add(t.Name, safetensors.F32, t.Shape, f32(t.Data...)) // as Qwen3.5's bf16 release stores them
		default:
			if form == FormNVFP4 && strings.HasSuffix(t.Name, "proj.weight") {
				ignore = append(ignore, strings.TrimPrefix(base, "model.language_model."))
			}
			add(t.Name, safetensors.BF16, t.Shape, bf16(t.Data))
		}
	}
	switch form {
	case FormFP8:
		cfg["quantization_config"] = map[string]any{"quant_method": config.QuantFP8, "fmt": "e4m3", "activation_scheme": "dynamic",
			"weight_block_size": []int{128, 128}, "modules_to_not_convert": []string{"lm_head"}}
	case FormNVFP4:
		cfg["quantization_config"] = map[string]any{"quant_method": config.QuantCompressed, "format": config.FormatNVFP4, "ignore": ignore,
			"quantization_status": "compressed",
			"config_groups": map[string]any{"group_0": map[string]any{"format": config.FormatNVFP4, "targets": []string{"Linear"},
				"weights": map[string]any{"num_bits": 4, "type": "float", "group_size": 16, "strategy": "tensor_group"}}}}
	case FormBF16:
	default:
		return fmt.Errorf("checkpoint: unknown form %q", form)
	}
	if shards < 1 {
		shards = 1
	}
	parts := make([][]safetensors.Tensor, shards)
	for i, t := range out {
		parts[i%shards] = append(parts[i%shards], t)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := safetensors.WriteSharded(dir, parts); err != nil {
		return err
	}
	cj, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "config.json"), append(cj, '\n'), 0o644)
}

// quantizeFP8 quantises [rows, cols] with one scale per [b, b] block:
// s = amax/448 (rounded to bf16), q = e4m3(w / s).
func quantizeFP8(w []float32, rows, cols, b int) ([]byte, []float32) {
	sr, sc := (rows+b-1)/b, (cols+b-1)/b
	s := make([]float32, sr*sc)
	for r := 0; r < rows; r++ {
		for c := 0; c < cols; c++ {
			k := (r/b)*sc + c/b
			s[k] = max(s[k], float32(math.Abs(float64(w[r*cols+c]))))
		}
	}
	for i := range s {
		if s[i] == 0 {
			s[i] = 1
		}
		s[i] = bf16Round(s[i] / 448)
	}
	q := make([]byte, len(w))
	for r := 0; r < rows; r++ {
		for c := 0; c < cols; c++ {
			q[r*cols+c] = safetensors.Float32ToF8E4M3(w[r*cols+c] / s[(r/b)*sc+c/b])
		}
	}
	return q, s
}

func bf16Round(x float32) float32 {
	b, _ := safetensors.FromFloat32(safetensors.BF16, []float32{x})
	v, _ := safetensors.ToFloat32(safetensors.BF16, b)
	return v[0]
}
