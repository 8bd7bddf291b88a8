package jit

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tcc-dev/tcc/codegen/hostcfg"
)

// shimTree writes a small tree shaped like tt-llk's common/inc: the two
// headers GCC 12 rejects, the headers that reach them through their own
// directory, and headers that do not. It returns the include root.
func shimTree(t *testing.T) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "common", "inc")
	files := map[string]string{
		"ckernel.h":               "#pragma once\ninline int ckernel_defined = 1;\n",
		"cmath_common.h":          "#pragma once\n#include \"ckernel.h\"\n#include \"ckernel_sfpu.h\"\n#include <cstdint>\n",
		"ckernel_sfpu.h":          "#pragma once\n#include \"ckernel.h\"\n#include \"sfpu/ckernel_sfpu_abs.h\"\n#include \"sfpu/ckernel_sfpu_reduce.h\"\n#include \"sfpu/ckernel_sfpu_rounding_ops.h\"\n#include \"not_here.h\"\n",
		"unrelated.h":             "#pragma once\n#include \"ckernel.h\"\n",
		"sfpu/ckernel_sfpu_abs.h": "#pragma once\n#include \"ckernel.h\"\ninline int abs_defined = 2;\n",
		"sfpu/ckernel_sfpu_reduce.h": `#pragma once
enum class DataFormat { Float32, Float16_b, Bfp8_b };
template <DataFormat format, int pool>
constexpr int get_instruction_mode()
{
    if constexpr (format == DataFormat::Float32)
    {
        return 1;
    }
    else
    {
        static_assert(false, "Unsupported DataFormat");
        return 0;
    }
}
template <typename T>
constexpr int type_mode()
{
    if constexpr (sizeof(T) == 4)
    {
        return 4;
    }
    else
    {
        static_assert( false , "Unsupported type");
        return 0;
    }
}
`,
		"sfpu/ckernel_sfpu_rounding_ops.h": `#pragma once
template <bool APPROXIMATION_MODE, int ITERATIONS = 8>
inline int stochastic_round(int x)
{
#pragma GCC unroll ITERATIONS
    for (int d = 0; d < ITERATIONS; d++)
    {
        x += d;
    }
#pragma GCC unroll 4
    for (int d = 0; d < 4; d++)
    {
        x += d;
    }
    return x;
}
template <int N>
inline int no_default(int x)
{
    #pragma GCC unroll N
    for (int d = 0; d < N; d++)
    {
        x += d;
    }
    return x;
}
constexpr int COUNT = 3;
inline int not_a_template(int x)
{
#pragma GCC unroll COUNT
    for (int d = 0; d < COUNT; d++)
    {
        x += d;
    }
    return x;
}
`,
	}
	for n, c := range files {
		p := filepath.Join(root, n)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// TestGCC12Shim checks the shim's files: the two rewritten headers and the
// headers of their directory that reach them through a quoted include (the
// lookup in the includer's own directory would bypass the shim), each copy
// naming the originals it includes by absolute path.
func TestGCC12Shim(t *testing.T) {
	root := shimTree(t)
	got, err := buildGCC12Shim(root, []string{"sfpu/ckernel_sfpu_reduce.h", "sfpu/ckernel_sfpu_rounding_ops.h", "sfpu/absent.h"})
	if err != nil {
		t.Fatal(err)
	}
	orig := func(n string) string {
		b, err := os.ReadFile(filepath.Join(root, n))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	abs := func(n string) string { return `"` + filepath.Join(root, n) + `"` }
	want := map[string]string{
		"cmath_common.h": "#pragma once\n#include " + abs("ckernel.h") + "\n#include \"ckernel_sfpu.h\"\n#include <cstdint>\n",
		"ckernel_sfpu.h": "#pragma once\n#include " + abs("ckernel.h") + "\n#include " + abs("sfpu/ckernel_sfpu_abs.h") +
			"\n#include \"sfpu/ckernel_sfpu_reduce.h\"\n#include \"sfpu/ckernel_sfpu_rounding_ops.h\"\n#include \"not_here.h\"\n",
		"sfpu/ckernel_sfpu_reduce.h": strings.NewReplacer(
			"#pragma once\n", "#pragma once\n"+dependentFalse,
			`static_assert(false, "Unsupported DataFormat")`, `static_assert(::tcc_jit_shim::dependent_false_v<format>, "Unsupported DataFormat")`,
			`static_assert( false , "Unsupported type")`, `static_assert(::tcc_jit_shim::dependent_false_t<T>, "Unsupported type")`,
		).Replace(orig("sfpu/ckernel_sfpu_reduce.h")),
		"sfpu/ckernel_sfpu_rounding_ops.h": strings.NewReplacer(
			"#pragma GCC unroll ITERATIONS\n", "#pragma GCC unroll 8 // tcc jit (GCC 12): ITERATIONS's default\n",
			"    #pragma GCC unroll N\n", "// tcc jit (GCC 12): dropped #pragma GCC unroll N (a template parameter without a default)\n",
		).Replace(orig("sfpu/ckernel_sfpu_rounding_ops.h")),
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("shim files (-want +got):\n%s", d)
	}

	t.Run("no rewrite needed", func(t *testing.T) {
		got, err := buildGCC12Shim(root, []string{"sfpu/ckernel_sfpu_abs.h"})
		if err != nil || got != nil {
			t.Errorf("got %v, %v; want no shim", got, err)
		}
	})
	t.Run("static_assert outside a template", func(t *testing.T) {
		_, _, err := rewriteGCC12("#pragma once\nstatic_assert(false, \"x\");\n")
		if err == nil || !strings.Contains(err.Error(), "no enclosing template") {
			t.Errorf("err = %v, want no enclosing template", err)
		}
	})
}

// TestGCC12ShimCompiles compiles a unit that includes the fake tree the
// way tt-metal's headers do, with Debian's GCC 12 (skipped when it is not
// installed): without the shim it fails on both constructs; with it, it
// compiles, and the rewritten static_assert still fires for an
// unsupported format.
func TestGCC12ShimCompiles(t *testing.T) {
	gxx, err := exec.LookPath(DefaultStockGCC)
	if err != nil {
		t.Skipf("%s not installed: %v", DefaultStockGCC, err)
	}
	root := shimTree(t)
	files, err := buildGCC12Shim(root, gcc12ShimHeaders)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	shim, err := writeShim(dir, files)
	if err != nil {
		t.Fatal(err)
	}
	// lib/ stands for llk_lib: a directory of its own whose headers find
	// cmath_common.h through the include path.
	lib := filepath.Join(dir, "lib")
	os.MkdirAll(lib, 0o755)
	os.WriteFile(filepath.Join(lib, "llk_math.h"), []byte("#pragma once\n#include \"cmath_common.h\"\n#include \"ckernel_sfpu.h\"\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "not_here.h"), []byte("#pragma once\n"), 0o644)
	units := map[string]string{
		"ok.cc":  "#include \"llk_math.h\"\n#include \"unrelated.h\"\nint f() { return get_instruction_mode<DataFormat::Float32, 0>() + type_mode<int>() + stochastic_round<false>(1) + no_default<2>(0) + not_a_template(0) + abs_defined + ckernel_defined; }\n",
		"bad.cc": "#include \"llk_math.h\"\nint g() { return get_instruction_mode<DataFormat::Bfp8_b, 0>(); }\n",
	}
	for n, c := range units {
		os.WriteFile(filepath.Join(dir, n), []byte(c), 0o644)
	}
	compile := func(unit string, withShim bool) (string, error) {
		args := []string{"-std=c++17", "-Wall", "-Werror", "-march=rv32im", "-mabi=ilp32", "-fsyntax-only", "-I" + lib, "-I" + dir}
		if withShim {
			args = append(args, "-I"+shim)
		}
		args = append(args, "-I"+root, "-isystem", "/usr/include/newlib/c++/12.2.1", "-isystem", "/usr/include/newlib/c++/12.2.1/arm-none-eabi",
			"-isystem", "/usr/lib/picolibc/riscv64-unknown-elf/include", unit)
		c := exec.Command(gxx, args...)
		c.Dir = dir
		out, err := c.CombinedOutput()
		return string(out), err
	}
	out, err := compile("ok.cc", false)
	if err == nil || !strings.Contains(out, "static assertion failed") || !strings.Contains(out, "#pragma GCC unroll") {
		t.Errorf("without the shim GCC 12 should reject both constructs; err %v:\n%s", err, out)
	}
	if out, err := compile("ok.cc", true); err != nil {
		t.Errorf("with the shim: %v\n%s", err, out)
	}
	out, err = compile("bad.cc", true)
	if err == nil || !strings.Contains(out, "Unsupported DataFormat") {
		t.Errorf("with the shim, an unsupported format must still fail its static_assert; err %v:\n%s", err, out)
	}
}

// TestBuildKernelRemovesTemp checks that a failed kernel build leaves no
// temporary directory in the cache.
func TestBuildKernelRemovesTemp(t *testing.T) {
	tt, fw, cache, bdir := t.TempDir(), t.TempDir(), t.TempDir(), t.TempDir()
	if err := os.MkdirAll(filepath.Join(tt, "tt_metal/hw/firmware/src/tt-1xx"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(tt, "tt_metal/hw/firmware/src/tt-1xx/brisc.cc"), nil, 0o644)
	for _, f := range FirmwareFiles() {
		os.MkdirAll(filepath.Join(fw, filepath.Dir(f)), 0o755)
		os.WriteFile(filepath.Join(fw, f), nil, 0o644)
	}
	os.MkdirAll(filepath.Join(bdir, "kernels"), 0o755)
	os.WriteFile(filepath.Join(bdir, "kernels/r.cpp"), []byte("void kernel_main() {}\n"), 0o644)
	e := stockEnv()
	e.TTMetalHome, e.FirmwareDir, e.CacheDir = tt, fw, cache
	e.Toolchain.GXX = "/bin/false"
	k := &hostcfg.KernelConfig{Name: "reader", Processor: "RISCV_1", Source: "kernels/r.cpp"}
	if _, err := BuildKernel(e, bdir, &hostcfg.ProgramConfig{Program: "p"}, k); err == nil {
		t.Fatal("a compiler that fails built the kernel")
	}
	left, _ := filepath.Glob(filepath.Join(cache, "kernels", "*"))
	if len(left) != 0 {
		t.Errorf("the failed build left %v", left)
	}
}

// TestNoSFPIHeaders checks that a missing sfpi.h says where to get it.
func TestNoSFPIHeaders(t *testing.T) {
	e := stockEnv()
	e.TTMetalHome, e.SFPIInclude = t.TempDir(), t.TempDir()
	_, err := e.sfpiInclude()
	if err == nil {
		t.Fatal("no error without sfpi.h")
	}
	for _, w := range []string{"no sfpi.h in " + e.SFPIInclude, "TCC_JIT_SFPI_INCLUDE", "github.com/tenstorrent/sfpi at 7.22.0"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%q does not mention %q", err, w)
		}
	}
}
