package config

import (
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func withQuant(t *testing.T, q string) []byte {
	t.Helper()
	data, err := os.ReadFile("../qwen27b/testdata/small.json")
	if err != nil {
		t.Fatal(err)
	}
	s := strings.Replace(string(data), `"tie_word_embeddings": false,`, `"tie_word_embeddings": false, "quantization_config": `+q+`,`, 1)
	return []byte(s)
}

func TestQuantization(t *testing.T) {
	for _, tt := range []struct {
		name, q string
		want    *Quantization
		err     string
	}{
		{name: "fp8 block", q: `{"quant_method":"fp8","fmt":"e4m3","activation_scheme":"dynamic","weight_block_size":[128,128],"modules_to_not_convert":["lm_head"]}`,
			want: &Quantization{Method: QuantFP8, Fmt: "e4m3", BlockSize: []int{128, 128}, Ignore: []string{"lm_head"}}},
		{name: "fp8 per tensor", q: `{"quant_method":"fp8","fmt":"e4m3"}`, want: &Quantization{Method: QuantFP8, Fmt: "e4m3", Ignore: []string{}}},
		{name: "nvfp4", q: `{"quant_method":"compressed-tensors","format":"nvfp4-pack-quantized","ignore":["lm_head"],"config_groups":{"group_0":{"format":"nvfp4-pack-quantized","weights":{"num_bits":4,"type":"float","group_size":16,"strategy":"tensor_group"}}}}`,
			want: &Quantization{Method: QuantCompressed, Format: FormatNVFP4, GroupSize: 16, Ignore: []string{"lm_head"}}},
		{name: "unknown method", q: `{"quant_method":"gptq"}`, err: `quant_method: "gptq" is not supported`},
		{name: "unknown format", q: `{"quant_method":"compressed-tensors","format":"int-quantized"}`, err: `format [int-quantized] is not supported`},
		{name: "int4 group", q: `{"quant_method":"compressed-tensors","format":"nvfp4-pack-quantized","config_groups":{"g":{"weights":{"num_bits":4,"type":"int","group_size":128}}}}`, err: "config_groups.g.weights"},
		{name: "fp8 e5m2", q: `{"quant_method":"fp8","fmt":"e5m2"}`, err: `fmt: "e5m2"`},
		{name: "bad block", q: `{"quant_method":"fp8","weight_block_size":[128]}`, err: "weight_block_size"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse(withQuant(t, tt.q))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) || !strings.Contains(err.Error(), "quantization_config") {
					t.Fatalf("got %v, want an error naming quantization_config containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, c.Quantization); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	data, _ := os.ReadFile("../qwen27b/testdata/small.json")
	if c, err := Parse(data); err != nil || c.Quantization != nil {
		t.Errorf("unquantised config: Quantization %+v, err %v; want nil, nil", c.Quantization, err)
	}
}
