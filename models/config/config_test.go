package config

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const (
	g = GDN
	a = Attention
)

// textFields returns the text config of the small test model as a map, in
// the form of testdata/small.json (layer_types and interval both set).
func textFields() map[string]any {
	return map[string]any{
		"model_type":        "qwen3_5_text",
		"hidden_size":       256,
		"intermediate_size": 512,
		"vocab_size":        2048,
		"num_hidden_layers": 8,
		"layer_types": []string{
			"linear_attention", "linear_attention", "linear_attention", "full_attention",
			"linear_attention", "linear_attention", "linear_attention", "full_attention",
		},
		"full_attention_interval": 4,
		"num_attention_heads":     8,
		"num_key_value_heads":     4,
		"head_dim":                64,
		"attn_output_gate":        true,
		"linear_num_key_heads":    4,
		"linear_num_value_heads":  12,
		"linear_key_head_dim":     32,
		"linear_value_head_dim":   32,
		"linear_conv_kernel_dim":  4,
		"hidden_act":              "silu",
		"rms_norm_eps":            1e-6,
		"max_position_embeddings": 4096,
		"rope_parameters": map[string]any{
			"rope_type":             "default",
			"rope_theta":            1e7,
			"partial_rotary_factor": 0.25,
		},
		"mamba_ssm_dtype": "float32",
		"torch_dtype":     "bfloat16",
		"some_new_field":  []int{1, 2, 3}, // unknown: ignored
	}
}

// nested wraps a text config like the 27B file does.
func nested(text map[string]any) map[string]any {
	return map[string]any{
		"architectures":       []string{"Qwen3_5ForConditionalGeneration"},
		"model_type":          "qwen3_5",
		"tie_word_embeddings": false,
		"text_config":         text,
	}
}

// smallWant is the Config every form of the small model must parse to.
func smallWant() *Config {
	return &Config{
		ModelType:             "qwen3_5_text",
		HiddenSize:            256,
		IntermediateSize:      512,
		VocabSize:             2048,
		NumHiddenLayers:       8,
		MaxPositionEmbeddings: 4096,
		HiddenAct:             "silu",
		RMSNormEps:            1e-6,
		NumAttentionHeads:     8,
		NumKeyValueHeads:      4,
		HeadDim:               64,
		AttnOutputGate:        true,
		LinearNumKeyHeads:     4,
		LinearNumValueHeads:   12,
		LinearKeyHeadDim:      32,
		LinearValueHeadDim:    32,
		LinearConvKernelDim:   4,
		MambaSSMDType:         "float32",
		RopeType:              "default",
		RopeTheta:             1e7,
		PartialRotaryFactor:   0.25,
		FullAttentionInterval: 4,
		Layers:                []LayerKind{g, g, g, a, g, g, g, a},
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseForms(t *testing.T) {
	tests := []struct {
		name string
		doc  func() map[string]any
		want func(c *Config)
	}{
		{"nested", func() map[string]any { return nested(textFields()) }, nil},
		{"flat", textFields, nil},
		{"nested, top-level tie read", func() map[string]any {
			d := nested(textFields())
			d["tie_word_embeddings"] = true
			return d
		}, func(c *Config) { c.TieWordEmbeddings = true }},
		{"nested, text_config tie wins", func() map[string]any {
			tf := textFields()
			tf["tie_word_embeddings"] = false
			d := nested(tf)
			d["tie_word_embeddings"] = true
			return d
		}, nil},
		{"nested text config wins over top-level fields", func() map[string]any {
			d := nested(textFields())
			d["hidden_size"] = 999
			d["rope_theta"] = 5.0
			d["layer_types"] = "garbage"
			return d
		}, nil},
		{"layer_types only", func() map[string]any {
			tf := textFields()
			delete(tf, "full_attention_interval")
			return tf
		}, func(c *Config) { c.FullAttentionInterval = 0 }},
		{"interval only", func() map[string]any {
			tf := textFields()
			delete(tf, "layer_types")
			return tf
		}, nil},
		{"interval 2 only", func() map[string]any {
			tf := textFields()
			delete(tf, "layer_types")
			tf["full_attention_interval"] = 2
			return tf
		}, func(c *Config) {
			c.FullAttentionInterval = 2
			c.Layers = []LayerKind{g, a, g, a, g, a, g, a}
		}},
		{"interval 1: all attention", func() map[string]any {
			tf := textFields()
			tf["layer_types"] = nil
			tf["full_attention_interval"] = 1
			return tf
		}, func(c *Config) {
			c.FullAttentionInterval = 1
			c.Layers = []LayerKind{a, a, a, a, a, a, a, a}
		}},
		{"flat rope fields, rope_scaling null", func() map[string]any {
			tf := textFields()
			delete(tf, "rope_parameters")
			tf["rope_theta"] = 1e6
			tf["partial_rotary_factor"] = 0.5
			tf["rope_scaling"] = nil
			return tf
		}, func(c *Config) { c.RopeTheta = 1e6; c.PartialRotaryFactor = 0.5 }},
		{"flat rope_scaling type default", func() map[string]any {
			tf := textFields()
			delete(tf, "rope_parameters")
			tf["rope_theta"] = 1e7
			tf["rope_scaling"] = map[string]any{"type": "default"}
			return tf
		}, nil}, // partial_rotary_factor defaults to 0.25
		{"rope_parameters and equal flat fields", func() map[string]any {
			tf := textFields()
			tf["rope_theta"] = 1e7
			tf["partial_rotary_factor"] = 0.25
			return tf
		}, nil},
		{"rope_parameters without rope_type, mrope keys ignored", func() map[string]any {
			tf := textFields()
			tf["rope_parameters"] = map[string]any{
				"rope_theta": 1e7, "partial_rotary_factor": 0.5,
				"mrope_section": []int{11, 11, 10}, "mrope_interleaved": true,
			}
			return tf
		}, func(c *Config) { c.PartialRotaryFactor = 0.5 }},
		{"optional fields defaulted", func() map[string]any {
			tf := textFields()
			for _, k := range []string{"attn_output_gate", "hidden_act", "mamba_ssm_dtype", "model_type"} {
				delete(tf, k)
			}
			tf["rope_parameters"] = map[string]any{"rope_theta": 1e7}
			return tf
		}, func(c *Config) { c.ModelType = "" }},
		{"integral floats accepted", func() map[string]any {
			tf := textFields()
			tf["hidden_size"] = 256.0
			tf["vocab_size"] = json.RawMessage("2.048e3")
			return tf
		}, nil},
		{"non-default optional values", func() map[string]any {
			tf := textFields()
			tf["attn_output_gate"] = false
			tf["mamba_ssm_dtype"] = "bfloat16"
			return tf
		}, func(c *Config) { c.AttnOutputGate = false; c.MambaSSMDType = "bfloat16" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse(mustJSON(t, tt.doc()))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			want := smallWant()
			if tt.want != nil {
				tt.want(want)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Parse mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	type doc = map[string]any
	tests := []struct {
		name string
		data func() []byte // nil: use doc
		doc  func() doc
		want string // the whole error message
	}{
		{name: "missing field nested", doc: func() doc {
			tf := textFields()
			delete(tf, "hidden_size")
			return nested(tf)
		}, want: "text_config.hidden_size: required field is missing"},
		{name: "null field counts as missing", doc: func() doc {
			tf := textFields()
			tf["linear_key_head_dim"] = nil
			return nested(tf)
		}, want: "text_config.linear_key_head_dim: required field is missing"},
		{name: "missing field flat", doc: func() doc {
			tf := textFields()
			delete(tf, "rms_norm_eps")
			return tf
		}, want: "rms_norm_eps: required field is missing"},
		{name: "missing rope_theta", doc: func() doc {
			tf := textFields()
			tf["rope_parameters"] = doc{"rope_type": "default"}
			return nested(tf)
		}, want: "text_config.rope_parameters.rope_theta (or text_config.rope_theta): required field is missing"},
		{name: "missing rope_theta flat", doc: func() doc {
			tf := textFields()
			delete(tf, "rope_parameters")
			return tf
		}, want: "rope_theta: required field is missing"},
		{name: "layer_types and interval disagree", doc: func() doc {
			tf := textFields()
			tf["full_attention_interval"] = 3
			return nested(tf)
		}, want: `layer 2: text_config.layer_types says "linear_attention" but text_config.full_attention_interval 3 makes it "full_attention"`},
		{name: "layer_types disagree later", doc: func() doc {
			tf := textFields()
			lt := tf["layer_types"].([]string)
			lt[5] = "full_attention"
			return tf
		}, want: `layer 5: layer_types says "full_attention" but full_attention_interval 4 makes it "linear_attention"`},
		{name: "layer_types length", doc: func() doc {
			tf := textFields()
			tf["layer_types"] = tf["layer_types"].([]string)[:7]
			return tf
		}, want: "layer_types has 7 entries but num_hidden_layers is 8"},
		{name: "unknown layer type", doc: func() doc {
			tf := textFields()
			tf["layer_types"].([]string)[1] = "sliding_attention"
			return nested(tf)
		}, want: `text_config.layer_types[1]: unknown layer type "sliding_attention" (want "linear_attention" or "full_attention")`},
		{name: "no layer pattern", doc: func() doc {
			tf := textFields()
			delete(tf, "layer_types")
			delete(tf, "full_attention_interval")
			return nested(tf)
		}, want: "text_config: neither layer_types nor full_attention_interval is set; one is required for the layer pattern"},
		{name: "interval zero", doc: func() doc {
			tf := textFields()
			delete(tf, "layer_types")
			tf["full_attention_interval"] = 0
			return tf
		}, want: "full_attention_interval is 0, want >= 1"},
		{name: "unknown rope type in rope_parameters", doc: func() doc {
			tf := textFields()
			tf["rope_parameters"] = doc{"rope_type": "yarn", "rope_theta": 1e7, "factor": 4.0}
			return nested(tf)
		}, want: `text_config.rope_parameters.rope_type: unsupported rope type "yarn" (only "default" is supported)`},
		{name: "unknown rope type in rope_scaling", doc: func() doc {
			tf := textFields()
			delete(tf, "rope_parameters")
			tf["rope_theta"] = 1e6
			tf["rope_scaling"] = doc{"type": "linear", "factor": 2.0}
			return tf
		}, want: `rope_scaling.type: unsupported rope type "linear" (only "default" is supported)`},
		{name: "rope_theta disagrees", doc: func() doc {
			tf := textFields()
			tf["rope_theta"] = 1e6
			return tf
		}, want: "rope_parameters.rope_theta is 1e+07 but rope_theta is 1e+06; they must agree"},
		{name: "not an integer", doc: func() doc {
			tf := textFields()
			tf["head_dim"] = 64.5
			return nested(tf)
		}, want: "text_config.head_dim: want an integer that fits in 32 bits, got 64.5"},
		{name: "string for integer", doc: func() doc {
			tf := textFields()
			tf["head_dim"] = "64"
			return nested(tf)
		}, want: `text_config.head_dim: want an integer, got "64"`},
		{name: "bool wrong type", doc: func() doc {
			tf := textFields()
			tf["attn_output_gate"] = "yes"
			return tf
		}, want: `attn_output_gate: want true or false, got "yes"`},
		{name: "text_config not an object", doc: func() doc {
			return doc{"text_config": []int{1}}
		}, want: "text_config: want an object, got [1]"},
		{name: "invalid JSON", data: func() []byte { return []byte(`{"hidden_size": `) },
			want: "invalid config JSON: unexpected end of JSON input"},
		{name: "JSON null", data: func() []byte { return []byte(`null`) },
			want: "invalid config JSON: top level is null, want an object"},
		{name: "heads not divisible by kv heads", doc: func() doc {
			tf := textFields()
			tf["num_key_value_heads"] = 3
			return tf
		}, want: "num_attention_heads 8 is not divisible by num_key_value_heads 3"},
		{name: "value heads not divisible by key heads", doc: func() doc {
			tf := textFields()
			tf["linear_num_value_heads"] = 10
			return tf
		}, want: "linear_num_value_heads 10 is not divisible by linear_num_key_heads 4"},
		{name: "zero size", doc: func() doc {
			tf := textFields()
			tf["vocab_size"] = 0
			return tf
		}, want: "vocab_size is 0, want > 0"},
		{name: "rotary dim not integral", doc: func() doc {
			tf := textFields()
			tf["rope_parameters"] = doc{"rope_theta": 1e7, "partial_rotary_factor": 0.3}
			return tf
		}, want: "rotary dim head_dim 64 x partial_rotary_factor 0.3 = 19.2, want a positive even integer <= head_dim"},
		{name: "rotary dim odd", doc: func() doc {
			tf := textFields()
			tf["head_dim"] = 36
			tf["rope_parameters"] = doc{"rope_theta": 1e7, "partial_rotary_factor": 0.25}
			return tf
		}, want: "rotary dim head_dim 36 x partial_rotary_factor 0.25 = 9, want a positive even integer <= head_dim"},
		{name: "rotary factor above 1", doc: func() doc {
			tf := textFields()
			tf["rope_parameters"] = doc{"rope_theta": 1e7, "partial_rotary_factor": 2}
			return tf
		}, want: "partial_rotary_factor is 2, want 0 < factor <= 1"},
		{name: "hidden_act", doc: func() doc {
			tf := textFields()
			tf["hidden_act"] = "gelu"
			return tf
		}, want: `unsupported hidden_act "gelu" (only "silu" is supported)`},
		{name: "mamba_ssm_dtype", doc: func() doc {
			tf := textFields()
			tf["mamba_ssm_dtype"] = "int8"
			return tf
		}, want: `unsupported mamba_ssm_dtype "int8" (want one of ["float32" "bfloat16" "float16"])`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var data []byte
			if tt.data != nil {
				data = tt.data()
			} else {
				data = mustJSON(t, tt.doc())
			}
			c, err := Parse(data)
			if err == nil {
				t.Fatalf("Parse succeeded (%+v), want error %q", c, tt.want)
			}
			if err.Error() != tt.want {
				t.Errorf("Parse error\n got %q\nwant %q", err.Error(), tt.want)
			}
		})
	}
}

func TestValidateLayerCount(t *testing.T) {
	c := smallWant()
	if err := c.Validate(); err != nil {
		t.Fatalf("Validate(small) = %v", err)
	}
	c.NumHiddenLayers = 9
	want := "num_hidden_layers is 9 but the layer pattern has 8 layers"
	if err := c.Validate(); err == nil || err.Error() != want {
		t.Errorf("Validate = %v, want %q", err, want)
	}
	c = smallWant()
	c.RopeType = "yarn"
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), `unsupported rope type "yarn"`) {
		t.Errorf("Validate(yarn) = %v", err)
	}
}

func Test27B(t *testing.T) {
	c := Default27B()
	var wantAttn []int
	for i := 3; i < 64; i += 4 {
		wantAttn = append(wantAttn, i)
	}
	got := map[string]any{
		"layers":            len(c.Layers),
		"num_hidden_layers": c.NumHiddenLayers,
		"attention layers":  c.AttentionLayers(),
		"gdn layers":        len(c.GDNLayers()),
		"rotary dim":        c.RotaryDim(),
		"conv channels":     c.ConvChannels(),
		"linear key dim":    c.LinearKeyDim(),
		"linear value dim":  c.LinearValueDim(),
		"attention group":   c.AttentionGroupSize(),
		"linear group":      c.LinearGroupSize(),
		"q dim":             c.QDim(),
		"q_proj dim":        c.QProjDim(),
		"kv dim":            c.KVDim(),
		"conv state len":    c.ConvStateLen(),
		"hidden":            c.HiddenSize,
		"intermediate":      c.IntermediateSize,
		"vocab":             c.VocabSize,
		"theta":             c.RopeTheta,
		"eps":               c.RMSNormEps,
		"tie":               c.TieWordEmbeddings,
		"model type":        c.ModelType,
		"ssm dtype":         c.MambaSSMDType,
		"max positions":     c.MaxPositionEmbeddings,
	}
	want := map[string]any{
		"layers":            64,
		"num_hidden_layers": 64,
		"attention layers":  wantAttn,
		"gdn layers":        48,
		"rotary dim":        64,
		"conv channels":     10240, // 2048 + 2048 + 6144
		"linear key dim":    2048,
		"linear value dim":  6144,
		"attention group":   6,
		"linear group":      3,
		"q dim":             6144,
		"q_proj dim":        12288,
		"kv dim":            1024,
		"conv state len":    3,
		"hidden":            5120,
		"intermediate":      17408,
		"vocab":             248320,
		"theta":             1e7,
		"eps":               1e-6,
		"tie":               false,
		"model type":        "qwen3_5_text",
		"ssm dtype":         "float32",
		"max positions":     262144,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("27B mismatch (-want +got):\n%s", diff)
	}
	if len(wantAttn) != 16 {
		t.Fatalf("test bug: %d attention layers", len(wantAttn))
	}
}

func TestDefault27BMatchesSharedFileAndCopies(t *testing.T) {
	c1 := Default27B()
	c1.Layers[0] = Attention
	c1.HiddenSize = 1
	c2 := Default27B()
	if c2.Layers[0] != GDN || c2.HiddenSize != 5120 {
		t.Errorf("Default27B returned shared state: layer0 %v hidden %d", c2.Layers[0], c2.HiddenSize)
	}
	parsed, err := Parse(Default27BJSON())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(parsed, c2); diff != "" {
		t.Errorf("Default27B vs Parse(Default27BJSON) (-want +got):\n%s", diff)
	}
}

func TestLoad(t *testing.T) {
	c, err := Load(filepath.Join("..", "qwen27b", "testdata", "small.json"))
	if err != nil {
		t.Fatalf("Load(small.json): %v", err)
	}
	if diff := cmp.Diff(smallWant(), c); diff != "" {
		t.Errorf("small.json mismatch (-want +got):\n%s", diff)
	}

	dir := t.TempDir()
	bad := filepath.Join(dir, "config.json")
	if err := os.WriteFile(bad, []byte(`{"num_hidden_layers": 2}`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Load(bad)
	if want := "config " + bad + ": hidden_size: required field is missing"; err == nil || err.Error() != want {
		t.Errorf("Load(bad) = %v, want %q", err, want)
	}
	missing := filepath.Join(dir, "nope.json")
	if _, err := Load(missing); err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("Load(missing) = %v, want an error naming %s", err, missing)
	}
}

func TestLayerKind(t *testing.T) {
	tests := []struct {
		k          LayerKind
		str, hname string
	}{
		{GDN, "gdn", "linear_attention"},
		{Attention, "attention", "full_attention"},
		{LayerKind(7), "LayerKind(7)", "LayerKind(7)"},
	}
	for _, tt := range tests {
		t.Run(tt.str, func(t *testing.T) {
			if got := tt.k.String(); got != tt.str {
				t.Errorf("String() = %q, want %q", got, tt.str)
			}
			if got := tt.k.HFName(); got != tt.hname {
				t.Errorf("HFName() = %q, want %q", got, tt.hname)
			}
		})
	}
}

// TestFieldLimits: a size field over tcc's limit is an error naming it
// (a 2 KB config must not be able to ask for 65,536 layers or a 10^7 vocab).
func TestFieldLimits(t *testing.T) {
	for _, c := range []struct {
		field string
		value int
	}{{"num_hidden_layers", 65536}, {"vocab_size", 10000000}, {"hidden_size", 1000000}} {
		t.Run(c.field, func(t *testing.T) {
			f := textFields()
			f[c.field] = c.value
			js, err := json.Marshal(f)
			if err != nil {
				t.Fatal(err)
			}
			_, err = Parse(js)
			if err == nil || !strings.Contains(err.Error(), c.field) || !strings.Contains(err.Error(), "limit") {
				t.Errorf("%s = %d: err = %v", c.field, c.value, err)
			}
		})
	}
}
