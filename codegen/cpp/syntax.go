package cpp

import (
	"bytes"
	_ "embed"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/ir/sfpu"
)

// apiHeader declares, without definitions, exactly the tt-metal API subset
// tcc prints, written from the real signatures (see doc.go): the
// declarations of everything but the instructions, whose declarations come
// from the instruction table (insnDecls, spliced in by fullHeader).
//
//go:embed testdata/tt_api.h
var apiHeader []byte

// sfpuMarker is the line of tt_api.h the SFPU declarations replace.
const sfpuMarker = "// tcc-sfpu-decls: the SFPU ops' declarations from codegen/kir.SFPUTable go here\n"

// fullHeader is apiHeader with the instruction table's declarations
// (insnDecls) in place of its "// tcc-insn-decls SECTION" lines.
func fullHeader() []byte {
	var out bytes.Buffer
	for _, line := range strings.SplitAfter(string(apiHeader), "\n") {
		if sec, ok := strings.CutPrefix(strings.TrimSpace(line), strings.TrimSpace(declMarker)+" "); ok {
			out.WriteString(insnDecls[sec])
			continue
		}
		out.WriteString(line)
	}
	return out.Bytes()
}

// ErrNoCompiler is returned by SyntaxCheck when g++ is not installed.
var ErrNoCompiler = errors.New("g++ is not installed; the kernel syntax check needs it")

// BuildDefine is the define the tt-metal JIT build sets for a processor.
func BuildDefine(p kir.Processor) string {
	switch p {
	case kir.RISCV0:
		return "COMPILE_FOR_BRISC"
	case kir.RISCV1:
		return "COMPILE_FOR_NCRISC"
	}
	return "TRISC_MATH"
}

// splitHeader separates the declarations of apiHeader that belong to one
// header (between "// tcc-header-begin PATH" and "// tcc-header-end"
// lines) from the rest, which every kernel sees.
func splitHeader(h []byte) (common []byte, perHeader map[string]string) {
	perHeader = map[string]string{}
	var out strings.Builder
	cur := ""
	for _, line := range strings.SplitAfter(string(h), "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(trimmed, "// tcc-header-begin "):
			cur = strings.TrimSpace(strings.TrimPrefix(trimmed, "// tcc-header-begin "))
		case trimmed == "// tcc-header-end":
			cur = ""
		case cur != "":
			perHeader[cur] += line
		default:
			out.WriteString(line)
		}
	}
	return []byte(out.String()), perHeader
}

// jitBankDefine is the bank-count define tt-metal's JIT build passes to
// every kernel (NUM_DRAM_BANKS, the p150a's 8 here).
const jitBankDefine = "-DNUM_DRAM_BANKS=8"

// Source is one kernel file for SyntaxCheck: the processor it is built for
// and the defines its host config passes (-D), as the tt-metal JIT build does.
type Source struct {
	Processor kir.Processor
	Defines   map[string]string
	// Thread, when set, is the build define in place of
	// BuildDefine(Processor): a compute source's TRISC_UNPACK or
	// TRISC_PACK (the JIT build compiles it for all three threads).
	Thread string
}

// defineFlags is the sorted -D flags of defs.
func defineFlags(defs map[string]string) []string {
	names := make([]string, 0, len(defs))
	for n := range defs {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]string, 0, len(names))
	for _, n := range names {
		out = append(out, "-D"+n+"="+defs[n])
	}
	return out
}

// SyntaxCheck runs `g++ -std=c++17 -fsyntax-only` on the kernel source
// files (path -> processor and defines) against the declaration header,
// one g++ run per build define and define set, using dir for scratch
// files. It returns g++'s output per group (keyed by the flags) and whether
// each group passed.
func SyntaxCheck(dir string, sources map[string]Source) (outputs map[string]string, ok map[string]bool, err error) {
	gxx, err := exec.LookPath("g++")
	if err != nil {
		return nil, nil, ErrNoCompiler
	}
	common, perHeader := splitHeader(fullHeader())
	common = bytes.Replace(common, []byte(sfpuMarker), []byte(kir.SFPUDecls()), 1)
	header := filepath.Join(dir, "tt_api.h")
	if err := os.WriteFile(header, common, 0o644); err != nil {
		return nil, nil, err
	}
	inc := filepath.Join(dir, "inc")
	hs := map[string]bool{dataflowHeader: true, computeArgsHeader: true, ethHeader: true, cbInitHeader: true, riscCommonHeader: true, ethTXQSetupHeader: true}
	for _, h := range computeHeaders {
		hs[h] = true
	}
	for _, h := range sfpuLLKHeaders {
		hs[h] = true
	}
	hs[PersistHeaderName] = true
	for h := range hs {
		f := filepath.Join(inc, filepath.FromSlash(h))
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			return nil, nil, err
		}
		text := "#pragma once\n// stub: declarations come from tt_api.h\n" + perHeader[h]
		if h == sfpu.HeaderName {
			// tcc's SFPU header itself, on stubs of the tt-llk names it uses.
			text = sfpuStub + sfpu.Header()
		}
		if h == PersistHeaderName {
			// tcc's persistent phase machinery itself.
			text = PersistHeader()
		}
		if err := os.WriteFile(f, []byte(text), 0o644); err != nil {
			return nil, nil, err
		}
	}
	groups := map[string][]string{}
	flags := map[string][]string{}
	for f, src := range sources {
		def := BuildDefine(src.Processor)
		if src.Thread != "" {
			def = src.Thread
		}
		fl := append([]string{"-D" + def, jitBankDefine}, defineFlags(src.Defines)...)
		key := strings.Join(fl, " ")
		groups[key] = append(groups[key], f)
		flags[key] = fl
	}
	outputs, ok = map[string]string{}, map[string]bool{}
	keys := make([]string, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		files := groups[k]
		sort.Strings(files)
		args := append([]string{"-std=c++17", "-fsyntax-only", "-Wparentheses", "-Wsign-compare", "-I", inc, "-include", header}, flags[k]...)
		out, err := exec.Command(gxx, append(args, files...)...).CombinedOutput()
		outputs[k] = string(out)
		ok[k] = err == nil
	}
	return outputs, ok, nil
}

// sfpuLLKHeaders are the tt-llk headers tcc_sfpu.h includes for the math
// TRISC; their stubs are empty (sfpuStub declares what it uses).
var sfpuLLKHeaders = []string{"llk_math_eltwise_unary_sfpu_params.h", "llk_math_eltwise_binary_sfpu_params.h"}

// sfpuStub declares, for the syntax check of tcc_sfpu.h (sfpu.Header),
// the tt-llk names it uses: ckernel_ops.h's instruction macros (checked
// for their argument counts), ADDR_MOD_7, MATH, SfpuType::unused and the
// SFPU params and init templates of llk_lib/llk_math_eltwise_*_sfpu*.h.
const sfpuStub = `#pragma once
// stub: the tt-llk names tcc_sfpu.h uses
#include <cstdint>
namespace ckernel {
template <class... T> inline void tcc_insn(T...) {}
constexpr std::uint32_t ADDR_MOD_7 = 7;
enum class SfpuType { unused };
template <bool APPROXIMATE, typename Callable, typename... Args>
void _llk_math_eltwise_unary_sfpu_params_(Callable&& sfpu_func, std::uint32_t dst_index, int vector_mode = 4, Args&&... args);
template <bool APPROXIMATE, typename Callable, typename... Args>
void _llk_math_eltwise_binary_sfpu_params_(Callable&& sfpu_func, std::uint32_t dst_index_in0, std::uint32_t dst_index_in1, std::uint32_t dst_index_out, int vector_mode = 4, Args&&... args);
template <SfpuType sfpu_op> void _llk_math_eltwise_unary_sfpu_init_();
template <SfpuType sfpu_op> void _llk_math_eltwise_binary_sfpu_init_();
}  // namespace ckernel
#ifndef MATH
#define MATH(x) x
#endif
#define TCC_I4(a, b, c, d) ckernel::tcc_insn(a, b, c, d)
#define TTI_SFPLOAD(l, m, a, d) TCC_I4(l, m, a, d)
#define TT_SFPLOAD(l, m, a, d) TCC_I4(l, m, a, d)
#define TTI_SFPSTORE(l, m, a, d) TCC_I4(l, m, a, d)
#define TT_SFPSTORE(l, m, a, d) TCC_I4(l, m, a, d)
#define TTI_SFPLOADI(l, m, i) ckernel::tcc_insn(l, m, i)
#define TT_SFPLOADI(l, m, i) ckernel::tcc_insn(l, m, i)
#define TTI_SFPMAD(a, b, c, d, m) ckernel::tcc_insn(a, b, c, d, m)
#define TTI_SFPADD(a, b, c, d, m) ckernel::tcc_insn(a, b, c, d, m)
#define TTI_SFPMUL(a, b, c, d, m) ckernel::tcc_insn(a, b, c, d, m)
#define TTI_SFPMULI(i, d, m) ckernel::tcc_insn(i, d, m)
#define TTI_SFPADDI(i, d, m) ckernel::tcc_insn(i, d, m)
#define TTI_SFPCAST(c, d, m) ckernel::tcc_insn(c, d, m)
#define TTI_SFPDIVP2(i, c, d, m) TCC_I4(i, c, d, m)
#define TTI_SFPEXEXP(i, c, d, m) TCC_I4(i, c, d, m)
#define TTI_SFPEXMAN(i, c, d, m) TCC_I4(i, c, d, m)
#define TTI_SFPIADD(i, c, d, m) TCC_I4(i, c, d, m)
#define TTI_SFPSHFT(i, c, d, m) TCC_I4(i, c, d, m)
#define TTI_SFPSETCC(i, c, d, m) TCC_I4(i, c, d, m)
#define TTI_SFPMOV(i, c, d, m) TCC_I4(i, c, d, m)
#define TTI_SFPABS(i, c, d, m) TCC_I4(i, c, d, m)
#define TTI_SFPAND(i, c, d, m) TCC_I4(i, c, d, m)
#define TTI_SFPOR(i, c, d, m) TCC_I4(i, c, d, m)
#define TTI_SFPXOR(i, c, d, m) TCC_I4(i, c, d, m)
#define TTI_SFPNOT(i, c, d, m) TCC_I4(i, c, d, m)
#define TTI_SFPLZ(i, c, d, m) TCC_I4(i, c, d, m)
#define TTI_SFPSETEXP(i, c, d, m) TCC_I4(i, c, d, m)
#define TTI_SFPSETMAN(i, c, d, m) TCC_I4(i, c, d, m)
#define TTI_SFPSETSGN(i, c, d, m) TCC_I4(i, c, d, m)
#define TTI_SFPPUSHC(i, c, d, m) TCC_I4(i, c, d, m)
#define TTI_SFPPOPC(i, c, d, m) TCC_I4(i, c, d, m)
#define TTI_SFPENCC(i, c, d, m) TCC_I4(i, c, d, m)
#define TTI_SFPCOMPC(i, c, d, m) TCC_I4(i, c, d, m)
#define TTI_SFPSWAP(i, c, d, m) TCC_I4(i, c, d, m)
#define TTI_SFPARECIP(i, c, d, m) TCC_I4(i, c, d, m)
#define TTI_SFPNOP ckernel::tcc_insn()
#define TTI_INCRWC(cr, d, b, a) TCC_I4(cr, d, b, a)
`
