package jit

import (
	"fmt"
	"github.com/tcc-dev/tcc/codegen/target"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Env is what a build needs: the toolchain, the tt-metal tree and where
// things go.
type Env struct {
	Toolchain *Toolchain
	// TTMetalHome is the tt-metal source tree (TT_METAL_HOME).
	TTMetalHome string
	// SFPIInclude is the directory holding sfpi.h; empty means
	// $TT_METAL_HOME/runtime/sfpi/include, then /opt/tenstorrent/sfpi/include.
	SFPIInclude string
	// CacheDir holds firmware/<hash> and kernels/<hash>; empty means
	// os.UserCacheDir()/tcc/jit.
	CacheDir string
	// FirmwareDir, when set, is a prebuilt firmware directory (layout of
	// Firmware's output) used instead of building one.
	FirmwareDir string
	// EthFirmwareDir, when set, is a prebuilt active-erisc firmware
	// directory (layout of EthFirmware's output).
	EthFirmwareDir string
	// Log, when set, receives every command run.
	Log io.Writer
	// TTSim builds kernels for ttsim: compute kernels force-include
	// ttsim.h (TTSimHeaderName), which points the DBG_FEATURE_DISABLE
	// register writes ttsim refuses at a variable of the kernel's own.
	// Firmware is the same either way.
	TTSim bool
}

// Processor indices of the images BuildKernel returns (target.ProcBRISC ...).
const (
	BRISC         = target.ProcBRISC
	NCRISC        = target.ProcNCRISC
	TRISC0        = target.ProcTRISC0
	TRISC1        = target.ProcTRISC1
	TRISC2        = target.ProcTRISC2
	NumProcessors = target.NumProcs
)

type proc struct {
	name    string // brisc, ncrisc, trisc0..2
	index   int
	compute bool
	// eth is an ERISC of an active ethernet core (ethProc, eth1Proc).
	eth    bool
	trisc  int
	define []string // COMPILE_FOR_* and TRISC defines
	ldDef  string   // COMPILE_FOR_<ldDef> for the linker script
	// flags are extra compiler flags of the processor (ethProc's stack
	// limit).
	flags []string
	// kernelSrc is the kernel wrapper source when it is not <name>k.cc
	// (ERISC1 kernels build from active_erisck.cc).
	kernelSrc string
	// fwSrcs are an ERISC firmware's sources and objects; crt0 says its
	// firmware links tmu-crt0.o.
	fwSrcs [][2]string
	crt0   bool
}

var procs = [NumProcessors]proc{
	{name: target.ProcessorNames[0], index: 0, define: []string{"-DCOMPILE_FOR_BRISC"}, ldDef: "BRISC"},
	{name: target.ProcessorNames[1], index: 1, define: []string{"-DCOMPILE_FOR_NCRISC"}, ldDef: "NCRISC"},
	{name: target.ProcessorNames[2], index: 2, compute: true, trisc: 0, define: []string{"-DUCK_CHLKC_UNPACK", "-DNAMESPACE=chlkc_unpack", "-DCOMPILE_FOR_TRISC=0"}, ldDef: "TRISC=0"},
	{name: target.ProcessorNames[3], index: 3, compute: true, trisc: 1, define: []string{"-DUCK_CHLKC_MATH", "-DNAMESPACE=chlkc_math", "-DCOMPILE_FOR_TRISC=1"}, ldDef: "TRISC=1"},
	{name: target.ProcessorNames[4], index: 4, compute: true, trisc: 2, define: []string{"-DUCK_CHLKC_PACK", "-DNAMESPACE=chlkc_pack", "-DCOMPILE_FOR_TRISC=2"}, ldDef: "TRISC=2"},
}

// ProcessorName is the firmware name of processor index i (brisc ...).
func ProcessorName(i int) string { return procs[i].name }

var (
	commonFlags = strings.Fields("-std=c++17 -flto=auto -ffast-math -fno-exceptions")
	warnFlags   = strings.Fields("-MMD -fno-use-cxa-atexit -Wall -Werror -Wno-unknown-pragmas -Wno-deprecated-declarations " +
		"-Wno-error=multistatement-macros -Wno-error=parentheses -Wno-error=unused-but-set-variable " +
		"-Wno-unused-variable -Wno-unused-function")
	pageFlags = strings.Fields("-Wl,-z,max-page-size=16 -Wl,-z,common-page-size=16 -nostartfiles")
	// device_kernel_defines (build_env_manager.cpp) for a Blackhole p150.
	deviceDefs = []string{"-DLOG_BASE_2_OF_NUM_DRAM_BANKS=3", "-DIS_NOT_POW2_NUM_L1_BANKS=1", "-DNUM_DRAM_BANKS=8",
		"-DNUM_L1_BANKS=130", "-DPCIE_NOC_X=19", "-DPCIE_NOC_Y=24", "-DTENSIX_FIRMWARE", "-DLOCAL_MEM_EN=0"}
	bhIncludes = []string{"tt_metal/hw/ckernels/blackhole/metal/common", "tt_metal/hw/ckernels/blackhole/metal/llk_io",
		"tt_metal/hw/inc/internal/tt-1xx", "tt_metal/hw/inc/internal/tt-1xx/blackhole",
		"tt_metal/hw/inc/internal/tt-1xx/blackhole/blackhole_defines", "tt_metal/hw/inc/internal/tt-1xx/blackhole/noc",
		"tt_metal/third_party/tt_llk/tt_llk_blackhole/common/inc", "tt_metal/third_party/tt_llk/tt_llk_blackhole/llk_lib"}
	computeIncludes = []string{"tt_metal/hw/ckernels/blackhole/metal/llk_api", "tt_metal/hw/ckernels/blackhole/metal/llk_api/llk_sfpu"}
	fwSrcDir        = "tt_metal/hw/firmware/src/tt-1xx/"
)

// root is a tree path with exactly one trailing slash; paths are built by
// concatenation so command lines (and __FILE__ strings) match tt-metal's
// and the prototype's.
func root(dir string) string { return strings.TrimRight(dir, "/") + "/" }

func (e *Env) tt() string { return root(e.TTMetalHome) }

func (e *Env) stock() bool { return e.Toolchain.Kind == Stock }

// SFPIVersion is the SFPI release of the pinned tt-metal tree
// (tt_metal/sfpi-version at target.TTMetalRelease), whose headers compute
// kernels include.
const SFPIVersion = "7.22.0"

// sfpiInclude is the sfpi.h directory.
func (e *Env) sfpiInclude() (string, error) {
	cands := []string{e.SFPIInclude}
	if e.SFPIInclude == "" {
		cands = []string{filepath.Join(e.TTMetalHome, "runtime/sfpi/include"), "/opt/tenstorrent/sfpi/include"}
	}
	for _, c := range cands {
		if _, err := os.Stat(filepath.Join(c, "sfpi.h")); err == nil {
			return c, nil
		}
	}
	return "", fmt.Errorf("no sfpi.h in %s; install tt-metal's SFPI (runtime/sfpi), or set TCC_JIT_SFPI_INCLUDE (Env.SFPIInclude) to the include directory of github.com/tenstorrent/sfpi at %s (the headers only: no compiler is built)",
		strings.Join(cands, ", "), SFPIVersion)
}

// arch is the CPU selection: -mcpu with SFPI, the ISA subset the
// Blackhole RISC-Vs implement with stock GCC.
func (e *Env) arch(p proc) []string {
	if !e.stock() {
		if p.compute {
			return []string{"-mcpu=tt-bh-tensix"}
		}
		return []string{"-mcpu=tt-bh"}
	}
	return []string{"-march=rv32im_zicsr_zifencei_zba_zbb", "-mabi=ilp32"}
}

func (e *Env) cflags() []string {
	f := append(append([]string{}, commonFlags...), warnFlags...)
	if e.stock() {
		// stock GCC warns on the SFPI compiler's rvtt_* attributes
		f = append(f, "-Wno-attributes")
	}
	return f
}

func (e *Env) lflags() []string {
	f := append(append([]string{}, commonFlags...), pageFlags...)
	if e.stock() {
		f = append(f, "-nostdlib")
	}
	return f
}

func (e *Env) sysIncludes() []string {
	var f []string
	for _, d := range e.Toolchain.SysIncludes {
		f = append(f, "-isystem", d)
	}
	return f
}

func (e *Env) libgcc() []string {
	if e.stock() {
		return []string{e.Toolchain.LibGCC}
	}
	return nil
}

// includes is JitBuildEnv's include list for processor p from tree tt,
// with the sfpi directories (overlay first) for compute and, when shim is
// set, the GCC 12 include shim just before the directory it shadows
// (gcc12ShimRoot).
func includes(tt string, p proc, sfpi []string, shim string) []string {
	var f []string
	for _, d := range []string{".", "..", tt, tt + "ttnn", tt + "ttnn/cpp", tt + "tt_metal", tt + "tt_metal/include", tt + "tt_metal/hw/inc",
		tt + "tt_metal/hostdevcommon/api", tt + "tt_metal/hw/inc/debug", tt + "tt_metal/api/"} {
		f = append(f, "-I"+d)
	}
	if p.compute {
		for _, d := range sfpi {
			f = append(f, "-I"+d)
		}
	}
	dirs := append([]string{}, bhIncludes...)
	if p.compute {
		dirs = append(dirs, computeIncludes...)
	}
	if p.eth {
		dirs = append(dirs, ethInclude)
	}
	for _, d := range append(dirs, "tt_metal/hw/firmware/src/tt-1xx") {
		if d == gcc12ShimRoot && shim != "" {
			f = append(f, "-I"+shim)
		}
		f = append(f, "-I"+tt+d)
	}
	return f
}

// cmd is one command: Args[0] runs in Dir.
type cmd struct {
	Dir  string
	Args []string
}

func (c cmd) String() string { return "(cd " + c.Dir + " && " + strings.Join(c.Args, " ") + ")" }

// ldScriptCmd preprocesses main.ld into out for kind firmware or kernel
// (hw/CMakeLists.txt).
func (e *Env) ldScriptCmd(kind string, p proc, out string) cmd {
	tt := e.tt()
	return cmd{filepath.Dir(out), []string{e.Toolchain.GXX, "-DTYPE_" + strings.ToUpper(kind), "-DCOMPILE_FOR_" + p.ldDef, "-DARCH_BLACKHOLE",
		"-I" + tt + "tt_metal/hw/inc/internal/tt-1xx/blackhole", "-E", "-P", "-x", "c", "-o", out, tt + "tt_metal/hw/toolchain/main.ld"}}
}

// hwLibCmds compile substitutes.o, noc.o and tmu-crt0.o into dir
// (hw/CMakeLists.txt HW_OBJ_SRC_PAIRS).
func (e *Env) hwLibCmds(dir string) []cmd {
	tt := e.tt()
	inc := []string{"-I.", "-I..", "-I" + tt, "-I" + tt + "tt_metal", "-I" + tt + "tt_metal/api", "-I" + tt + "tt_metal/api/tt-metalium",
		"-I" + tt + "tt_metal/include", "-I" + tt + "tt_metal/hw/inc", "-I" + tt + "tt_metal/hw/inc/debug", "-I" + tt + "tt_metal/hw/firmware/src/tt-1xx"}
	for _, d := range []string{"tt_metal/hw/inc/internal/tt-1xx/blackhole", "tt_metal/hw/inc/internal/tt-1xx/blackhole/blackhole_defines",
		"tt_metal/hw/inc/internal/tt-1xx/blackhole/noc", "tt_metal/hw/inc/internal/tt-1xx/blackhole/overlay",
		"tt_metal/third_party/umd/device/blackhole", "tt_metal/hw/ckernels/blackhole/metal/common",
		"tt_metal/hw/ckernels/blackhole/metal/llk_io", "tt_metal/third_party/tt_llk/tt_llk_blackhole/common/inc",
		"tt_metal/third_party/tt_llk/tt_llk_blackhole/llk_lib", "tt_metal/hw/inc/internal/tt-1xx"} {
		inc = append(inc, "-I"+tt+d)
	}
	flags := append(e.arch(procs[0]), strings.Fields("-std=c++17 -flto=auto -ffast-math -fno-use-cxa-atexit -fno-exceptions -Wall -Werror "+
		"-Wno-deprecated-declarations -Wno-unknown-pragmas -Wno-error=multistatement-macros -Wno-error=parentheses "+
		"-Wno-error=unused-but-set-variable -Wno-unused-variable -Wno-unused-function")...)
	if e.stock() {
		flags = append(flags, "-Wno-attributes")
	}
	flags = append(flags, "-Os", "-fno-tree-loop-distribute-patterns", "-DTENSIX_FIRMWARE")
	var cs []cmd
	for _, s := range [][2]string{{"substitutes.o", "tt_metal/hw/toolchain/substitutes.cpp"},
		{"noc.o", "tt_metal/hw/firmware/src/tt-1xx/blackhole/noc.c"}, {"tmu-crt0.o", "tt_metal/hw/toolchain/tmu-crt0.S"}} {
		a := append([]string{e.Toolchain.GXX}, flags...)
		a = append(a, inc...)
		a = append(a, e.sysIncludes()...)
		cs = append(cs, cmd{dir, append(a, "-c", "-o", filepath.Join(dir, s[0]), tt+s[1])})
	}
	return cs
}

// stubFlags force-include the SFPI builtin stub (stock GCC, compute).
func (e *Env) stubFlags(p proc, stub string) []string {
	if p.compute && e.stock() {
		return []string{"-include", stub}
	}
	return nil
}

// fwCompileCmd compiles processor p's firmware into dir/<p>.o.
func (e *Env) fwCompileCmd(p proc, dir, stub string, sfpi []string) cmd {
	return e.fwCompileSrcCmd(p, dir, stub, sfpi, p.name+".cc", p.name+".o")
}

// fwCompileSrcCmd compiles firmware source src (in the firmware source
// directory) of processor p into dir/obj.
func (e *Env) fwCompileSrcCmd(p proc, dir, stub string, sfpi []string, src, obj string) cmd {
	tt := e.tt()
	opt, extra := "-Os", []string{"-fno-tree-loop-distribute-patterns"}
	if p.compute {
		opt, extra, src = "-O3", nil, "trisc.cc"
	}
	extra = append(extra, p.flags...)
	a := append([]string{e.Toolchain.GXX, opt}, e.cflags()...)
	a = append(a, e.arch(p)...)
	a = append(a, extra...)
	a = append(a, e.stubFlags(p, stub)...)
	a = append(a, includes(tt, p, sfpi, "")...)
	a = append(a, e.sysIncludes()...)
	a = append(a, "-c", "-o", filepath.Join(dir, obj), tt+fwSrcDir+src)
	a = append(a, deviceDefs...)
	a = append(a, fmt.Sprintf("-DPROCESSOR_INDEX=%d", p.index))
	a = append(a, p.define...)
	a = append(a, "-DARCH_BLACKHOLE", "-DDISPATCH_MESSAGE_ADDR=0", "-DFW_BUILD")
	return cmd{dir, a}
}

// fwLinkCmd links dir/<p>.o into dir/<p>.elf; fw is the firmware root
// (ld/ and lib/).
func (e *Env) fwLinkCmd(p proc, dir, fw string) cmd {
	opt, extra := "-Os", []string{"-fno-tree-loop-distribute-patterns"}
	if p.compute {
		opt, extra = "-O3", nil
	}
	a := append([]string{e.Toolchain.GXX, opt}, e.lflags()...)
	a = append(a, e.arch(p)...)
	a = append(a, extra...)
	a = append(a, "-T"+filepath.Join(fw, "ld", "firmware_"+p.name+".ld"), filepath.Join(fw, "lib", "tmu-crt0.o"))
	if p.index == BRISC {
		a = append(a, filepath.Join(fw, "lib", "noc.o"))
	}
	a = append(a, filepath.Join(fw, "lib", "substitutes.o"), filepath.Join(dir, p.name+".o"))
	a = append(a, e.libgcc()...)
	return cmd{dir, append(a, "-o", filepath.Join(dir, p.name+".elf"))}
}

// kernelCompileCmd compiles the kernel wrapper (brisck.cc, ncrisck.cc,
// trisck.cc) for processor p in dir; shim is the GCC 12 include shim ("":
// none).
func (e *Env) kernelCompileCmd(p proc, dir, srcDir, stub string, sfpi []string, shim string, userDefs map[string]string, noc int, ct []uint32) cmd {
	tt, opt, extra, src := e.tt(), "-O2", []string{"-fno-tree-loop-distribute-patterns"}, p.name+"k.cc"
	if p.compute {
		opt, extra, src = "-O3", nil, "trisck.cc"
	}
	if p.eth {
		opt = "-Os" // EthernetConfig's default opt_level
	}
	if p.kernelSrc != "" {
		src = p.kernelSrc
	}
	extra = append(extra, p.flags...)
	a := append([]string{e.Toolchain.GXX, opt}, e.cflags()...)
	a = append(a, e.arch(p)...)
	a = append(a, extra...)
	a = append(a, e.stubFlags(p, stub)...)
	if p.compute && e.TTSim {
		a = append(a, "-include", filepath.Join(dir, TTSimHeaderName))
	}
	a = append(a, includes(tt, p, sfpi, shim)...)
	a = append(a, "-I"+srcDir)
	a = append(a, e.sysIncludes()...)
	a = append(a, "-c", "-o", filepath.Join(dir, objName(p)), tt+fwSrcDir+src)
	a = append(a, deviceDefs...)
	a = append(a, fmt.Sprintf("-DPROCESSOR_INDEX=%d", p.index))
	a = append(a, p.define...)
	a = append(a, "-DARCH_BLACKHOLE", "-DDISPATCH_MESSAGE_ADDR=0", "-DKERNEL_BUILD")
	if !p.compute {
		// compute kernels get their defines from defines_generated.h
		for _, n := range slices.Sorted(maps.Keys(userDefs)) {
			a = append(a, "-D"+n+"="+userDefs[n])
		}
		a = append(a, fmt.Sprintf("-DNOC_INDEX=%d", noc), "-DNOC_MODE=0")
	}
	if len(ct) > 0 {
		s := make([]string, len(ct))
		for i, v := range ct {
			s[i] = fmt.Sprint(v)
		}
		a = append(a, "-DKERNEL_COMPILE_TIME_ARGS="+strings.Join(s, ","))
	}
	return cmd{dir, a}
}

func objName(p proc) string {
	if p.compute {
		return fmt.Sprintf("trisck%d.o", p.trisc)
	}
	return p.name + "k.o"
}

// kernelLinkCmd links dir/<obj> into dir/<p>.elf with --emit-relocs
// against fw's weakened firmware.
func (e *Env) kernelLinkCmd(p proc, dir, fw string) cmd {
	opt, extra := "-O2", []string{"-fno-tree-loop-distribute-patterns"}
	if p.compute {
		opt, extra = "-O3", nil
		if e.stock() {
			// sfpi_stub.h defines the .ttinsn assembler macro in each
			// unit's top-level asm: a link whose LTO splits a large
			// kernel (a persistent program's merged compute kernel)
			// into several partitions assembles some without it.
			extra = []string{"-flto-partition=one"}
		}
	}
	if p.eth {
		opt = "-Os"
		extra = append(extra, p.flags...)
	}
	a := []string{e.Toolchain.GXX, opt, "-Wl,--just-symbols=" + filepath.Join(fw, p.name, p.name+"_weakened.elf")}
	a = append(a, e.lflags()...)
	a = append(a, e.arch(p)...)
	a = append(a, extra...)
	a = append(a, "-T"+filepath.Join(fw, "ld", "kernel_"+p.name+".ld"), "-Wl,--emit-relocs")
	if p.index == BRISC && !p.eth {
		a = append(a, filepath.Join(fw, "lib", "noc.o"))
	}
	a = append(a, filepath.Join(fw, "lib", "substitutes.o"), filepath.Join(dir, objName(p)))
	a = append(a, e.libgcc()...)
	return cmd{dir, append(a, "-o", filepath.Join(dir, p.name+".elf"))}
}
