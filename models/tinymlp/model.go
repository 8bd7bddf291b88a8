package tinymlp

import (
	"fmt"
	"math"
	"math/rand"
	"strings"

	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/models"
	"github.com/tcc-dev/tcc/models/nn"
)

func init() { models.Register(Model{}) }

// Model is the tiny-mlp model.
type Model struct{}

// Name is the registry name.
func (Model) Name() string { return "tiny-mlp" }

// Doc is a one-line description.
func (Model) Doc() string {
	return "embedding -> N x [rmsnorm -> SwiGLU MLP -> residual] -> rmsnorm -> lm_head -> argmax"
}

// Params are the size flags with small defaults.
func (Model) Params() []models.Param {
	return []models.Param{
		{Name: "layers", Default: "2", Doc: "number of decoder layers (at most 256)"},
		{Name: "hidden", Default: "128", Doc: "hidden size (multiple of 32, at most 16384)"},
		{Name: "intermediate", Default: "256", Doc: "MLP intermediate size (multiple of 32)"},
		{Name: "vocab", Default: "512", Doc: "vocabulary size (multiple of 32, at most 1048576)"},
		{Name: "batch", Default: "1", Doc: "tokens per decode step (1..32)"},
		{Name: "device-loop", Default: "false", Doc: "the host writes nothing between steps: the tokens are device state the argmax writes for the next step's embedding"},
	}
}

// Sizes are tiny-mlp's dimensions.
type Sizes struct {
	Layers, Hidden, Intermediate, Vocab, Batch int
	// DeviceLoop: the tokens are state LoopTokens [Batch, 1] uint32 that
	// the step's argmax replaces in place (no step input), and the
	// embedding table is in tile layout (gathered for many users).
	DeviceLoop bool
}

// LoopTokens is the device loop's tokens state.
const LoopTokens = "state.tokens"

const eps = 1e-6

// SizesFrom reads and validates the size parameters.
func SizesFrom(a models.Args) (Sizes, error) {
	var s Sizes
	for _, f := range []struct {
		name string
		dst  *int
	}{{"layers", &s.Layers}, {"hidden", &s.Hidden}, {"intermediate", &s.Intermediate}, {"vocab", &s.Vocab}, {"batch", &s.Batch}} {
		n, err := a.Int(f.name)
		if err != nil {
			return s, err
		}
		if lim := flagLimits[f.name]; n > lim {
			return s, fmt.Errorf("tiny-mlp: --%s %d is more than the limit of %d", f.name, n, lim)
		}
		*f.dst = n
	}
	switch a["device-loop"] {
	case "", "false":
	case "true":
		s.DeviceLoop = true
	default:
		return s, fmt.Errorf("tiny-mlp: --device-loop %q: want true or false", a["device-loop"])
	}
	switch {
	case s.Layers < 1:
		return s, fmt.Errorf("tiny-mlp: --layers %d must be at least 1", s.Layers)
	case s.Hidden < 32 || s.Hidden%32 != 0, s.Intermediate < 32 || s.Intermediate%32 != 0, s.Vocab < 32 || s.Vocab%32 != 0:
		return s, fmt.Errorf("tiny-mlp: --hidden %d, --intermediate %d and --vocab %d must be positive multiples of 32 (whole tiles)", s.Hidden, s.Intermediate, s.Vocab)
	case s.Batch < 1 || s.Batch > 32:
		return s, fmt.Errorf("tiny-mlp: --batch %d must be in 1..32 (one tile row of tokens)", s.Batch)
	}
	return s, nil
}

// Build returns the unfused decode graph.
func (m Model) Build(a models.Args, mesh ir.Mesh) (*ir.Graph, error) {
	s, err := SizesFrom(a)
	if err != nil {
		return nil, err
	}
	if mesh.Devices() != 1 {
		return nil, fmt.Errorf("tiny-mlp runs on one device; mesh %s has %d", mesh, mesh.Devices())
	}
	return BuildGraph(s), nil
}

// BuildGraph builds tiny-mlp for sizes s (which must be valid).
func BuildGraph(s Sizes) *ir.Graph {
	b := ir.NewBuilder("tiny-mlp")
	idsT := ir.TensorType{Shape: ir.Shape{s.Batch}, DType: ir.UInt32, Layout: ir.RowMajorLayout, Mem: ir.DRAM, Dist: ir.Replicated}
	// Row-major table: one page per token row, so the embedding program gathers whole pages.
	embT := ir.TensorType{Shape: ir.Shape{s.Vocab, s.Hidden}, DType: ir.BF16, Layout: ir.RowMajorLayout, Mem: ir.DRAM, Dist: ir.Replicated}
	var ids *ir.Value
	if s.DeviceLoop {
		// The argmax's [B, 1], one page per user; a tile-layout table
		// serves many users' pages.
		idsT.Shape = ir.Shape{s.Batch, 1}
		embT.Layout = ir.TileLayout
		ids = b.State(LoopTokens, idsT)
	} else {
		ids = b.Input("tokens", idsT)
	}
	emb := b.Weight("model.embed_tokens.weight", embT)
	type layerW struct{ norm, gate, up, down *ir.Value }
	lw := make([]layerW, s.Layers)
	for i := range lw {
		p := fmt.Sprintf("model.layers.%d.", i)
		lw[i] = layerW{
			norm: b.Weight(p+"post_attention_layernorm.weight", ir.T(ir.BF16, s.Hidden)),
			gate: b.Weight(p+"mlp.gate_proj.weight", ir.T(ir.BFP8B, s.Hidden, s.Intermediate)),
			up:   b.Weight(p+"mlp.up_proj.weight", ir.T(ir.BFP8B, s.Hidden, s.Intermediate)),
			down: b.Weight(p+"mlp.down_proj.weight", ir.T(ir.BFP8B, s.Intermediate, s.Hidden)),
		}
	}
	finalNorm := b.Weight("model.norm.weight", ir.T(ir.BF16, s.Hidden))
	lmHead := b.Weight("lm_head.weight", ir.T(ir.BFP8B, s.Hidden, s.Vocab))

	b.Region("embed", -1)
	h := b.Embedding(ids, emb)
	if s.DeviceLoop {
		h = b.Reshape(h, []int{s.Batch, s.Hidden}) // [B, 1, H] -> [B, H]
	}
	for i, w := range lw {
		b.Region("mlp", i)
		x := nn.RMSNormDecomposed(b, h, w.norm, eps, 1)
		gate := b.SiLU(b.Matmul(x, w.gate))
		up := b.Matmul(x, w.up)
		h = b.Add(h, b.Matmul(b.Mul(gate, up), w.down))
	}
	b.Region("head", -1)
	logits := b.Matmul(nn.RMSNormDecomposed(b, h, finalNorm, eps, 1), lmHead)
	next := b.Argmax(logits)
	if s.DeviceLoop {
		b.UpdateState(ids, next) // the next step's embedding reads it
	}
	b.Output(logits, next)
	g, err := b.Finish()
	if err != nil {
		// Sizes were validated; a failure here is a bug in this file.
		panic("tiny-mlp: " + err.Error())
	}
	return g
}

// InitWeight draws deterministic weights: N(0, 1/fan_in) for projections,
// N(0, 1) rows for the embedding, small zero-centred norm weights; the
// device loop's tokens state is zeros (the host writes it; drawing
// nothing keeps the other values as without the loop).
func (Model) InitWeight(v *ir.Value, rng *rand.Rand) []float32 {
	n := v.Type.Shape.Numel()
	out := make([]float32, n)
	if v.Kind == ir.KindState {
		return out // the device loop's tokens: zeros until the host writes them
	}
	scale := 1.0
	switch {
	case strings.Contains(v.Name, "norm"):
		scale = 0.1
	case strings.Contains(v.Name, "embed"):
		scale = 1
	case v.Type.Shape.Rank() == 2:
		scale = 1 / math.Sqrt(float64(v.Type.Shape[0]))
	}
	for i := range out {
		out[i] = float32(rng.NormFloat64() * scale)
	}
	return out
}

// flagLimits are the largest sizes tiny-mlp builds (documented in the
// flags' help): far above a test model, far below what overflows the size
// arithmetic or fills a card.
var flagLimits = map[string]int{"layers": 256, "hidden": 1 << 14, "intermediate": 1 << 16, "vocab": 1 << 20, "batch": 32}
