package jit

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tcc-dev/tcc/codegen/hostcfg"
)

func stockEnv() *Env {
	return &Env{TTMetalHome: "/tt", Toolchain: &Toolchain{Kind: Stock, GXX: "/bin/riscv64-unknown-elf-g++", LibGCC: "/lib/libgcc.a",
		SysIncludes: []string{"/inc/c++", "/inc/pico"}}}
}

func sfpiEnv() *Env {
	return &Env{TTMetalHome: "/tt", Toolchain: &Toolchain{Kind: SFPI, GXX: "/sfpi/riscv-tt-elf-g++"}}
}

const ttIncs = "-I. -I.. -I/tt/ -I/tt/ttnn -I/tt/ttnn/cpp -I/tt/tt_metal -I/tt/tt_metal/include -I/tt/tt_metal/hw/inc " +
	"-I/tt/tt_metal/hostdevcommon/api -I/tt/tt_metal/hw/inc/debug -I/tt/tt_metal/api/ "

const bhIncs = "-I/tt/tt_metal/hw/ckernels/blackhole/metal/common -I/tt/tt_metal/hw/ckernels/blackhole/metal/llk_io " +
	"-I/tt/tt_metal/hw/inc/internal/tt-1xx -I/tt/tt_metal/hw/inc/internal/tt-1xx/blackhole " +
	"-I/tt/tt_metal/hw/inc/internal/tt-1xx/blackhole/blackhole_defines -I/tt/tt_metal/hw/inc/internal/tt-1xx/blackhole/noc " +
	"-I/tt/tt_metal/third_party/tt_llk/tt_llk_blackhole/common/inc -I/tt/tt_metal/third_party/tt_llk/tt_llk_blackhole/llk_lib "

const cflagsStock = "-std=c++17 -flto=auto -ffast-math -fno-exceptions -MMD -fno-use-cxa-atexit -Wall -Werror -Wno-unknown-pragmas " +
	"-Wno-deprecated-declarations -Wno-error=multistatement-macros -Wno-error=parentheses -Wno-error=unused-but-set-variable " +
	"-Wno-unused-variable -Wno-unused-function -Wno-attributes "

const devDefs = "-DLOG_BASE_2_OF_NUM_DRAM_BANKS=3 -DIS_NOT_POW2_NUM_L1_BANKS=1 -DNUM_DRAM_BANKS=8 -DNUM_L1_BANKS=130 " +
	"-DPCIE_NOC_X=19 -DPCIE_NOC_Y=24 -DTENSIX_FIRMWARE -DLOCAL_MEM_EN=0 "

// TestCommandLines pins the compile and link command lines (the same as
// /work/ttsim/build_kernel.py and build_fw.py print).
func TestCommandLines(t *testing.T) {
	sfpiIncs := []string{"/k/sfpi-overlay", "/sfpi"}
	defs := map[string]string{"Z": "1", "A": "x"}
	for _, tc := range []struct {
		name string
		c    cmd
		want string
	}{
		{"ncrisc kernel compile", stockEnv().kernelCompileCmd(procs[NCRISC], "/k", "/src", "", nil, "", defs, 1, []uint32{1, 4}),
			"/bin/riscv64-unknown-elf-g++ -O2 " + cflagsStock + "-march=rv32im_zicsr_zifencei_zba_zbb -mabi=ilp32 -fno-tree-loop-distribute-patterns " +
				ttIncs + bhIncs + "-I/tt/tt_metal/hw/firmware/src/tt-1xx -I/src -isystem /inc/c++ -isystem /inc/pico " +
				"-c -o /k/ncrisck.o /tt/tt_metal/hw/firmware/src/tt-1xx/ncrisck.cc " + devDefs +
				"-DPROCESSOR_INDEX=1 -DCOMPILE_FOR_NCRISC -DARCH_BLACKHOLE -DDISPATCH_MESSAGE_ADDR=0 -DKERNEL_BUILD -DA=x -DZ=1 " +
				"-DNOC_INDEX=1 -DNOC_MODE=0 -DKERNEL_COMPILE_TIME_ARGS=1,4"},
		{"brisc kernel link", stockEnv().kernelLinkCmd(procs[BRISC], "/k", "/fw"),
			"/bin/riscv64-unknown-elf-g++ -O2 -Wl,--just-symbols=/fw/brisc/brisc_weakened.elf -std=c++17 -flto=auto -ffast-math -fno-exceptions " +
				"-Wl,-z,max-page-size=16 -Wl,-z,common-page-size=16 -nostartfiles -nostdlib -march=rv32im_zicsr_zifencei_zba_zbb -mabi=ilp32 " +
				"-fno-tree-loop-distribute-patterns -T/fw/ld/kernel_brisc.ld -Wl,--emit-relocs /fw/lib/noc.o /fw/lib/substitutes.o /k/brisck.o /lib/libgcc.a -o /k/brisc.elf"},
		{"trisc1 kernel compile", stockEnv().kernelCompileCmd(procs[TRISC1], "/k", "/src", "/k/sfpi_stub.h", sfpiIncs, "", defs, 0, nil),
			"/bin/riscv64-unknown-elf-g++ -O3 " + cflagsStock + "-march=rv32im_zicsr_zifencei_zba_zbb -mabi=ilp32 -include /k/sfpi_stub.h " +
				ttIncs + "-I/k/sfpi-overlay -I/sfpi " + bhIncs + "-I/tt/tt_metal/hw/ckernels/blackhole/metal/llk_api " +
				"-I/tt/tt_metal/hw/ckernels/blackhole/metal/llk_api/llk_sfpu -I/tt/tt_metal/hw/firmware/src/tt-1xx -I/src -isystem /inc/c++ -isystem /inc/pico " +
				"-c -o /k/trisck1.o /tt/tt_metal/hw/firmware/src/tt-1xx/trisck.cc " + devDefs +
				"-DPROCESSOR_INDEX=3 -DUCK_CHLKC_MATH -DNAMESPACE=chlkc_math -DCOMPILE_FOR_TRISC=1 -DARCH_BLACKHOLE -DDISPATCH_MESSAGE_ADDR=0 -DKERNEL_BUILD"},
		{"trisc1 kernel compile with the GCC 12 shim", stockEnv().kernelCompileCmd(procs[TRISC1], "/k", "/src", "/k/sfpi_stub.h", sfpiIncs, "/k/gcc12-shim", nil, 0, nil),
			"/bin/riscv64-unknown-elf-g++ -O3 " + cflagsStock + "-march=rv32im_zicsr_zifencei_zba_zbb -mabi=ilp32 -include /k/sfpi_stub.h " +
				ttIncs + "-I/k/sfpi-overlay -I/sfpi " + strings.Replace(bhIncs, "-I/tt/tt_metal/third_party/tt_llk/tt_llk_blackhole/common/inc ",
				"-I/k/gcc12-shim -I/tt/tt_metal/third_party/tt_llk/tt_llk_blackhole/common/inc ", 1) +
				"-I/tt/tt_metal/hw/ckernels/blackhole/metal/llk_api " +
				"-I/tt/tt_metal/hw/ckernels/blackhole/metal/llk_api/llk_sfpu -I/tt/tt_metal/hw/firmware/src/tt-1xx -I/src -isystem /inc/c++ -isystem /inc/pico " +
				"-c -o /k/trisck1.o /tt/tt_metal/hw/firmware/src/tt-1xx/trisck.cc " + devDefs +
				"-DPROCESSOR_INDEX=3 -DUCK_CHLKC_MATH -DNAMESPACE=chlkc_math -DCOMPILE_FOR_TRISC=1 -DARCH_BLACKHOLE -DDISPATCH_MESSAGE_ADDR=0 -DKERNEL_BUILD"},
		// One LTO partition: each partition's assembly needs the .ttinsn
		// macro sfpi_stub.h defines in one unit's top-level asm.
		{"trisc0 kernel link stock", stockEnv().kernelLinkCmd(procs[TRISC0], "/k", "/fw"),
			"/bin/riscv64-unknown-elf-g++ -O3 -Wl,--just-symbols=/fw/trisc0/trisc0_weakened.elf -std=c++17 -flto=auto -ffast-math -fno-exceptions " +
				"-Wl,-z,max-page-size=16 -Wl,-z,common-page-size=16 -nostartfiles -nostdlib -march=rv32im_zicsr_zifencei_zba_zbb -mabi=ilp32 " +
				"-flto-partition=one -T/fw/ld/kernel_trisc0.ld -Wl,--emit-relocs /fw/lib/substitutes.o /k/trisck0.o /lib/libgcc.a -o /k/trisc0.elf"},
		{"trisc2 kernel link sfpi", sfpiEnv().kernelLinkCmd(procs[TRISC2], "/k", "/fw"),
			"/sfpi/riscv-tt-elf-g++ -O3 -Wl,--just-symbols=/fw/trisc2/trisc2_weakened.elf -std=c++17 -flto=auto -ffast-math -fno-exceptions " +
				"-Wl,-z,max-page-size=16 -Wl,-z,common-page-size=16 -nostartfiles -mcpu=tt-bh-tensix -T/fw/ld/kernel_trisc2.ld -Wl,--emit-relocs " +
				"/fw/lib/substitutes.o /k/trisck2.o -o /k/trisc2.elf"},
		{"brisc firmware link", stockEnv().fwLinkCmd(procs[BRISC], "/fw/brisc", "/fw"),
			"/bin/riscv64-unknown-elf-g++ -Os -std=c++17 -flto=auto -ffast-math -fno-exceptions -Wl,-z,max-page-size=16 -Wl,-z,common-page-size=16 " +
				"-nostartfiles -nostdlib -march=rv32im_zicsr_zifencei_zba_zbb -mabi=ilp32 -fno-tree-loop-distribute-patterns -T/fw/ld/firmware_brisc.ld " +
				"/fw/lib/tmu-crt0.o /fw/lib/noc.o /fw/lib/substitutes.o /fw/brisc/brisc.o /lib/libgcc.a -o /fw/brisc/brisc.elf"},
		{"trisc0 firmware compile", stockEnv().fwCompileCmd(procs[TRISC0], "/fw/trisc0", "/fw/sfpi/sfpi_stub.h", []string{"/ov", "/sfpi"}),
			"/bin/riscv64-unknown-elf-g++ -O3 " + cflagsStock + "-march=rv32im_zicsr_zifencei_zba_zbb -mabi=ilp32 -include /fw/sfpi/sfpi_stub.h " +
				ttIncs + "-I/ov -I/sfpi " + bhIncs + "-I/tt/tt_metal/hw/ckernels/blackhole/metal/llk_api " +
				"-I/tt/tt_metal/hw/ckernels/blackhole/metal/llk_api/llk_sfpu -I/tt/tt_metal/hw/firmware/src/tt-1xx -isystem /inc/c++ -isystem /inc/pico " +
				"-c -o /fw/trisc0/trisc0.o /tt/tt_metal/hw/firmware/src/tt-1xx/trisc.cc " + devDefs +
				"-DPROCESSOR_INDEX=2 -DUCK_CHLKC_UNPACK -DNAMESPACE=chlkc_unpack -DCOMPILE_FOR_TRISC=0 -DARCH_BLACKHOLE -DDISPATCH_MESSAGE_ADDR=0 -DFW_BUILD"},
		{"linker script", stockEnv().ldScriptCmd("kernel", procs[TRISC2], "/fw/ld/kernel_trisc2.ld"),
			"/bin/riscv64-unknown-elf-g++ -DTYPE_KERNEL -DCOMPILE_FOR_TRISC=2 -DARCH_BLACKHOLE -I/tt/tt_metal/hw/inc/internal/tt-1xx/blackhole " +
				"-E -P -x c -o /fw/ld/kernel_trisc2.ld /tt/tt_metal/hw/toolchain/main.ld"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := strings.Join(tc.c.Args, " "); got != tc.want {
				t.Errorf("command\n got %s\nwant %s", got, tc.want)
			}
		})
	}
	t.Run("sfpi dm uses -mcpu=tt-bh", func(t *testing.T) {
		got := strings.Join(sfpiEnv().kernelCompileCmd(procs[BRISC], "/k", "/src", "", nil, "", nil, 0, nil).Args, " ")
		if !strings.Contains(got, " -mcpu=tt-bh -fno-tree-loop-distribute-patterns ") || strings.Contains(got, "-Wno-attributes") || strings.Contains(got, "-isystem") {
			t.Errorf("SFPI BRISC compile: %s", got)
		}
	})
}

func TestBuildKernelErrors(t *testing.T) {
	tt := t.TempDir()
	if err := os.MkdirAll(filepath.Join(tt, "tt_metal/hw/firmware/src/tt-1xx"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tt, "tt_metal/hw/firmware/src/tt-1xx/brisc.cc"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	e := stockEnv()
	e.TTMetalHome = tt
	p := &hostcfg.ProgramConfig{Program: "prog"}
	for _, tc := range []struct {
		name string
		env  *Env
		k    hostcfg.KernelConfig
		want []string
	}{
		{"missing source", e, hostcfg.KernelConfig{Name: "reader", Processor: "RISCV_1", Source: "kernels/nope.cpp"},
			[]string{`program "prog"`, `kernel "reader"`, "(RISCV_1)", "kernel source", "nope.cpp"}},
		{"bad processor", e, hostcfg.KernelConfig{Name: "w", Processor: "RISCV_7"}, []string{`kernel "w"`, `unknown processor "RISCV_7"`}},
		{"ethernet", e, hostcfg.KernelConfig{Name: "eth", Processor: "RISCV_0", Ethernet: &hostcfg.EthernetConfig{}}, []string{`kernel "eth"`, "ethernet"}},
		{"no TT_METAL_HOME", stockEnv(), hostcfg.KernelConfig{Name: "r", Processor: "RISCV_0"}, []string{`kernel "r"`, "TT_METAL_HOME"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := *tc.env
			if tc.name == "no TT_METAL_HOME" {
				env.TTMetalHome = ""
			}
			_, err := BuildKernel(&env, t.TempDir(), p, &tc.k)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestNeedsSFPUError(t *testing.T) {
	out := "/usr/bin/ld: trisck1.o: in function `x':\nfoo.cpp:(.text+0x4): undefined reference to `__tcc_sfpi_stub::any_t __builtin_rvtt_bh_sfpload<int>(int&&)'\ncollect2: error"
	m := undefinedSFPI.FindString(out)
	if !strings.Contains(m, "__builtin_rvtt_bh_sfpload") {
		t.Fatalf("undefined SFPI reference not found: %q", m)
	}
	var err error = &NeedsSFPUError{Program: "p", Kernel: "compute", Detail: m}
	var ne *NeedsSFPUError
	if !errors.As(err, &ne) {
		t.Fatal("errors.As")
	}
	for _, w := range []string{`program "p"`, `kernel "compute"`, "needs the SFPU", "stock GCC cannot build it", "SFPI toolchain"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%q does not mention %q", err, w)
		}
	}
}
