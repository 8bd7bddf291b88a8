package jit

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tcc-dev/tcc/codegen/hostcfg"
)

// formatArrays reads the first n entries of every format array of the
// data format headers in files.
func formatArrays(t *testing.T, files map[string]string, n int) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, h := range []string{"chlkc_unpack_data_format.h", "chlkc_pack_data_format.h"} {
		for _, name := range []string{"unpack_src_format", "unpack_dst_format", "pack_src_format", "pack_dst_format"} {
			text := files[h]
			i := strings.Index(text, " "+name+"[")
			if i < 0 {
				continue
			}
			f := strings.Fields(text[i:])
			out[name] = strings.Split(f[3], ",")[:n]
		}
	}
	return out
}

// TestGenFilesExpPrecision builds the data format headers of a compute
// kernel on core (0,0) whose program mixes Float32 (c_0) and Float16_b
// (c_16) CBs with a Bfp4_b weight CB (c_1) and a Float16 CB (c_2) that
// lives only on core (1,0). As tt-metal: c_2 is not the kernel's
// (set_cb_data_fmt), so the exponent precision is B, Float32 unpacks and
// packs as Float16_b (Tf32 with fp32 accumulation, Float32 itself on the
// pack side), and a Bfp4_b CB packs from Bfp8_b.
func TestGenFilesExpPrecision(t *testing.T) {
	here := []hostcfg.CoreRange{{X0: 0, Y0: 0, X1: 0, Y1: 0}}
	there := []hostcfg.CoreRange{{X0: 1, Y0: 0, X1: 1, Y1: 0}}
	p := &hostcfg.ProgramConfig{Program: "p", CBs: []hostcfg.CBConfig{
		{Index: 0, DataFormatCode: fmtFloat32, Cores: here},
		{Index: 1, DataFormatCode: fmtBfp4B, Cores: here},
		{Index: 2, DataFormatCode: fmtFloat16, Cores: there},
		{Index: 3, DataFormatCode: fmtFloat16B, Cores: here},
	}}
	src := "void kernel_main() {\n}\n"
	for _, tc := range []struct {
		name    string
		fp32Acc bool
		want    map[string][]string
	}{
		{"bf16 dest", false, map[string][]string{
			"unpack_src_format": {"0", "7", "255", "5"},
			"unpack_dst_format": {"5", "6", "255", "5"},
			"pack_src_format":   {"5", "6", "255", "5"},
			"pack_dst_format":   {"0", "7", "255", "5"},
		}},
		{"fp32 dest", true, map[string][]string{
			"unpack_src_format": {"0", "7", "255", "5"},
			"unpack_dst_format": {"4", "6", "255", "5"},
			"pack_src_format":   {"0", "6", "255", "5"},
			"pack_dst_format":   {"0", "7", "255", "5"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := &hostcfg.KernelConfig{Name: "compute", Cores: here, Compute: &hostcfg.ComputeConfig{MathFidelity: "HiFi4", FP32DestAccEn: tc.fp32Acc}}
			files, err := genFiles(p, k, "/k/c.cpp", src, false)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, formatArrays(t, files, 4)); diff != "" {
				t.Errorf("format arrays (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPackSrcFormat checks get_single_pack_src_format's cases
// (data_format.cpp lines 185-309, bfp8_pack_precise and int_fpu_en false).
func TestPackSrcFormat(t *testing.T) {
	for _, tc := range []struct {
		name    string
		f, cond int
		fp32Acc bool
		want    int // -1: refused
	}{
		{"fp32, exponent B", fmtFloat32, fmtFloat16B, false, fmtFloat16B},
		{"fp32, exponent A", fmtFloat32, fmtFloat16, false, fmtFloat16},
		{"fp32, fp32 acc", fmtFloat32, fmtTf32, true, fmtFloat32},
		{"bf16", fmtFloat16B, fmtFloat16B, false, fmtFloat16B},
		{"fp16, fp32 acc", fmtFloat16, fmtFloat16, true, fmtFloat16B},
		{"bfp4_b", fmtBfp4B, fmtFloat16B, false, fmtBfp8B},
		{"bfp2, fp32 acc", fmtBfp2, fmtFloat16, true, fmtBfp8},
		{"int32", fmtInt32, fmtFloat16, false, fmtInt32},
		{"uint16, fp32 acc", fmtUInt16, fmtFloat16, true, fmtUInt16},
		{"raw uint32", fmtRawUInt32, fmtFloat16, true, fmtFloat32},
		{"raw uint8", fmtRawUInt8, fmtFloat16, false, fmtLf8},
		{"fp8 e4m3", fmtFp8E4M3, fmtFloat16, true, fmtFloat16},
		{"unused", fmtInvalid, fmtFloat16, true, fmtInvalid},
		{"lf8, fp32 acc", fmtLf8, fmtFloat16, true, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := packSrcFormat(tc.f, tc.cond, tc.fp32Acc)
			if tc.want < 0 {
				if err == nil || !strings.Contains(err.Error(), "No valid conversion") {
					t.Errorf("got %d, %v; want the refusal", got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("got %d, %v; want %d", got, err, tc.want)
			}
		})
	}
}

// TestKernelCBFormats checks which CBs are a kernel's: those on a core
// range intersecting one of the kernel's.
func TestKernelCBFormats(t *testing.T) {
	r := func(x0, y0, x1, y1 int) []hostcfg.CoreRange {
		return []hostcfg.CoreRange{{X0: x0, Y0: y0, X1: x1, Y1: y1}}
	}
	cbs := []hostcfg.CBConfig{
		{Index: 0, DataFormatCode: fmtFloat16B, Cores: r(0, 0, 3, 0)},
		{Index: 1, DataFormatCode: fmtFloat32, Cores: r(4, 0, 7, 0)},
		{Index: 2, DataFormatCode: fmtBfp8B, Cores: append(r(9, 9, 9, 9), r(3, 1, 5, 1)...)},
	}
	for _, tc := range []struct {
		name  string
		cores []hostcfg.CoreRange
		want  []int // formats of c_0..c_2
	}{
		{"first range", r(0, 0, 1, 0), []int{fmtFloat16B, fmtInvalid, fmtInvalid}},
		{"overlaps two", r(3, 0, 4, 0), []int{fmtFloat16B, fmtFloat32, fmtInvalid}},
		{"second range of a CB", r(5, 1, 5, 1), []int{fmtInvalid, fmtInvalid, fmtBfp8B}},
		{"none", r(10, 5, 10, 5), []int{fmtInvalid, fmtInvalid, fmtInvalid}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := kernelCBFormats(cbs, tc.cores)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got[:3]); diff != "" {
				t.Errorf("formats (-want +got):\n%s", diff)
			}
		})
	}
	for _, bad := range []hostcfg.CBConfig{{Index: 64, Cores: r(0, 0, 0, 0)}, {Index: 0, DataFormatCode: 256, Cores: r(0, 0, 0, 0)}} {
		if _, err := kernelCBFormats([]hostcfg.CBConfig{bad}, r(0, 0, 0, 0)); err == nil {
			t.Errorf("CB %+v: no error", bad)
		}
	}
}

// TestTileBytes checks tile sizes against Tile::get_tile_size for 32x32
// tiles (tile.cpp lines 70-95).
func TestTileBytes(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    int
		want int // -1: refused
	}{
		{"unused", fmtInvalid, 1088},
		{"bfp8_b", fmtBfp8B, 1088},
		{"bfp4_b", fmtBfp4B, 576},
		{"bfp2", fmtBfp2, 320},
		{"bf16", fmtFloat16B, 2048},
		{"uint16", fmtUInt16, 2048},
		{"fp32", fmtFloat32, 4096},
		{"raw uint32", fmtRawUInt32, 4096},
		{"uint8", fmtUInt8, 1024},
		{"int8", fmtInt8, 1024},
		{"tf32", fmtTf32, -1},
		{"fp8 e4m3", fmtFp8E4M3, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tileBytes(tc.f)
			if tc.want < 0 {
				if err == nil {
					t.Errorf("got %d, want an error", got)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("got %d, %v; want %d", got, err, tc.want)
			}
		})
	}
}
