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

var mathFidelity = map[string]int{"LoFi": 0, "HiFi2": 2, "HiFi3": 3, "HiFi4": 4}

func carray(typ, name string, v []int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s[%d] = {\n    ", typ, name, maxCBs)
	for _, x := range v {
		fmt.Fprintf(&b, "%d,", x)
	}
	b.WriteString("\n};\n")
	return b.String()
}

// dataFormatFiles are genfiles.cpp's data format descriptors and tile
// dims (generate_data_format_descriptors + data_format.cpp, as
// dataformat.go follows them) for a kernel whose CB format array is buf
// (kernelCBFormats). A CB in toDest (UnpackToDestFP32) unpacks fp32
// straight to DEST: its unpack destination format is Float32, which the
// LLK's is_32bit_input turns into an unpack to DEST.
//
// With ttsim set (a build for ttsim, Env.TTSim) a block-float CB unpacks
// to its own format instead of Bfp8 of its exponent width: ttsim
// (v1.10.0, tensix.cpp tensix_unpacr) stops on any unpacker whose input
// and output formats differ (fp32 input aside), so a Bfp4_b CB, which
// tt-metal unpacks to Bfp8_b, stops it ("in_data_format=7 mismatches
// out_data_format=6"). The values in the source registers are the same
// (a Bfp4_b mantissa widens exactly); card builds keep tt-metal's rule.
func dataFormatFiles(buf []int, fp32Acc bool, toDest []int, ttsim bool) (map[string]string, error) {
	dest := map[int]bool{}
	for _, c := range toDest {
		dest[c] = true
	}
	cond, err := unpackConditionalFormat(buf, fp32Acc)
	if err != nil {
		return nil, err
	}
	var usrc, udst, psrc, pdst []int
	for i, f := range buf {
		ps, err := packSrcFormat(f, cond, fp32Acc)
		if err != nil {
			return nil, fmt.Errorf("CB %d: %w", i, err)
		}
		// get_unpack_src_formats and get_pack_dst_formats both map the
		// raw formats; equalize_data_format_vectors (genfiles.cpp lines
		// 344-371) then has nothing to do: both are the L1 format.
		usrc = append(usrc, rawAsFloat(f))
		ud := unpackDstFormat(f, cond, dest[i])
		if ttsim && isBFP(f) {
			ud = f
		}
		udst = append(udst, ud)
		psrc = append(psrc, ps)
		pdst = append(pdst, rawAsFloat(f))
	}
	sizes := make([]int, maxCBs)
	for i, f := range buf {
		if sizes[i], err = tileBytes(f); err != nil {
			return nil, fmt.Errorf("CB %d: %w", i, err)
		}
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
		"chlkc_unpack_data_format.h": "#pragma once\n\n" + carray("constexpr std::int32_t", "unpack_src_format", usrc) +
			carray("constexpr std::int32_t", "unpack_dst_format", udst),
		"chlkc_pack_data_format.h": "#pragma once\n\n" + carray("constexpr unsigned char", "pack_src_format", psrc) +
			carray("constexpr unsigned char", "pack_dst_format", pdst),
		"chlkc_unpack_tile_dims.h": dims("unpack"),
		"chlkc_pack_tile_dims.h":   dims("pack"),
	}, nil
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
// compute. srcAbs is the absolute kernel source path, text its contents;
// ttsim selects the data formats of a build for ttsim (dataFormatFiles).
func genFiles(p *hostcfg.ProgramConfig, k *hostcfg.KernelConfig, srcAbs, text string, ttsim bool) (map[string]string, error) {
	cc := k.Compute
	if cc == nil {
		cc = &hostcfg.ComputeConfig{MathFidelity: "HiFi4"}
	}
	buf, err := kernelCBFormats(p.CBs, k.Cores)
	if p.Persistent != nil {
		buf, err = persistentCBFormats(p.Persistent, k.Cores)
	}
	if err != nil {
		return nil, err
	}
	files, err := dataFormatFiles(buf, cc.FP32DestAccEn, cc.UnpackToDestFP32, ttsim)
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
		if k.Ethernet != nil && ttsim {
			files["kernel_includes.hpp"] += ttsimEthLaunch
		}
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
