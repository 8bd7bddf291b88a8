package jit

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/tcc-dev/tcc/codegen/hostcfg"
	"github.com/tcc-dev/tcc/codegen/kir"
)

// maxCBs is NUM_CIRCULAR_BUFFERS on Blackhole
// (api/tt-metalium/circular_buffer_constants.h).
const maxCBs = 64

// Data format codes (tt-metal DataFormat).
const (
	fmtFloat32   = 0
	fmtFloat16   = 1
	fmtBfp8      = 2
	fmtTf32      = 4
	fmtFloat16B  = 5
	fmtBfp8B     = 6
	fmtInvalid   = 255
	defaultTileB = 1088
)

var mathFidelity = map[string]int{"LoFi": 0, "HiFi2": 2, "HiFi3": 3, "HiFi4": 4}

func isExpB(f int) bool { return f == 5 || f == 6 || f == 7 || f == 15 || f == 4 }
func isBFP(f int) bool  { return f == 2 || f == 3 || f == 11 || f == 6 || f == 7 || f == 15 }

func tileBytes(f int) int {
	switch f {
	case 0, 8, 24:
		return 4096
	case 1, 5, 9:
		return 2048
	case 6, 2, 14, 30, 255:
		return 1088
	case 7, 3:
		return 576
	}
	return 2048
}

func carray(typ, name string, v []int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s[%d] = {\n    ", typ, name, maxCBs)
	for _, x := range v {
		fmt.Fprintf(&b, "%d,", x)
	}
	b.WriteString("\n};\n")
	return b.String()
}

// skipsExpCheck lists the formats tt-metal's
// check_consistent_format_across_buffers skips (data_format.cpp: "Float32
// can pair with any exponent precision"): Float32, the integer formats and
// the raw ones.
var skipsExpCheck = map[int]bool{0: true, 8: true, 9: true, 24: true, 30: true, 240: true, 241: true, 242: true}

// unpackConditionalFormat is the unpack destination of Float32 CBs
// (genfiles.cpp generate_data_format_descriptors): Float16_b when the
// program's exponent precision is B, Float16 when A, Tf32 with fp32
// accumulation when every CB is Float32 or the precision is B. The
// precision is that of the CB formats other than Float32 and the integer
// formats (get_data_exp_precision; A when there is none), which must agree
// (tt-metal's TT_FATAL "All input data-formats must have the same
// exponent format").
func unpackConditionalFormat(used []int, fp32Acc bool) (int, error) {
	last, all32 := fmtInvalid, true
	for _, f := range used {
		if f != fmtFloat32 {
			all32 = false
		}
		if skipsExpCheck[f] {
			continue
		}
		if last != fmtInvalid && isExpB(f) != isExpB(last) {
			return 0, fmt.Errorf("CB data formats %d and %d have different exponent widths: tt-metal refuses the program (All input data-formats must have the same exponent format)", last, f)
		}
		last = f
	}
	expPrecB := last != fmtInvalid && isExpB(last)
	switch {
	case fp32Acc && (all32 || expPrecB):
		return fmtTf32, nil
	case expPrecB:
		return fmtFloat16B, nil
	}
	return fmtFloat16, nil
}

// dataFormatFiles are genfiles.cpp's data format descriptors and tile
// dims (generate_data_format_descriptors + data_format.cpp), as rhc.py.
// A CB in toDest (UnpackToDestFp32) unpacks fp32 straight to DEST: its
// unpack destination format is Float32, which the LLK's is_32bit_input
// turns into an unpack to DEST (data_format.cpp get_unpack_dst_formats).
func dataFormatFiles(cbs []hostcfg.CBConfig, fp32Acc bool, toDest []int) (map[string]string, error) {
	dest := map[int]bool{}
	for _, c := range toDest {
		dest[c] = true
	}
	buf := make([]int, maxCBs)
	for i := range buf {
		buf[i] = fmtInvalid
	}
	for _, c := range cbs {
		if c.Index < 0 || c.Index >= maxCBs {
			return nil, fmt.Errorf("CB index %d out of range 0..%d", c.Index, maxCBs-1)
		}
		buf[c.Index] = c.DataFormatCode
	}
	var used []int
	for _, f := range buf {
		if f != fmtInvalid {
			used = append(used, f)
		}
	}
	cond, err := unpackConditionalFormat(used, fp32Acc)
	if err != nil {
		return nil, err
	}
	var udst, psrc []int
	for i, f := range buf {
		switch {
		case f == fmtFloat32 && dest[i]:
			udst = append(udst, fmtFloat32)
		case f == fmtFloat32:
			udst = append(udst, cond)
		case isBFP(f):
			udst = append(udst, bfpOf(f))
		default:
			udst = append(udst, f)
		}
		switch {
		case f == fmtInvalid:
			psrc = append(psrc, fmtInvalid)
		case fp32Acc && isBFP(f):
			psrc = append(psrc, bfpOf(f))
		case fp32Acc && (isExpB(f) || f == fmtFloat32):
			psrc = append(psrc, f)
		case fp32Acc && f == fmtFloat16:
			psrc = append(psrc, fmtFloat16B)
		case fp32Acc:
			psrc = append(psrc, f)
		case f == fmtFloat32:
			psrc = append(psrc, cond)
		default:
			psrc = append(psrc, f)
		}
	}
	sizes := make([]int, maxCBs)
	for i, f := range buf {
		sizes[i] = tileBytes(f)
	}
	dims := func(p string) string {
		fill := func(v int) []int {
			s := make([]int, maxCBs)
			for i := range s {
				s[i] = v
			}
			return s
		}
		return "#pragma once\n\n" +
			carray("constexpr uint8_t", p+"_tile_num_faces", fill(4)) +
			carray("constexpr uint8_t", p+"_partial_face", fill(0)) +
			carray("constexpr uint8_t", p+"_tile_face_r_dim", fill(16)) +
			carray("constexpr uint8_t", p+"_narrow_tile", fill(0)) +
			carray("constexpr uint8_t", p+"_tile_r_dim", fill(32)) +
			carray("constexpr uint8_t", p+"_tile_c_dim", fill(32)) +
			carray("constexpr uint16_t", p+"_tile_size", sizes)
	}
	return map[string]string{
		"chlkc_unpack_data_format.h": "#pragma once\n\n" + carray("constexpr std::int32_t", "unpack_src_format", buf) +
			carray("constexpr std::int32_t", "unpack_dst_format", udst),
		"chlkc_pack_data_format.h": "#pragma once\n\n" + carray("constexpr unsigned char", "pack_src_format", psrc) +
			carray("constexpr unsigned char", "pack_dst_format", buf),
		"chlkc_unpack_tile_dims.h": dims("unpack"),
		"chlkc_pack_tile_dims.h":   dims("pack"),
	}, nil
}

func bfpOf(f int) int {
	if isExpB(f) {
		return fmtBfp8B
	}
	return fmtBfp8
}

var kernelMainRE = regexp.MustCompile(`\bvoid\s+kernel_main\s*\(\s*\)\s*\{`)

// toLegacy wraps a simplified compute kernel (void kernel_main()) in the
// per-TRISC namespace and renames kernel_main to fn.
func toLegacy(src, ns, fn string) string {
	loc := kernelMainRE.FindStringIndex(src)
	pre, part := src[:loc[0]], src[loc[0]:]
	part = strings.Replace(part, "kernel_main", fn, 1)
	return pre + "namespace " + ns + " {\n" + part + "\n}  // namespace " + ns + "\n"
}

func boolStr(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

// genFiles returns the JIT-generated files of kernel k of program p:
// chlkc_* descriptors for every kernel, kernel_includes.hpp for data
// movement, chlkc_{unpack,math,pack}.cpp and defines_generated.h for
// compute. srcAbs is the absolute kernel source path, text its contents.
func genFiles(p *hostcfg.ProgramConfig, k *hostcfg.KernelConfig, srcAbs, text string) (map[string]string, error) {
	cc := k.Compute
	if cc == nil {
		cc = &hostcfg.ComputeConfig{MathFidelity: "HiFi4"}
	}
	files, err := dataFormatFiles(p.CBs, cc.FP32DestAccEn, cc.UnpackToDestFP32)
	if err != nil {
		return nil, err
	}
	fid, ok := mathFidelity[cc.MathFidelity]
	if !ok {
		if cc.MathFidelity != "" {
			return nil, fmt.Errorf("unknown math fidelity %q", cc.MathFidelity)
		}
		fid = 4
	}
	files["chlkc_dst_accum_mode.h"] = "constexpr bool DST_ACCUM_MODE = " + boolStr(cc.FP32DestAccEn) + ";\n"
	if cc.DstFullSyncEn {
		files["chlkc_dst_sync_mode.h"] = "#define DST_SYNC_MODE DstSync::SyncFull\n"
	} else {
		files["chlkc_dst_sync_mode.h"] = "#define DST_SYNC_MODE DstSync::SyncHalf\n"
	}
	files["chlkc_math_fidelity.h"] = fmt.Sprintf("constexpr std::int32_t MATH_FIDELITY = %d;\n", fid)
	files["chlkc_math_approx_mode.h"] = "constexpr bool APPROX = " + boolStr(cc.MathApproxMode) + ";\n"
	if k.Compute == nil {
		files["kernel_includes.hpp"] = fmt.Sprintf("#include \"%s\"\n", srcAbs)
		return files, nil
	}
	var dg strings.Builder
	for _, n := range slices.Sorted(maps.Keys(k.Defines)) {
		fmt.Fprintf(&dg, "#define %s %s\n", n, k.Defines[n])
	}
	dg.WriteString("#define NOC_MODE 0\n")
	files["defines_generated.h"] = dg.String()
	simplified := kernelMainRE.MatchString(text) && !strings.Contains(text, "namespace NAMESPACE") && !strings.Contains(text, "void MAIN")
	for _, t := range []struct{ ns, fn, def string }{
		{"chlkc_unpack", "unpack_main", "TRISC_UNPACK"},
		{"chlkc_math", "math_main", "TRISC_MATH"},
		{"chlkc_pack", "pack_main", "TRISC_PACK"},
	} {
		body := fmt.Sprintf("#include \"%s\"\n", srcAbs)
		if simplified {
			body = fmt.Sprintf("#line 1 \"%s\"\n", srcAbs) + toLegacy(text, t.ns, t.fn)
		}
		files[t.ns+".cpp"] = "#define " + t.def + "\n#include \"defines_generated.h\"\n" + body
	}
	return files, nil
}

// compileArgs are the compile-time arg values in index order; they must be
// constants.
func compileArgs(k *hostcfg.KernelConfig) ([]uint32, error) {
	args := append([]hostcfg.NamedArg(nil), k.CompileArgs...)
	sort.SliceStable(args, func(i, j int) bool { return args[i].Index < args[j].Index })
	var v []uint32
	for _, a := range args {
		if a.Value.Kind != kir.ValConst {
			return nil, fmt.Errorf("compile arg %d (%s) is not a constant", a.Index, a.Name)
		}
		v = append(v, a.Value.Const)
	}
	return v, nil
}
