package jit

import (
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Ethernet kernels.
//
// A kernel on an active ethernet core runs on ERISC0 in tt-metal's default
// 2-ERISC mode (llrt/hal/tt-1xx/blackhole/bh_hal.cpp, bh_hal_active_eth.cpp,
// hal_1xx_common.cpp): the base firmware launches the active-erisc
// firmware (active_erisc.cc + active_erisc-crt0.cc, linked by
// main_aerisc.ld without tmu-crt0.o: the base firmware sets sp and gp),
// which jumps into the kernel (active_erisck.cc, kernel_main_aerisc.ld)
// at the launch message's kernel_config_base[ACTIVE_ETH] +
// kernel_text_offset[DM0]. Both are compiled with the defines
// COMPILE_FOR_ERISC, ERISC, RISC_B0_HW, COMPILE_FOR_AERISC=0,
// PROGRAMMABLE_CORE_TYPE=1, ENABLE_2_ERISC_MODE, PHYSICAL_AERISC_ID=0,
// the include directory tt_metal/hw/inc/ethernet and
// -Werror=stack-usage=1912 (the base firmware's 2 KiB static stack).
//
// EthFirmware builds that firmware ELF (and its weakened copy the kernel
// links against with --just-symbols) into <cache>/firmware-eth/<hash>;
// BuildKernel builds a kernel with an Ethernet config into one image, at
// Images[EthImage]. ttsim's bh_x2 does not run the firmware: it jumps
// straight into the kernel with the firmware's runtime-arg globals set at
// fixed addresses (EthFirmwareSymbols), so a kernel works there only when
// the firmware ELF it links against places them there (CheckEthFirmware).

// ethInclude is the extra include directory of ethernet builds.
const ethInclude = "tt_metal/hw/inc/ethernet"

// EthImage and Eth1Image are the indices of an ethernet kernel's image in
// Images: ERISC0 and ERISC1, the data-movement processors 0 and 1
// (EthProcessorTypes DM0, DM1) of the active ethernet core type.
const (
	EthImage  = 0
	Eth1Image = 1
)

// ethDefines are the defines of ERISC i's builds (hal_1xx_common.cpp:
// COMPILE_FOR_AERISC is the processor id; bh_hal.cpp: 2-ERISC mode,
// PHYSICAL_AERISC_ID).
func ethDefines(i int) []string {
	return []string{"-DCOMPILE_FOR_ERISC", "-DERISC", "-DRISC_B0_HW", fmt.Sprintf("-DCOMPILE_FOR_AERISC=%d", i),
		"-DPROGRAMMABLE_CORE_TYPE=1", "-DENABLE_2_ERISC_MODE", fmt.Sprintf("-DPHYSICAL_AERISC_ID=%d", i)}
}

// ethProc is ERISC0 of an active ethernet core in 2-ERISC mode: its
// firmware (active_erisc.cc, launched by the base firmware, which set sp
// and gp: no tmu-crt0.o) and kernels (main_aerisc.ld) keep within the
// base firmware's 2 KiB static stack.
var ethProc = proc{name: "active_erisc", index: EthImage, eth: true,
	define: ethDefines(0),
	ldDef:  "MAIN_AERISC",
	flags:  []string{"-Werror=stack-usage=1912"},
	fwSrcs: [][2]string{{"active_erisc.cc", "active_erisc.o"}, {"active_erisc-crt0.cc", "active_erisc-crt0.o"}},
}

// eth1Proc is ERISC1 of an active ethernet core in 2-ERISC mode
// (bh_hal.cpp: target subordinate_active_erisc; firmware
// subordinate_erisc.cc, started from its reset PC, so linked with
// tmu-crt0.o; kernels from active_erisck.cc with PHYSICAL_AERISC_ID=1;
// subordinate_aerisc.ld; no stack limit: ERISC1 has its own stack).
var eth1Proc = proc{name: "subordinate_erisc", index: Eth1Image, eth: true,
	define:    ethDefines(1),
	ldDef:     "SUBORDINATE_AERISC",
	kernelSrc: "active_erisck.cc",
	fwSrcs:    [][2]string{{"subordinate_erisc.cc", "subordinate_erisc.o"}},
	crt0:      true,
}

// ethProcs are the ERISCs by image index.
var ethProcs = [2]proc{ethProc, eth1Proc}

// EthFirmwareFiles are the files of an ethernet firmware directory
// kernels link with, relative to it (both ERISCs' firmware).
func EthFirmwareFiles() []string {
	fs := []string{"lib/substitutes.o"}
	for _, p := range ethProcs {
		n := p.name
		fs = append(fs, "ld/kernel_"+n+".ld", n+"/"+n+".elf", n+"/"+n+"_weakened.elf")
	}
	return fs
}

// EthFirmwareSymbols are the active-erisc firmware globals ttsim's bh_x2
// sets before it jumps into an ethernet kernel (README "Two chips on
// ttsim"), by name and the address it writes.
var EthFirmwareSymbols = map[string]uint32{"rta_l1_base": 0xFFB00714, "crta_l1_base": 0xFFB00710}

// ethFwLinkCmd links ERISC p's firmware objects in dir into
// dir/<p>.elf: ERISC0's without tmu-crt0.o (the base firmware sets sp
// and gp), ERISC1's with it.
func (e *Env) ethFwLinkCmd(p proc, dir, fw string) cmd {
	a := append([]string{e.Toolchain.GXX, "-Os"}, e.lflags()...)
	a = append(a, e.arch(p)...)
	a = append(a, "-fno-tree-loop-distribute-patterns")
	a = append(a, p.flags...)
	a = append(a, "-T"+filepath.Join(fw, "ld", "firmware_"+p.name+".ld"))
	if p.crt0 {
		a = append(a, filepath.Join(fw, "lib", "tmu-crt0.o"))
	}
	a = append(a, filepath.Join(fw, "lib", "substitutes.o"))
	for _, s := range p.fwSrcs {
		a = append(a, filepath.Join(dir, s[1]))
	}
	a = append(a, e.ethLibc()...)
	a = append(a, e.libgcc()...)
	return cmd{dir, append(a, "-o", filepath.Join(dir, p.name+".elf"))}
}

// ethLibc is the C library the active-erisc firmware links with stock GCC
// (-nostdlib): active_erisc-crt0.cc calls setjmp. It is picolibc's
// rv32im/ilp32 libc.a beside the picolibc headers of the toolchain's
// system includes (Debian: picolibc-riscv64-unknown-elf).
func (e *Env) ethLibc() []string {
	if !e.stock() {
		return nil
	}
	for _, d := range e.Toolchain.SysIncludes {
		if filepath.Base(filepath.Dir(d)) == "picolibc" || strings.Contains(d, "/picolibc/") {
			return []string{filepath.Join(filepath.Dir(d), "lib", "release", "rv32im", "ilp32", "libc.a")}
		}
	}
	return nil
}

// ethFirmwareHash keys the ethernet firmware cache: the Tensix firmware's
// key (toolchain, tree, its commands) and the ethernet commands.
func (e *Env) ethFirmwareHash() (string, error) {
	th, err := e.firmwareHash()
	if err != nil {
		return "", err
	}
	h := sha256.New()
	fmt.Fprintf(h, "eth\x00%s\x00", th)
	for _, p := range ethProcs {
		for _, s := range p.fwSrcs {
			fmt.Fprintln(h, e.fwCompileSrcCmd(p, "@", "", nil, s[0], s[1]).Args)
		}
		fmt.Fprintln(h, e.ethFwLinkCmd(p, "@", "@fw").Args)
		for _, kind := range []string{"firmware", "kernel"} {
			fmt.Fprintln(h, e.ldScriptCmd(kind, p, "@").Args)
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:24], nil
}

func checkEthFirmwareDir(dir string) error {
	for _, f := range EthFirmwareFiles() {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			return fmt.Errorf("jit: ethernet firmware directory %s has no %s", dir, f)
		}
	}
	return nil
}

// EthFirmware returns the active-erisc firmware directory: Env.EthFirmwareDir
// when set (checked), else <cache>/firmware-eth/<hash>, built on first use
// (it needs the Tensix firmware's substitutes.o and tmu-crt0.o). Layout,
// for p in active_erisc (ERISC0) and subordinate_erisc (ERISC1):
// p/p.elf and p/p_weakened.elf, ld/{firmware,kernel}_p.ld,
// lib/substitutes.o and lib/tmu-crt0.o.
func EthFirmware(e *Env) (string, error) {
	if e.EthFirmwareDir != "" {
		return e.EthFirmwareDir, checkEthFirmwareDir(e.EthFirmwareDir)
	}
	tfw, err := Firmware(e)
	if err != nil {
		return "", err
	}
	cache, err := e.cacheDir()
	if err != nil {
		return "", err
	}
	h, err := e.ethFirmwareHash()
	if err != nil {
		return "", fmt.Errorf("jit: ethernet firmware: hashing inputs: %v", err)
	}
	dir := filepath.Join(cache, "firmware-eth", h)
	if checkEthFirmwareDir(dir) == nil {
		return dir, nil
	}
	tmp := fmt.Sprintf("%s.tmp%d", dir, os.Getpid())
	os.RemoveAll(tmp)
	defer os.RemoveAll(tmp)
	if err := e.buildEthFirmware(tmp, tfw); err != nil {
		return "", err
	}
	os.RemoveAll(dir)
	if err := os.Rename(tmp, dir); err != nil {
		return "", fmt.Errorf("jit: ethernet firmware: %v", err)
	}
	return dir, nil
}

func (e *Env) buildEthFirmware(dir, tensixFW string) error {
	fail := func(what string, err error) error { return fmt.Errorf("jit: ethernet firmware %s: %v", what, err) }
	for _, d := range []string{"ld", "lib", ethProcs[0].name, ethProcs[1].name} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return fail("", err)
		}
	}
	for _, f := range []string{"substitutes.o", "tmu-crt0.o"} {
		b, err := os.ReadFile(filepath.Join(tensixFW, "lib", f))
		if err != nil {
			return fail("", err)
		}
		if err := os.WriteFile(filepath.Join(dir, "lib", f), b, 0o644); err != nil {
			return fail("", err)
		}
	}
	for _, p := range ethProcs {
		pd := filepath.Join(dir, p.name)
		for _, kind := range []string{"firmware", "kernel"} {
			if _, err := e.run(e.ldScriptCmd(kind, p, filepath.Join(dir, "ld", kind+"_"+p.name+".ld"))); err != nil {
				return fail(p.name+" linker script", err)
			}
		}
		for _, s := range p.fwSrcs {
			if _, err := e.run(e.fwCompileSrcCmd(p, pd, "", nil, s[0], s[1])); err != nil {
				return fail(s[0]+" compile", err)
			}
		}
		if _, err := e.run(e.ethFwLinkCmd(p, pd, dir)); err != nil {
			return fail(p.name+" link", err)
		}
		elfPath := filepath.Join(pd, p.name+".elf")
		b, err := os.ReadFile(elfPath)
		if err != nil {
			return fail("", err)
		}
		if p.index == EthImage {
			if err := CheckEthFirmware(b); err != nil {
				return fail(elfPath, err)
			}
		}
		args, err := weakenArgs(b)
		if err != nil {
			return fail("weaken "+elfPath, err)
		}
		if _, err := e.run(cmd{pd, append(append([]string{e.Toolchain.Objcopy}, args...), elfPath, filepath.Join(pd, p.name+"_weakened.elf"))}); err != nil {
			return fail("weaken", err)
		}
	}
	return nil
}

// CheckEthFirmware returns nil when the active-erisc firmware ELF b
// defines every EthFirmwareSymbols global at the address ttsim sets it
// at, else an error naming the first that is missing or elsewhere.
func CheckEthFirmware(b []byte) error {
	f, err := elf.NewFile(bytes.NewReader(b))
	if err != nil {
		return err
	}
	syms, err := f.Symbols()
	if err != nil {
		return err
	}
	at := map[string]uint32{}
	for _, s := range syms {
		at[s.Name] = uint32(s.Value)
	}
	for _, n := range slices.Sorted(maps.Keys(EthFirmwareSymbols)) {
		want := EthFirmwareSymbols[n]
		got, ok := at[n]
		if !ok {
			return fmt.Errorf("the active-erisc firmware has no symbol %s (ttsim sets it at %#x)", n, want)
		}
		if got != want {
			return fmt.Errorf("the active-erisc firmware places %s at %#x; ttsim sets it at %#x, so a kernel linked against it would read its runtime args from the wrong word", n, got, want)
		}
	}
	return nil
}
