package jit

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/tcc-dev/tcc/codegen/hostcfg"
)

// Images are a kernel's position-independent images by processor index
// (BRISC, NCRISC, TRISC0..2); nil for a processor the kernel does not run
// on.
type Images [NumProcessors][]byte

// NeedsSFPUError is returned for a compute kernel that uses the SFPU and
// so cannot be built with stock GCC.
type NeedsSFPUError struct {
	Program, Kernel string
	// Detail is the first undefined SFPI reference the linker reported.
	Detail string
}

func (e *NeedsSFPUError) Error() string {
	return fmt.Sprintf("jit: program %q kernel %q needs the SFPU (%s); stock GCC cannot build it: install tt-metal's SFPI toolchain (riscv-tt-elf-g++ under $TT_METAL_HOME/runtime/sfpi or /opt/tenstorrent/sfpi)",
		e.Program, e.Kernel, e.Detail)
}

// localIncludeRE matches an include of a file beside the kernel source.
var localIncludeRE = regexp.MustCompile(`(?m)^\s*#\s*include\s+"([^"/]+)"`)

var undefinedSFPI = regexp.MustCompile(`undefined reference to [^\n]*(__builtin_rvtt_|sfpi)[^\n]*`)

// kernelProcs are the processors kernel k runs on.
func kernelProcs(k *hostcfg.KernelConfig) ([]proc, error) {
	if k.Ethernet != nil {
		switch p := k.Ethernet.Processor; p {
		case "RISCV_0":
			return []proc{ethProc}, nil
		case "RISCV_1":
			return []proc{eth1Proc}, nil
		default:
			return nil, fmt.Errorf("ethernet kernel on processor %s (want RISCV_0, ERISC0, or RISCV_1, ERISC1)", p)
		}
	}
	if k.Compute != nil || k.Processor == "compute" {
		if k.Compute == nil {
			return nil, fmt.Errorf("processor compute without a compute config")
		}
		return procs[TRISC0:], nil
	}
	switch k.Processor {
	case "RISCV_0":
		return procs[BRISC : BRISC+1], nil
	case "RISCV_1":
		return procs[NCRISC : NCRISC+1], nil
	}
	return nil, fmt.Errorf("unknown processor %q (want RISCV_0, RISCV_1 or compute)", k.Processor)
}

// kernelJob is everything one kernel build needs, computed before any
// command runs.
type kernelJob struct {
	procs  []proc
	srcAbs string
	files  map[string]string
	ct     []uint32
	noc    int
	// shim are the GCC 12 include shim's files (stock GCC, compute).
	shim map[string]string
}

func (e *Env) prepareKernel(buildDir string, p *hostcfg.ProgramConfig, k *hostcfg.KernelConfig) (*kernelJob, error) {
	ps, err := kernelProcs(k)
	if err != nil {
		return nil, err
	}
	src := k.Source
	if !filepath.IsAbs(src) {
		src = filepath.Join(buildDir, src)
	}
	srcAbs, err := filepath.Abs(src)
	if err != nil {
		return nil, err
	}
	text, err := os.ReadFile(srcAbs)
	if err != nil {
		return nil, fmt.Errorf("kernel source: %v", err)
	}
	files, err := genFiles(p, k, srcAbs, string(text), e.TTSim)
	if err != nil {
		return nil, err
	}
	files["\x00source"] = string(text) // hashed, not written
	// The headers tcc writes beside the kernels (tcc_sfpu.h,
	// tcc_persist.h) are part of the source: hashed, not written.
	for _, m := range localIncludeRE.FindAllStringSubmatch(string(text), -1) {
		if h, err := os.ReadFile(filepath.Join(filepath.Dir(srcAbs), m[1])); err == nil {
			files["\x00include "+m[1]] = string(h)
		}
	}
	var shim map[string]string
	if ps[0].compute && e.stock() {
		if shim, err = gcc12Shim(e.TTMetalHome); err != nil {
			return nil, err
		}
	}
	ct, err := compileArgs(k)
	if err != nil {
		return nil, err
	}
	noc := ps[0].index
	if k.NoC != nil {
		noc = *k.NoC
	}
	return &kernelJob{procs: ps, srcAbs: srcAbs, files: files, ct: ct, noc: noc, shim: shim}, nil
}

// commands are the compile and link commands of job j in dir against
// firmware fw.
func (e *Env) commands(j *kernelJob, k *hostcfg.KernelConfig, dir, fw, stub string, sfpi []string, shim string) [][2]cmd {
	var cs [][2]cmd
	for _, p := range j.procs {
		cs = append(cs, [2]cmd{
			e.kernelCompileCmd(p, dir, filepath.Dir(j.srcAbs), stub, sfpi, shim, k.Defines, j.noc, j.ct),
			e.kernelLinkCmd(p, dir, fw),
		})
	}
	return cs
}

// BuildKernel builds kernel k of program p, whose source is relative to
// the tcc build directory buildDir, and returns its images. Builds are
// cached under <cache>/kernels/<hash>, the hash covering the source, the
// generated files, defines, compile args, command lines, firmware, tree
// and toolchain.
func BuildKernel(e *Env, buildDir string, p *hostcfg.ProgramConfig, k *hostcfg.KernelConfig) (Images, error) {
	var imgs Images
	fail := func(proc string, err error) error {
		if _, ok := err.(*NeedsSFPUError); ok {
			return err
		}
		if proc != "" {
			proc = " (" + proc + ")"
		}
		return fmt.Errorf("jit: program %q kernel %q%s: %w", p.Program, k.Name, proc, err)
	}
	if err := e.check(); err != nil {
		return Images{}, fail("", err)
	}
	j, err := e.prepareKernel(buildDir, p, k)
	if err != nil {
		return Images{}, fail(k.Processor, err)
	}
	fw, err := e.firmwareFor(j.procs[0])
	if err != nil {
		return Images{}, fail("", err)
	}
	key, err := e.kernelHash(j, k, fw)
	if err != nil {
		return Images{}, fail("", err)
	}
	cache, err := e.cacheDir()
	if err != nil {
		return Images{}, fail("", err)
	}
	dir := filepath.Join(cache, "kernels", key)
	if imgs, ok := readImages(dir, j.procs); ok {
		return imgs, nil
	}
	tmp := fmt.Sprintf("%s.tmp%d", dir, os.Getpid())
	os.RemoveAll(tmp)
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return Images{}, fail("", err)
	}
	defer os.RemoveAll(tmp) // gone once renamed into the cache
	for n, c := range j.files {
		if strings.HasPrefix(n, "\x00") {
			continue
		}
		if err := os.WriteFile(filepath.Join(tmp, n), []byte(c), 0o644); err != nil {
			return Images{}, fail("", err)
		}
	}
	var stub, shim string
	var sfpi []string
	if j.procs[0].compute {
		if stub, sfpi, err = e.writeSFPIOverlay(tmp); err != nil {
			return Images{}, fail("compute", err)
		}
		if shim, err = writeShim(tmp, j.shim); err != nil {
			return Images{}, fail("compute", err)
		}
		if e.TTSim {
			if err := os.WriteFile(filepath.Join(tmp, TTSimHeaderName), []byte(ttsimHeader), 0o644); err != nil {
				return Images{}, fail("compute", err)
			}
		}
	}
	for i, c := range e.commands(j, k, tmp, fw, stub, sfpi, shim) {
		pr := j.procs[i]
		if _, err := e.run(c[0]); err != nil {
			return Images{}, fail(strings.ToUpper(pr.name)+" compile", err)
		}
		out, err := e.run(c[1])
		if err != nil {
			if m := undefinedSFPI.FindString(out); pr.compute && e.stock() && m != "" {
				return Images{}, &NeedsSFPUError{Program: p.Program, Kernel: k.Name, Detail: strings.TrimSpace(m)}
			}
			return Images{}, fail(strings.ToUpper(pr.name)+" link", err)
		}
		elfPath := filepath.Join(tmp, pr.name+".elf")
		b, err := os.ReadFile(elfPath)
		if err != nil {
			return Images{}, fail(strings.ToUpper(pr.name), err)
		}
		img, err := XIP(b)
		if err != nil {
			return Images{}, fail(strings.ToUpper(pr.name)+" XIP of "+elfPath, err)
		}
		if err := os.WriteFile(filepath.Join(tmp, pr.name+".bin"), img, 0o644); err != nil {
			return Images{}, fail("", err)
		}
		imgs[pr.index] = img
	}
	os.RemoveAll(filepath.Join(tmp, shimDirName))
	os.RemoveAll(dir)
	if err := os.Rename(tmp, dir); err != nil {
		return Images{}, fail("", err)
	}
	return imgs, nil
}

// firmwareFor is the firmware directory kernels of p link against.
func (e *Env) firmwareFor(p proc) (string, error) {
	if p.eth {
		return EthFirmware(e)
	}
	return Firmware(e)
}

func readImages(dir string, ps []proc) (Images, bool) {
	var imgs Images
	for _, p := range ps {
		b, err := os.ReadFile(filepath.Join(dir, p.name+".bin"))
		if err != nil || len(b) == 0 {
			return imgs, false
		}
		imgs[p.index] = b
	}
	return imgs, true
}

func (e *Env) kernelHash(j *kernelJob, k *hostcfg.KernelConfig, fw string) (string, error) {
	files := FirmwareFiles()
	if j.procs[0].eth {
		files = EthFirmwareFiles()
	}
	fwh, err := dirHash(fw, files)
	if err != nil {
		return "", fmt.Errorf("hashing firmware %s: %v", fw, err)
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%s\x00", buildVersion, e.toolchainID(), fwh)
	if e.TTMetalHome != "" {
		th, err := treeHash(e.TTMetalHome, hashedTreeDirs)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s\x00", th)
	}
	if j.procs[0].compute {
		sfpi, err := e.sfpiInclude()
		if err != nil {
			return "", err
		}
		st, err := treeHash(sfpi, []string{"."})
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s\x00%s\x00", st, sfpiStub)
		if e.TTSim {
			fmt.Fprintf(h, "ttsim\x00%s\x00", ttsimHeader)
		}
	}
	// The build directory the source sits in is a new temporary
	// directory per run (runtime's buildDir): the generated files and the
	// command lines name it, the hash names it @src, so that the same
	// kernel hits the cache from any directory (its headers beside it are
	// hashed by content above).
	srcDir := filepath.Dir(j.srcAbs)
	anyDir := func(s string) string { return strings.ReplaceAll(s, srcDir, "@src") }
	for _, n := range slices.Sorted(maps.Keys(j.files)) {
		fmt.Fprintf(h, "%q\x00%q\x00", n, anyDir(j.files[n]))
	}
	shim := ""
	if len(j.shim) > 0 {
		shim = "@shim"
		for _, n := range slices.Sorted(maps.Keys(j.shim)) {
			fmt.Fprintf(h, "shim %q\x00%q\x00", n, j.shim[n])
		}
	}
	// defines, compile args and NoC appear in the command lines
	for _, c := range e.commands(j, k, "@", fw, "@stub", []string{"@sfpi"}, shim) {
		fmt.Fprintln(h, anyDir(fmt.Sprint(c[0].Args, c[1].Args)))
	}
	return hex.EncodeToString(h.Sum(nil))[:24], nil
}
