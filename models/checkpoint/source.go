package checkpoint

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/tcc-dev/tcc/models/config"
	"github.com/tcc-dev/tcc/models/safetensors"
)

// Source is an open checkpoint directory and its quantisation.
type Source struct {
	Dir   string
	Ckpt  *safetensors.Checkpoint
	Quant *config.Quantization // nil: unquantised
	// Config is dir/config.json when present.
	Config *config.Config
	// AllowNonFinite converts NaN and Inf source values as they are; by
	// default the first one fails the conversion, naming the tensor and
	// element.
	AllowNonFinite bool
	// ModelConfig is the model config the build was made with (an HF
	// config.json); ConvertCache stores it in the cache as config.json,
	// so tcc run --weights CACHE builds the same model. nil: none.
	ModelConfig []byte
}

// Open opens the checkpoint in dir, reading its headers and its
// config.json (when present) for quantization_config. A checkpoint that
// holds quantised tensors (weight_packed, weight_scale_inv) without a
// config declaring their method is an error, never read as bf16.
func Open(dir string) (*Source, error) {
	s := &Source{Dir: dir}
	cfgPath := filepath.Join(dir, "config.json")
	if _, err := os.Stat(cfgPath); err == nil {
		c, err := config.Load(cfgPath)
		if err != nil {
			return nil, fmt.Errorf("checkpoint %s: %w", dir, err)
		}
		s.Config, s.Quant = c, c.Quantization
	}
	ck, err := safetensors.OpenDir(dir)
	if err != nil {
		return nil, err
	}
	s.Ckpt = ck
	for _, n := range ck.Names() {
		method := ""
		switch {
		case strings.HasSuffix(n, ".weight_packed"):
			method = config.QuantCompressed
		case strings.HasSuffix(n, ".weight_scale_inv"):
			method = config.QuantFP8
		}
		if method != "" && (s.Quant == nil || s.Quant.Method != method) {
			ck.Close()
			return nil, fmt.Errorf("checkpoint %s: tensor %q is %s-quantised but %s declares no quantization_config with quant_method %q", dir, n, method, cfgPath, method)
		}
	}
	return s, nil
}

// Close closes the checkpoint files.
func (s *Source) Close() error { return s.Ckpt.Close() }

// resolve maps a tcc weight name (the nested HF spelling,
// "model.language_model.…") to the checkpoint's base name: the same, or
// the flat text-only spelling "model.…".
func (s *Source) resolve(name string) string {
	if s.Ckpt.Has(name) || s.Ckpt.Has(strings.TrimSuffix(name, ".weight")+".weight_packed") {
		return name
	}
	if rest, ok := strings.CutPrefix(name, "model.language_model."); ok {
		flat := "model." + rest
		if s.Ckpt.Has(flat) || s.Ckpt.Has(strings.TrimSuffix(flat, ".weight")+".weight_packed") {
			return flat
		}
	}
	return name
}

// Kind says how a weight is stored.
type Kind string

// Storage kinds.
const (
	Plain Kind = "plain" // BF16/F16/F32 (or any dtype read as is)
	FP8   Kind = "fp8"   // F8_E4M3 with weight_scale_inv
	NVFP4 Kind = "nvfp4" // weight_packed, weight_scale, weight_global_scale
)

// Weight describes how one logical HF weight is stored.
type Weight struct {
	Name  string // the checkpoint's name for it
	Kind  Kind
	Shape []int    // HF shape of the dequantised tensor
	Parts []string // checkpoint tensors read (their bytes are checksummed)
	DType safetensors.DType
}

// Lookup finds the logical weight name (tcc's name) and how it is stored.
// Errors name the checkpoint, the tensor and the field.
func (s *Source) Lookup(name string) (Weight, error) {
	n := s.resolve(name)
	base := strings.TrimSuffix(n, ".weight")
	module := strings.TrimPrefix(strings.TrimPrefix(base, "model.language_model."), "model.")
	ignored := s.Quant.Ignores(base) || s.Quant.Ignores(module)
	if s.Ckpt.Has(n) {
		t, file, _ := s.Ckpt.Info(n)
		w := Weight{Name: n, Kind: Plain, Shape: t.Shape, Parts: []string{n}, DType: t.DType}
		if t.DType != safetensors.F8E4M3 {
			return w, nil
		}
		if ignored {
			return w, fmt.Errorf("checkpoint %s: tensor %q in %s is F8_E4M3 but quantization_config.ignore lists %q", s.Dir, n, file, base)
		}
		if s.Quant == nil || s.Quant.Method != config.QuantFP8 {
			return w, fmt.Errorf("checkpoint %s: tensor %q in %s is F8_E4M3 but the config declares no fp8 quantization_config", s.Dir, n, file)
		}
		si := base + ".weight_scale_inv"
		st, sfile, err := s.Ckpt.Info(si)
		if err != nil {
			return w, fmt.Errorf("checkpoint %s: FP8 tensor %q: missing its scale %q", s.Dir, n, si)
		}
		if len(t.Shape) != 2 {
			return w, fmt.Errorf("checkpoint %s: FP8 tensor %q has shape %v, want [out, in]", s.Dir, n, t.Shape)
		}
		if st.DType != safetensors.F32 && st.DType != safetensors.BF16 {
			return w, fmt.Errorf("checkpoint %s: %q in %s: dtype %s, want F32 or BF16", s.Dir, si, sfile, st.DType)
		}
		if st.Numel() != 1 {
			b := s.Quant.BlockSize
			if b == nil {
				return w, fmt.Errorf("checkpoint %s: %q has %d scales but quantization_config has no weight_block_size", s.Dir, si, st.Numel())
			}
			want := []int{(t.Shape[0] + b[0] - 1) / b[0], (t.Shape[1] + b[1] - 1) / b[1]}
			if len(st.Shape) != 2 || st.Shape[0] != want[0] || st.Shape[1] != want[1] {
				return w, fmt.Errorf("checkpoint %s: %q in %s has shape %v, want %v for %v in %v blocks", s.Dir, si, sfile, st.Shape, want, t.Shape, b)
			}
		}
		w.Kind, w.Parts = FP8, []string{n, si}
		return w, nil
	}
	packed := base + ".weight_packed"
	if !s.Ckpt.Has(packed) {
		return Weight{}, fmt.Errorf("checkpoint %s: missing tensor %q (nor %q)", s.Dir, n, packed)
	}
	if ignored {
		return Weight{}, fmt.Errorf("checkpoint %s: %q is NVFP4-packed but quantization_config.ignore lists %q", s.Dir, packed, base)
	}
	pt, pfile, _ := s.Ckpt.Info(packed)
	if pt.DType != safetensors.U8 || len(pt.Shape) != 2 {
		return Weight{}, fmt.Errorf("checkpoint %s: %q in %s is %s %v, want U8 [out, in/2]", s.Dir, packed, pfile, pt.DType, pt.Shape)
	}
	rows, cols := pt.Shape[0], 2*pt.Shape[1]
	sc, gs := base+".weight_scale", base+".weight_global_scale"
	st, sfile, err := s.Ckpt.Info(sc)
	if err != nil {
		return Weight{}, fmt.Errorf("checkpoint %s: NVFP4 weight %q: missing tensor %q", s.Dir, packed, sc)
	}
	if st.DType != safetensors.F8E4M3 || len(st.Shape) != 2 || st.Shape[0] != rows || st.Shape[1]*16 != cols {
		return Weight{}, fmt.Errorf("checkpoint %s: %q in %s is %s %v, want F8_E4M3 [%d, %d] (one scale per 16 inputs)", s.Dir, sc, sfile, st.DType, st.Shape, rows, cols/16)
	}
	gt, gfile, err := s.Ckpt.Info(gs)
	if err != nil {
		return Weight{}, fmt.Errorf("checkpoint %s: NVFP4 weight %q: missing tensor %q", s.Dir, packed, gs)
	}
	if gt.DType != safetensors.F32 || gt.Numel() != 1 {
		return Weight{}, fmt.Errorf("checkpoint %s: %q in %s is %s %v, want one F32", s.Dir, gs, gfile, gt.DType, gt.Shape)
	}
	return Weight{Name: n, Kind: NVFP4, Shape: []int{rows, cols}, Parts: []string{packed, sc, gs}, DType: safetensors.U8}, nil
}

// matrix is a read-only HF tensor viewed as [rows, cols].
type matrix struct {
	rows, cols int
	f32        []float32 // dequantised, or nil
	raw        []byte    // plain data when f32 is nil
	dt         safetensors.DType
	release    func(i0, i1 int) // drop source rows [i0, i1) from memory; nil: keep
	// allowNonFinite: NaN and Inf are converted as they are instead of
	// failing the conversion.
	allowNonFinite bool
	rank1          bool // a 1-D source: errors name element [j], not [i, j]
}

func (m *matrix) at(i, j int) float32 {
	k := i*m.cols + j
	if m.f32 != nil {
		return m.f32[k]
	}
	switch m.dt {
	case safetensors.BF16:
		return math.Float32frombits(uint32(binary.LittleEndian.Uint16(m.raw[2*k:])) << 16)
	case safetensors.F32:
		return math.Float32frombits(binary.LittleEndian.Uint32(m.raw[4*k:]))
	case safetensors.F16:
		return safetensors.F16ToFloat32(binary.LittleEndian.Uint16(m.raw[2*k:]))
	case safetensors.I32:
		return float32(int32(binary.LittleEndian.Uint32(m.raw[4*k:])))
	case safetensors.U8:
		return float32(m.raw[k])
	}
	return safetensors.F8E4M3ToFloat32(m.raw[k])
}

// rowInto sets dst[k] to element (i, idx[k]) of the matrix (0 where
// idx[k] < 0): one dtype dispatch per row.
func (m *matrix) rowInto(i int, idx []int, dst []float32) {
	base := i * m.cols
	switch {
	case m.f32 != nil:
		row := m.f32[base : base+m.cols]
		for k, j := range idx {
			if j < 0 {
				dst[k] = 0
			} else {
				dst[k] = row[j]
			}
		}
	case m.dt == safetensors.BF16:
		row := m.raw[2*base : 2*(base+m.cols)]
		for k, j := range idx {
			if j < 0 {
				dst[k] = 0
			} else {
				dst[k] = math.Float32frombits(uint32(row[2*j])<<16 | uint32(row[2*j+1])<<24)
			}
		}
	default:
		for k, j := range idx {
			if j < 0 {
				dst[k] = 0
			} else {
				dst[k] = m.at(i, j)
			}
		}
	}
}

// view2D gives an HF shape's [rows, cols] view: [N] is [1, N], [C, 1, K]
// (conv1d) is [C, K].
func view2D(shape []int) (int, int, error) {
	switch {
	case len(shape) == 1:
		return 1, shape[0], nil
	case len(shape) == 2:
		return shape[0], shape[1], nil
	case len(shape) == 3 && shape[1] == 1:
		return shape[0], shape[2], nil
	}
	return 0, 0, fmt.Errorf("shape %v has no matrix view (want [N], [R, C] or [C, 1, K])", shape)
}

// open returns w's dequantised values as a matrix. Plain tensors stay in
// the (mapped) checkpoint bytes; quantised ones are dequantised whole.
func (s *Source) open(w Weight) (*matrix, error) {
	rows, cols, err := view2D(w.Shape)
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: tensor %q: %v", s.Dir, w.Name, err)
	}
	m := &matrix{rows: rows, cols: cols, dt: w.DType}
	parts := make([][]byte, len(w.Parts))
	for i, p := range w.Parts {
		if parts[i], err = s.Ckpt.Bytes(p); err != nil {
			return nil, err
		}
	}
	floats := func(i int) ([]float32, error) {
		t, _, _ := s.Ckpt.Info(w.Parts[i])
		return safetensors.ToFloat32(t.DType, parts[i])
	}
	switch w.Kind {
	case Plain:
		m.raw = parts[0]
	case FP8:
		q, err := floats(0)
		if err != nil {
			return nil, err
		}
		sc, err := floats(1)
		if err != nil {
			return nil, err
		}
		br, bc := 0, 0
		if b := s.Quant.BlockSize; b != nil {
			br, bc = b[0], b[1]
		}
		if m.f32, err = DequantFP8(q, sc, rows, cols, br, bc); err != nil {
			return nil, fmt.Errorf("checkpoint %s: tensor %q: %v", s.Dir, w.Name, err)
		}
	case NVFP4:
		sc, err := floats(1)
		if err != nil {
			return nil, err
		}
		g, err := floats(2)
		if err != nil {
			return nil, err
		}
		if m.f32, err = DequantNVFP4(parts[0], sc, g[0], rows, cols); err != nil {
			return nil, fmt.Errorf("checkpoint %s: tensor %q: %v", s.Dir, w.Parts[0], err)
		}
	}
	return m, nil
}

// Float32 returns the logical weight name dequantised to float32 in its
// HF layout and shape.
func (s *Source) Float32(name string) ([]float32, []int, error) {
	w, err := s.Lookup(name)
	if err != nil {
		return nil, nil, err
	}
	m, err := s.open(w)
	if err != nil {
		return nil, nil, err
	}
	if m.f32 != nil {
		return m.f32, w.Shape, nil
	}
	out := make([]float32, m.rows*m.cols)
	for i := range out {
		out[i] = m.at(i/m.cols, i%m.cols)
	}
	return out, w.Shape, nil
}
