package jit

import (
	"encoding/json"
	"testing"

	"github.com/tcc-dev/tcc/codegen"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/models"
	_ "github.com/tcc-dev/tcc/models/qwen27b"
	_ "github.com/tcc-dev/tcc/models/tinymlp"
	"github.com/tcc-dev/tcc/passes"
)

// TestFloat32CBsUnpackAsTf32 builds tiny-mlp and the small qwen27b config
// (decode, decode at batch 4, prefill) and checks every compute kernel
// with a Float32 CB against tt-metal's rule (unpackConditionalFormat):
// its Float32 CBs must unpack to source registers as Tf32, which is what
// the simulator models (sim/kexec: fp32 data is truncated to tf32). A
// kernel without fp32 accumulation, or one whose other CBs give exponent
// precision A (Int32 and Float32 only, or a Float16 CB), would unpack
// them as Float16_b or Float16 (a 5-bit exponent) on a card: the
// simulator's result would not be the device's.
func TestFloat32CBsUnpackAsTf32(t *testing.T) {
	const small = "../../../models/qwen27b/testdata/small.json"
	for _, tc := range []struct {
		name, model string
		args        map[string]string
	}{
		{"tiny-mlp", "tiny-mlp", nil},
		{"qwen27b decode", "qwen27b", map[string]string{"config": small}},
		{"qwen27b decode batch 4", "qwen27b", map[string]string{"config": small, "batch": "4"}},
		{"qwen27b prefill", "qwen27b", map[string]string{"config": small, "mode": "prefill", "seq": "8"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := models.Lookup(tc.model)
			if err != nil {
				t.Fatal(err)
			}
			args, err := models.DefaultArgs(m, tc.args)
			if err != nil {
				t.Fatal(err)
			}
			g, err := m.Build(args, ir.Mesh{Rows: 1, Cols: 1})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := passes.Run(g, passes.Options{}); err != nil {
				t.Fatal(err)
			}
			b, err := codegen.Compile(g, target.Blackhole())
			if err != nil {
				t.Fatal(err)
			}
			files, err := b.Files()
			if err != nil {
				t.Fatal(err)
			}
			var pf codegen.ProgramsFile
			if err := json.Unmarshal(files["programs.json"], &pf); err != nil {
				t.Fatal(err)
			}
			checked := 0
			for _, p := range pf.Programs {
				for _, k := range p.Kernels {
					if k.Compute == nil {
						continue
					}
					buf, err := kernelCBFormats(p.CBs, k.Cores)
					if err != nil {
						t.Fatalf("%s/%s: %v", p.Program, k.Name, err)
					}
					fp32 := 0
					for _, f := range buf {
						if f == fmtFloat32 {
							fp32++
						}
					}
					if fp32 == len(k.Compute.UnpackToDestFP32) {
						continue // none, or all unpacked straight to DEST
					}
					checked++
					cond, err := unpackConditionalFormat(buf, k.Compute.FP32DestAccEn)
					if err != nil || cond != fmtTf32 {
						t.Errorf("%s/%s (fp32_dest_acc_en %v): Float32 CBs unpack as format %d (%v), not Tf32 (4); CB formats %v",
							p.Program, k.Name, k.Compute.FP32DestAccEn, cond, err, buf)
					}
				}
			}
			if checked == 0 {
				t.Error("no compute kernel with a Float32 CB: the check checked nothing")
			}
			t.Logf("%d compute kernels with Float32 CBs", checked)
		})
	}
}
