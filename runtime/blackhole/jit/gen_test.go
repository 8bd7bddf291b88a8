package jit

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tcc-dev/tcc/codegen/hostcfg"
	"github.com/tcc-dev/tcc/codegen/kir"
)

func loadProgram(t *testing.T, dir string) *hostcfg.ProgramConfig {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "program.json"))
	if err != nil {
		t.Fatal(err)
	}
	var p hostcfg.ProgramConfig
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatal(err)
	}
	return &p
}

// TestGenFilesMatchPrototype compares the generated JIT files with the
// files the Python prototype (rhc.py / build_kernel.py) wrote for the same
// tiny-mlp kernels (testdata/*: embedding_12's reader, rmsnorm_14's compute),
// corrected where the prototype differed from tt-metal: its Float32 CBs
// unpacked to Float16, tt-metal's rule (TestUnpackConditionalFormat) gives
// Tf32 (4) for this fp32-accumulating, otherwise exponent-B program.
func TestGenFilesMatchPrototype(t *testing.T) {
	for _, tc := range []struct {
		dir, kernel, src string
	}{
		{"testdata/dm", "reader", "/tmp/jit-tinymlp/kernels/reader_04b8dbb8364d.cpp"},
		{"testdata/compute", "compute", "/tmp/jit-tinymlp/kernels/compute_d8957a6164b5.cpp"},
	} {
		t.Run(tc.dir, func(t *testing.T) {
			p := loadProgram(t, tc.dir)
			var k *hostcfg.KernelConfig
			for i := range p.Kernels {
				if p.Kernels[i].Name == tc.kernel {
					k = &p.Kernels[i]
				}
			}
			text, _ := os.ReadFile(filepath.Join(tc.dir, "kernel.cpp"))
			files, err := genFiles(p, k, tc.src, string(text), false)
			if err != nil {
				t.Fatal(err)
			}
			ents, _ := os.ReadDir(tc.dir)
			n := 0
			for _, e := range ents {
				if e.Name() == "program.json" || e.Name() == "kernel.cpp" {
					continue
				}
				n++
				want, _ := os.ReadFile(filepath.Join(tc.dir, e.Name()))
				if got, ok := files[e.Name()]; !ok {
					t.Errorf("%s not generated", e.Name())
				} else if got != string(want) {
					t.Errorf("%s differs from the prototype's:\ngot:\n%s\nwant:\n%s", e.Name(), got, want)
				}
			}
			if n != len(files) {
				t.Errorf("generated %d files, prototype %d", len(files), n)
			}
		})
	}
}

func TestGenFilesSmall(t *testing.T) {
	core := []hostcfg.CoreRange{{X0: 0, Y0: 0, X1: 0, Y1: 0}}
	p := &hostcfg.ProgramConfig{Program: "p", CBs: []hostcfg.CBConfig{
		{Index: 0, DataFormat: "Float32", DataFormatCode: 0, Cores: core}, {Index: 16, DataFormat: "Float16_b", DataFormatCode: 5, Cores: core}}}
	src := "#include \"x.h\"\nvoid kernel_main() {\n  f();\n}\n"
	for _, tc := range []struct {
		name string
		cc   *hostcfg.ComputeConfig
		want map[string]string
	}{
		{"dm", nil, map[string]string{
			"kernel_includes.hpp":      "#include \"/k/r.cpp\"\n",
			"chlkc_math_fidelity.h":    "constexpr std::int32_t MATH_FIDELITY = 4;\n",
			"chlkc_dst_sync_mode.h":    "#define DST_SYNC_MODE DstSync::SyncHalf\n",
			"chlkc_dst_accum_mode.h":   "constexpr bool DST_ACCUM_MODE = false;\n",
			"chlkc_math_approx_mode.h": "constexpr bool APPROX = false;\n",
		}},
		{"compute", &hostcfg.ComputeConfig{MathFidelity: "LoFi", FP32DestAccEn: true, MathApproxMode: true, DstFullSyncEn: true}, map[string]string{
			"chlkc_math_fidelity.h":    "constexpr std::int32_t MATH_FIDELITY = 0;\n",
			"chlkc_dst_sync_mode.h":    "#define DST_SYNC_MODE DstSync::SyncFull\n",
			"chlkc_dst_accum_mode.h":   "constexpr bool DST_ACCUM_MODE = true;\n",
			"chlkc_math_approx_mode.h": "constexpr bool APPROX = true;\n",
			"defines_generated.h":      "#define A 1\n#define B x\n#define NOC_MODE 0\n",
			"chlkc_math.cpp": "#define TRISC_MATH\n#include \"defines_generated.h\"\n#line 1 \"/k/r.cpp\"\n#include \"x.h\"\nnamespace chlkc_math {\n" +
				"void math_main() {\n  f();\n}\n\n}  // namespace chlkc_math\n",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := &hostcfg.KernelConfig{Name: "k", Cores: core, Compute: tc.cc, Defines: map[string]string{"B": "x", "A": "1"}}
			files, err := genFiles(p, k, "/k/r.cpp", src, false)
			if err != nil {
				t.Fatal(err)
			}
			for n, w := range tc.want {
				if files[n] != w {
					t.Errorf("%s = %q, want %q", n, files[n], w)
				}
			}
			// CB 0 Float32, 16 Float16_b: the exponent precision skips
			// Float32, so it is B and Float32 unpacks to Float16_b (5), or
			// to Tf32 (4) with fp32 accumulation.
			u := files["chlkc_unpack_data_format.h"]
			wantDst := "unpack_dst_format[64] = {\n    5,"
			if tc.cc != nil && tc.cc.FP32DestAccEn {
				wantDst = "unpack_dst_format[64] = {\n    4,"
			}
			if !strings.Contains(u, "unpack_src_format[64] = {\n    0,255,") || !strings.Contains(u, wantDst) {
				t.Errorf("unpack formats:\n%s", u)
			}
			if !strings.Contains(files["chlkc_pack_tile_dims.h"], "pack_tile_size[64] = {\n    4096,1088,") {
				t.Errorf("tile sizes:\n%s", files["chlkc_pack_tile_dims.h"])
			}
		})
	}
}

func TestCompileArgs(t *testing.T) {
	k := &hostcfg.KernelConfig{CompileArgs: []hostcfg.NamedArg{
		{Index: 1, Name: "b", Value: hostcfg.ArgValue{ArgValue: kir.U32(7)}},
		{Index: 0, Name: "a", Value: hostcfg.ArgValue{ArgValue: kir.U32(3)}}}}
	v, err := compileArgs(k)
	if err != nil || len(v) != 2 || v[0] != 3 || v[1] != 7 {
		t.Errorf("compileArgs = %v, %v", v, err)
	}
	k.CompileArgs[0].Value = hostcfg.ArgValue{ArgValue: kir.BufferAddr("x", 0)}
	if _, err := compileArgs(k); err == nil || !strings.Contains(err.Error(), "compile arg 1 (b)") {
		t.Errorf("non-constant compile arg: %v", err)
	}
}

// A CB unpacked straight to DEST gets unpack destination format Float32 (0);
// the other fp32 CB keeps Tf32 (4), as tt-metal's get_unpack_dst_formats.
func TestUnpackToDestFormat(t *testing.T) {
	core := []hostcfg.CoreRange{{}}
	buf, err := kernelCBFormats([]hostcfg.CBConfig{{Index: 0, DataFormatCode: fmtFloat32, Cores: core}, {Index: 1, DataFormatCode: fmtFloat32, Cores: core}}, core)
	require.NoError(t, err)
	files, err := dataFormatFiles(buf, true, []int{0}, false)
	require.NoError(t, err)
	h := files["chlkc_unpack_data_format.h"]
	i := strings.Index(h, "unpack_dst_format")
	require.GreaterOrEqual(t, i, 0, "no unpack_dst_format in:\n%s", h)
	assert.True(t, strings.HasPrefix(strings.Fields(h[i:])[3], "0,4,255,"),
		"unpack_dst_format must start 0,4,255 (c_0 to DEST, c_1 tf32, c_2 unused):\n%s", h[i:])
}

// TestBFPUnpackFormatOnTTSim: a Bfp4_b CB (7) unpacks to Bfp8_b (6) as
// tt-metal's get_single_unpack_dst_format says, except in a build for
// ttsim, which refuses an unpacker whose input and output formats differ:
// there it unpacks to Bfp4_b. Bfp8_b (6) and Float16_b (5) are unchanged.
func TestBFPUnpackFormatOnTTSim(t *testing.T) {
	core := []hostcfg.CoreRange{{}}
	buf, err := kernelCBFormats([]hostcfg.CBConfig{{Index: 0, DataFormatCode: fmtBfp4B, Cores: core},
		{Index: 1, DataFormatCode: fmtBfp8B, Cores: core}, {Index: 2, DataFormatCode: fmtFloat16B, Cores: core}}, core)
	require.NoError(t, err)
	for _, tc := range []struct {
		ttsim bool
		want  string
	}{{false, "6,6,5,255,"}, {true, "7,6,5,255,"}} {
		t.Run(fmt.Sprintf("ttsim %v", tc.ttsim), func(t *testing.T) {
			files, err := dataFormatFiles(buf, true, nil, tc.ttsim)
			require.NoError(t, err)
			h := files["chlkc_unpack_data_format.h"]
			i := strings.Index(h, "unpack_dst_format")
			require.GreaterOrEqual(t, i, 0, "no unpack_dst_format in:\n%s", h)
			assert.True(t, strings.HasPrefix(strings.Fields(h[i:])[3], tc.want), "unpack_dst_format must start %s:\n%s", tc.want, h[i:])
		})
	}
}

// TestUnpackConditionalFormat checks the unpack destination of Float32 CBs
// against tt-metal's rule at TTMetalRelease: tt_metal/jit_build/genfiles.cpp
// lines 383-388 take Float16 for exponent precision A, Float16_b for B, Tf32
// with fp32 accumulation when every CB is Float32 or the precision is B;
// data_format.cpp lines 54-80 (check_consistent_format_across_buffers)
// skip Float32, RawUInt32/16/8, UInt32, UInt16, UInt8 and Int32 (line 57:
// "Float32 can pair with any exponent precision") but not Int8, and refuse
// A and B formats together; get_data_exp_precision (lines 93-96) is A when
// no format counts.
func TestUnpackConditionalFormat(t *testing.T) {
	const f32, f16, bfp8b, f16b, u32, i32, i8 = 0, 1, 6, 5, 24, 8, 14
	for _, tc := range []struct {
		name    string
		formats []int
		fp32Acc bool
		want    int // -1: refused (exponent widths), -2: refused (format)
	}{
		{"fp32 with bf16", []int{f32, f16b}, false, fmtFloat16B},
		{"fp32 with bf16, fp32 acc", []int{f32, f16b}, true, fmtTf32},
		{"fp32 with bfp8_b and uint32", []int{u32, f32, bfp8b}, false, fmtFloat16B},
		{"fp32 with fp16", []int{f32, f16}, true, fmtFloat16},
		{"fp32 only", []int{f32, f32}, false, fmtFloat16},
		{"fp32 only, fp32 acc", []int{f32}, true, fmtTf32},
		{"int32 and fp32, fp32 acc", []int{i32, f32}, true, fmtFloat16},
		{"fp16 with bf16", []int{f16, f16b}, false, -1},
		{"int8 counts, as exponent A", []int{f32, i8}, true, fmtFloat16},
		{"int8 with bf16", []int{i8, f16b}, false, -1},
		{"unused indices do not count", []int{fmtInvalid, f32, fmtInvalid}, true, fmtTf32},
		{"unsupported format", []int{f16b, 12}, false, -2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := unpackConditionalFormat(tc.formats, tc.fp32Acc)
			if tc.want == -2 {
				if err == nil || !strings.Contains(err.Error(), "not supported") {
					t.Errorf("got %d, %v; want the unsupported-format refusal", got, err)
				}
				return
			}
			if tc.want < 0 {
				if err == nil || !strings.Contains(err.Error(), "same exponent format") {
					t.Errorf("got %d, %v; want the exponent-format refusal", got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("got %d, %v; want %d", got, err, tc.want)
			}
		})
	}
}
