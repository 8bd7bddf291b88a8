package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
)

// Defaults for optional fields (as in the Hugging Face Qwen3.5 text config).
const (
	defaultHiddenAct           = "silu"
	defaultMambaSSMDType       = "float32"
	defaultRopeType            = "default"
	defaultPartialRotaryFactor = 0.25
	defaultAttnOutputGate      = true
)

// maxLayers bounds num_hidden_layers (and layer_types), so a corrupt file
// cannot make tcc build without limit.
const maxLayers = 1024

// fieldLimits are the largest values tcc accepts for the size fields of a
// config (far above any released model, far below what overflows tcc's
// size arithmetic on a 64-bit host or what a card could hold): a value
// over its limit is an error naming the field.
var fieldLimits = map[string]int{
	"hidden_size": 1 << 16, "intermediate_size": 1 << 18, "vocab_size": 1 << 22,
	"num_hidden_layers": maxLayers, "num_attention_heads": 1024, "num_key_value_heads": 1024,
	"head_dim": 4096, "linear_num_key_heads": 1024, "linear_num_value_heads": 1024,
	"linear_key_head_dim": 4096, "linear_value_head_dim": 4096, "linear_conv_kernel_dim": 32,
	"max_position_embeddings": 1 << 22,
}

// Load reads and parses the config.json at path. Errors name the file.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	c, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	return c, nil
}

// Parse decodes a Hugging Face config.json (flat or nested under
// text_config; see the package doc). The returned Config has passed
// Validate. Errors name the JSON path of the offending field.
func Parse(data []byte) (*Config, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return nil, fmt.Errorf("invalid config JSON: %w", err)
	}
	if top == nil {
		return nil, errors.New("invalid config JSON: top level is null, want an object")
	}
	root := object{m: top}
	src := root
	if root.has("text_config") {
		tc, err := root.object("text_config")
		if err != nil {
			return nil, err
		}
		src = tc
	}

	c := &Config{}
	var err error
	ints := []struct {
		key string
		dst *int
	}{
		{"hidden_size", &c.HiddenSize},
		{"intermediate_size", &c.IntermediateSize},
		{"vocab_size", &c.VocabSize},
		{"num_hidden_layers", &c.NumHiddenLayers},
		{"num_attention_heads", &c.NumAttentionHeads},
		{"num_key_value_heads", &c.NumKeyValueHeads},
		{"head_dim", &c.HeadDim},
		{"linear_num_key_heads", &c.LinearNumKeyHeads},
		{"linear_num_value_heads", &c.LinearNumValueHeads},
		{"linear_key_head_dim", &c.LinearKeyHeadDim},
		{"linear_value_head_dim", &c.LinearValueHeadDim},
		{"linear_conv_kernel_dim", &c.LinearConvKernelDim},
		{"max_position_embeddings", &c.MaxPositionEmbeddings},
	}
	for _, f := range ints {
		if *f.dst, err = src.requiredInt(f.key); err != nil {
			return nil, err
		}
		if lim := fieldLimits[f.key]; *f.dst > lim {
			return nil, fmt.Errorf("%s is %d, more than tcc's limit of %d", src.path(f.key), *f.dst, lim)
		}
	}
	if c.RMSNormEps, err = src.requiredFloat("rms_norm_eps"); err != nil {
		return nil, err
	}
	if c.AttnOutputGate, err = src.optionalBool("attn_output_gate", defaultAttnOutputGate); err != nil {
		return nil, err
	}
	if c.HiddenAct, err = src.optionalString("hidden_act", defaultHiddenAct); err != nil {
		return nil, err
	}
	if c.MambaSSMDType, err = src.optionalString("mamba_ssm_dtype", defaultMambaSSMDType); err != nil {
		return nil, err
	}
	if c.ModelType, err = src.optionalString("model_type", ""); err != nil {
		return nil, err
	}
	tieSrc := src
	if !src.has("tie_word_embeddings") {
		tieSrc = root
	}
	if c.TieWordEmbeddings, err = tieSrc.optionalBool("tie_word_embeddings", false); err != nil {
		return nil, err
	}
	if err := parseLayers(src, c); err != nil {
		return nil, err
	}
	if err := parseRope(src, c); err != nil {
		return nil, err
	}
	if c.Quantization, err = parseQuantization(root, src); err != nil {
		return nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// parseLayers fills c.Layers and c.FullAttentionInterval from layer_types
// and/or full_attention_interval; c.NumHiddenLayers must be set.
func parseLayers(o object, c *Config) error {
	hasTypes, hasInterval := o.has("layer_types"), o.has("full_attention_interval")
	if !hasTypes && !hasInterval {
		return fmt.Errorf("%s: neither layer_types nor full_attention_interval is set; one is required for the layer pattern", o.where())
	}
	var fromTypes []LayerKind
	if hasTypes {
		var names []json.RawMessage
		if err := json.Unmarshal(o.m["layer_types"], &names); err != nil {
			return fmt.Errorf("%s: want an array of strings, got %s", o.path("layer_types"), brief(o.m["layer_types"]))
		}
		for i, raw := range names {
			var s string
			if err := json.Unmarshal(raw, &s); err != nil || isNull(raw) {
				return fmt.Errorf("%s[%d]: want a string, got %s", o.path("layer_types"), i, brief(raw))
			}
			switch s {
			case hfLinear:
				fromTypes = append(fromTypes, GDN)
			case hfFull:
				fromTypes = append(fromTypes, Attention)
			default:
				return fmt.Errorf("%s[%d]: unknown layer type %q (want %q or %q)", o.path("layer_types"), i, s, hfLinear, hfFull)
			}
		}
		if len(fromTypes) != c.NumHiddenLayers {
			return fmt.Errorf("%s has %d entries but %s is %d", o.path("layer_types"), len(fromTypes), o.path("num_hidden_layers"), c.NumHiddenLayers)
		}
		c.Layers = fromTypes
	}
	if !hasInterval {
		return nil
	}
	n, err := o.requiredInt("full_attention_interval")
	if err != nil {
		return err
	}
	if n < 1 {
		return fmt.Errorf("%s is %d, want >= 1", o.path("full_attention_interval"), n)
	}
	c.FullAttentionInterval = n
	if c.NumHiddenLayers > maxLayers {
		return fmt.Errorf("%s %d is more than the supported %d layers", o.path("num_hidden_layers"), c.NumHiddenLayers, maxLayers)
	}
	fromInterval := make([]LayerKind, 0, max(c.NumHiddenLayers, 0))
	for i := 0; i < c.NumHiddenLayers; i++ {
		k := GDN
		if (i+1)%n == 0 {
			k = Attention
		}
		fromInterval = append(fromInterval, k)
	}
	if !hasTypes {
		c.Layers = fromInterval
		return nil
	}
	for i := range fromTypes {
		if fromTypes[i] != fromInterval[i] {
			return fmt.Errorf("layer %d: %s says %q but %s %d makes it %q",
				i, o.path("layer_types"), fromTypes[i].HFName(), o.path("full_attention_interval"), n, fromInterval[i].HFName())
		}
	}
	return nil
}

// parseRope fills the RoPE fields of c from rope_parameters and the flat
// fields rope_theta, partial_rotary_factor and rope_scaling.
func parseRope(o object, c *Config) error {
	var params object
	hasParams := o.has("rope_parameters")
	if hasParams {
		var err error
		if params, err = o.object("rope_parameters"); err != nil {
			return err
		}
	}

	// Rope type: every place that names one must name "default".
	c.RopeType = defaultRopeType
	if hasParams && params.has("rope_type") {
		t, err := params.requiredString("rope_type")
		if err != nil {
			return err
		}
		if err := checkRopeType(params.path("rope_type"), t); err != nil {
			return err
		}
		c.RopeType = t
	}
	if o.has("rope_scaling") {
		scaling, err := o.object("rope_scaling")
		if err != nil {
			return err
		}
		for _, key := range []string{"rope_type", "type"} {
			if !scaling.has(key) {
				continue
			}
			t, err := scaling.requiredString(key)
			if err != nil {
				return err
			}
			if err := checkRopeType(scaling.path(key), t); err != nil {
				return err
			}
		}
	}

	theta, err := ropeFloat(o, params, hasParams, "rope_theta")
	if err != nil {
		return err
	}
	if theta == nil {
		where := o.path("rope_theta")
		if hasParams {
			where = params.path("rope_theta") + " (or " + where + ")"
		}
		return fmt.Errorf("%s: required field is missing", where)
	}
	c.RopeTheta = *theta

	factor, err := ropeFloat(o, params, hasParams, "partial_rotary_factor")
	if err != nil {
		return err
	}
	c.PartialRotaryFactor = defaultPartialRotaryFactor
	if factor != nil {
		c.PartialRotaryFactor = *factor
	}
	return nil
}

func checkRopeType(path, t string) error {
	if t != defaultRopeType {
		return fmt.Errorf("%s: unsupported rope type %q (only %q is supported)", path, t, defaultRopeType)
	}
	return nil
}

// ropeFloat reads key from rope_parameters and from the flat config; when
// both set it they must agree. It returns nil when neither does.
func ropeFloat(o, params object, hasParams bool, key string) (*float64, error) {
	var fromParams, flat *float64
	if hasParams && params.has(key) {
		v, err := params.requiredFloat(key)
		if err != nil {
			return nil, err
		}
		fromParams = &v
	}
	if o.has(key) {
		v, err := o.requiredFloat(key)
		if err != nil {
			return nil, err
		}
		flat = &v
	}
	if fromParams != nil && flat != nil && *fromParams != *flat {
		return nil, fmt.Errorf("%s is %v but %s is %v; they must agree",
			params.path(key), *fromParams, o.path(key), *flat)
	}
	if fromParams != nil {
		return fromParams, nil
	}
	return flat, nil
}

// object is one JSON object of the config with its dotted path ("" for the
// top level).
type object struct {
	prefix string
	m      map[string]json.RawMessage
}

func (o object) path(key string) string {
	if o.prefix == "" {
		return key
	}
	return o.prefix + "." + key
}

// where names the object itself in errors.
func (o object) where() string {
	if o.prefix == "" {
		return "config"
	}
	return o.prefix
}

// has reports whether key is present and not null.
func (o object) has(key string) bool {
	raw, ok := o.m[key]
	return ok && !isNull(raw)
}

func (o object) raw(key string) (json.RawMessage, error) {
	if !o.has(key) {
		return nil, fmt.Errorf("%s: required field is missing", o.path(key))
	}
	return o.m[key], nil
}

func (o object) object(key string) (object, error) {
	raw, err := o.raw(key)
	if err != nil {
		return object{}, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return object{}, fmt.Errorf("%s: want an object, got %s", o.path(key), brief(raw))
	}
	return object{prefix: o.path(key), m: m}, nil
}

func (o object) requiredInt(key string) (int, error) {
	raw, err := o.raw(key)
	if err != nil {
		return 0, err
	}
	if !isNumber(raw) {
		return 0, fmt.Errorf("%s: want an integer, got %s", o.path(key), brief(raw))
	}
	s := string(bytes.TrimSpace(raw))
	if v, err := strconv.ParseInt(s, 10, 64); err == nil && v >= math.MinInt32 && v <= math.MaxInt32 {
		return int(v), nil
	}
	// Integral values written as 5120.0 or 5.12e3 are accepted.
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f != math.Trunc(f) || f < math.MinInt32 || f > math.MaxInt32 {
		return 0, fmt.Errorf("%s: want an integer that fits in 32 bits, got %s", o.path(key), s)
	}
	return int(f), nil
}

func (o object) requiredFloat(key string) (float64, error) {
	raw, err := o.raw(key)
	if err != nil {
		return 0, err
	}
	if !isNumber(raw) {
		return 0, fmt.Errorf("%s: want a number, got %s", o.path(key), brief(raw))
	}
	f, err := strconv.ParseFloat(string(bytes.TrimSpace(raw)), 64)
	if err != nil {
		return 0, fmt.Errorf("%s: want a finite number, got %s", o.path(key), brief(raw))
	}
	return f, nil
}

func (o object) requiredString(key string) (string, error) {
	raw, err := o.raw(key)
	if err != nil {
		return "", err
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", fmt.Errorf("%s: want a string, got %s", o.path(key), brief(raw))
	}
	return s, nil
}

func (o object) optionalString(key, def string) (string, error) {
	if !o.has(key) {
		return def, nil
	}
	return o.requiredString(key)
}

func (o object) optionalBool(key string, def bool) (bool, error) {
	if !o.has(key) {
		return def, nil
	}
	var b bool
	if err := json.Unmarshal(o.m[key], &b); err != nil {
		return false, fmt.Errorf("%s: want true or false, got %s", o.path(key), brief(o.m[key]))
	}
	return b, nil
}

func isNull(raw json.RawMessage) bool {
	return string(bytes.TrimSpace(raw)) == "null"
}

// isNumber reports whether raw is a JSON number literal (not a string).
func isNumber(raw json.RawMessage) bool {
	s := bytes.TrimSpace(raw)
	return len(s) > 0 && (s[0] == '-' || (s[0] >= '0' && s[0] <= '9'))
}

// brief returns raw for an error message, cut to at most 40 bytes.
func brief(raw json.RawMessage) string {
	s := string(bytes.TrimSpace(raw))
	if len(s) > 40 {
		s = s[:37] + "..."
	}
	return s
}
