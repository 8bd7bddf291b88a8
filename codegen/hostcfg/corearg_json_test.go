package hostcfg_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tcc-dev/tcc/codegen/hostcfg"
	"github.com/tcc-dev/tcc/codegen/kir"
)

// reflected is hostcfg.CoreArgs without its MarshalJSON: the encoding
// encoding/json gives its fields.
type reflected struct {
	Core   hostcfg.Core       `json:"core"`
	Values []hostcfg.ArgValue `json:"values"`
}

// TestCoreArgsJSONIsReflected: CoreArgs.MarshalJSON writes the bytes
// encoding/json writes for its fields, with and without HTML escaping and
// indentation (programs.json and ProgramConfig.JSON).
func TestCoreArgsJSONIsReflected(t *testing.T) {
	vals := func(vs ...kir.ArgValue) []hostcfg.ArgValue {
		out := make([]hostcfg.ArgValue, len(vs))
		for i, v := range vs {
			out[i] = hostcfg.ArgValue{ArgValue: v}
		}
		return out
	}
	tests := []struct {
		name string
		ca   hostcfg.CoreArgs
	}{
		{"constants", hostcfg.CoreArgs{Core: hostcfg.Core{X: 3, Y: 9}, Values: vals(kir.U32(0), kir.U32(7), kir.U32(4294967295))}},
		{"symbols", hostcfg.CoreArgs{Core: hostcfg.Core{X: 0, Y: 0}, Values: vals(kir.BufferAddr("t12", 0), kir.BufferAddr("w", 64),
			kir.NoCX(kir.Core{X: 1, Y: 2}), kir.NoCY(kir.Core{X: 1, Y: 2}), kir.DeviceID())}},
		{"ethernet", hostcfg.CoreArgs{Core: hostcfg.Core(kir.EthCore(3)), Values: vals(kir.NoCX(kir.EthCore(5)), kir.U32(1))}},
		{"escaped buffer name", hostcfg.CoreArgs{Core: hostcfg.Core{X: 1, Y: 1}, Values: vals(kir.BufferAddr(`a<b>&"c\`, 32))}},
		{"no values", hostcfg.CoreArgs{Core: hostcfg.Core{X: 1, Y: 0}, Values: []hostcfg.ArgValue{}}},
		{"nil values", hostcfg.CoreArgs{Core: hostcfg.Core{X: 1, Y: 0}}},
	}
	encode := func(v any, escapeHTML bool) string {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(escapeHTML)
		enc.SetIndent("", "  ")
		if err := enc.Encode(v); err != nil {
			t.Fatal(err)
		}
		return buf.String()
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ref := reflected{Core: tt.ca.Core, Values: tt.ca.Values}
			want, err := json.Marshal([]reflected{ref})
			if err != nil {
				t.Fatal(err)
			}
			got, err := json.Marshal([]hostcfg.CoreArgs{tt.ca})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(string(want), string(got)); diff != "" {
				t.Errorf("json.Marshal (-want +got):\n%s", diff)
			}
			for _, esc := range []bool{true, false} {
				if diff := cmp.Diff(encode(ref, esc), encode(tt.ca, esc)); diff != "" {
					t.Errorf("Encoder, escape HTML %t (-want +got):\n%s", esc, diff)
				}
			}
		})
	}
}
