package qwen27b

import (
	"fmt"

	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/models"
	"github.com/tcc-dev/tcc/models/config"
)

func init() { models.Register(Model{}) }

// Model is Qwen3.8-27B (or any config of the same family) as a tcc model.
type Model struct{}

// Name is the registry name.
func (Model) Name() string { return "qwen27b" }

// Doc is a one-line description.
func (Model) Doc() string {
	return "Qwen3.8-27B hybrid (Gated DeltaNet + gated attention), tensor parallel over 1xN meshes"
}

// Params are the command-line parameters.
func (Model) Params() []models.Param {
	return []models.Param{
		{Name: "config", Default: "", Doc: "HF config.json path (empty: the embedded Qwen3.8-27B config)"},
		{Name: "batch", Default: "1", Doc: "users per step, one new token each in decode (1..32)"},
		{Name: "max-seq", Default: "128", Doc: "KV cache length in tokens (a multiple of 32)"},
		{Name: "mode", Default: "decode", Doc: "decode (one token per user) or prefill (seq tokens per user)"},
		{Name: "seq", Default: "32", Doc: "prefill length in tokens (prefill mode only)"},
		{Name: "dtype-policy", Default: string(PolicyFast), Doc: "weight dtypes: fast (bfp4_b MLP gate/up, bfp8_b other matrices) or accurate (bfp8_b everywhere)"},
		{Name: "kv-dtype", Default: "bf16", Doc: "KV cache dtype: bf16 or bfp8_b (half the cache bytes; one exponent per 16 values of a row)"},
		{Name: "device-loop", Default: "false", Doc: "decode: the host writes nothing between steps (the tokens and positions are device state: the argmax feeds the next step's embedding, the position advances on the device, RoPE rows are gathered from a table uploaded once)"},
	}
}

// Mode selects the step a graph computes.
type Mode string

// Modes.
const (
	Decode  Mode = "decode"
	Prefill Mode = "prefill"
)

// Policy names a weight dtype policy.
type Policy string

// Weight dtype policies. Both keep embeddings and norms bf16 and every
// other matrix (lm_head included) bfp8_b.
const (
	PolicyFast     Policy = "fast"     // MLP gate/up bfp4_b, as the measured stacks use
	PolicyAccurate Policy = "accurate" // MLP gate/up bfp8_b too
)

// GateUpDType is the dtype of the MLP gate and up projections.
func (p Policy) GateUpDType() ir.DType {
	if p == PolicyAccurate {
		return ir.BFP8B
	}
	return ir.BFP4B
}

// MaxBatch is the largest batch: one tile row of users.
const MaxBatch = 32

// Options are validated build parameters.
type Options struct {
	Config *config.Config
	Batch  int
	MaxSeq int
	Mode   Mode
	Seq    int // prefill length
	Policy Policy
	// KVDType is the dtype of the KV caches: bf16 (also the zero value)
	// or bfp8_b.
	KVDType ir.DType
	// DeviceLoop builds the decode step that takes no host input (see
	// BuildGraph); prefill ignores it.
	DeviceLoop bool
}

// Loop reports whether o builds the device-loop decode step.
func (o Options) Loop() bool { return o.DeviceLoop && o.Mode == Decode }

// KV is the dtype of the KV caches (KVDType, bf16 when unset).
func (o Options) KV() ir.DType {
	if o.KVDType == ir.InvalidDType {
		return ir.BF16
	}
	return o.KVDType
}

// DefaultOptions is the embedded 27B config, batch 1, a 128-token cache,
// decode.
func DefaultOptions() Options {
	return Options{Config: config.Default27B(), Batch: 1, MaxSeq: 128, Mode: Decode, Seq: 32, Policy: PolicyFast, KVDType: ir.BF16}
}

// OptionsFrom reads and validates the parameters.
func OptionsFrom(a models.Args) (Options, error) {
	o := Options{Mode: Mode(a["mode"]), Policy: Policy(a["dtype-policy"]), KVDType: ir.BF16}
	if o.Policy == "" {
		o.Policy = PolicyFast
	}
	var err error
	if s := a["kv-dtype"]; s != "" {
		if o.KVDType, err = ir.ParseDType(s); err != nil {
			return o, fmt.Errorf("qwen27b: --kv-dtype %q: want bf16 or bfp8_b", s)
		}
	}
	switch a["device-loop"] {
	case "", "false":
	case "true":
		o.DeviceLoop = true
	default:
		return o, fmt.Errorf("qwen27b: --device-loop %q: want true or false", a["device-loop"])
	}
	if p := a["config"]; p != "" {
		o.Config, err = config.Load(p)
		if err != nil {
			return o, fmt.Errorf("qwen27b: %w", err)
		}
	} else {
		o.Config = config.Default27B()
	}
	for _, f := range []struct {
		name string
		dst  *int
	}{{"batch", &o.Batch}, {"max-seq", &o.MaxSeq}, {"seq", &o.Seq}} {
		if *f.dst, err = a.Int(f.name); err != nil {
			return o, fmt.Errorf("qwen27b: %w", err)
		}
	}
	return o, o.Check()
}

// Check validates the options against each other and the config.
func (o Options) Check() error {
	switch {
	case o.Config == nil:
		return fmt.Errorf("qwen27b: no config")
	case o.Policy != PolicyFast && o.Policy != PolicyAccurate:
		return fmt.Errorf("qwen27b: --dtype-policy %q: want %s or %s", o.Policy, PolicyFast, PolicyAccurate)
	case o.KV() != ir.BF16 && o.KV() != ir.BFP8B:
		return fmt.Errorf("qwen27b: --kv-dtype %s: want bf16 or bfp8_b", o.KVDType)
	case o.Mode != Decode && o.Mode != Prefill:
		return fmt.Errorf("qwen27b: --mode %q: want decode or prefill", o.Mode)
	case o.Batch < 1 || o.Batch > MaxBatch:
		return fmt.Errorf("qwen27b: --batch %d must be in 1..%d (one tile row of users)", o.Batch, MaxBatch)
	case o.MaxSeq < ir.TileSize || o.MaxSeq%ir.TileSize != 0:
		return fmt.Errorf("qwen27b: --max-seq %d must be a positive multiple of %d (whole cache tiles)", o.MaxSeq, ir.TileSize)
	case o.MaxSeq > o.Config.MaxPositionEmbeddings:
		return fmt.Errorf("qwen27b: --max-seq %d exceeds the model's max_position_embeddings %d", o.MaxSeq, o.Config.MaxPositionEmbeddings)
	case o.Mode == Prefill && (o.Seq < 1 || o.Seq > o.MaxSeq):
		return fmt.Errorf("qwen27b: --seq %d must be in 1..--max-seq %d", o.Seq, o.MaxSeq)
	}
	return nil
}

// Build returns the verified per-device unfused graph of one step.
func (Model) Build(a models.Args, mesh ir.Mesh) (*ir.Graph, error) {
	o, err := OptionsFrom(a)
	if err != nil {
		return nil, err
	}
	g, _, err := BuildGraph(o, mesh)
	return g, err
}
