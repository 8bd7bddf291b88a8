package jit

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

//go:embed sfpi_stub.h
var sfpiStub string

// TTSimHeaderName is the header compute kernels built for ttsim
// force-include (Env.TTSim), written into each kernel's build directory.
const TTSimHeaderName = "ttsim.h"

//go:embed ttsim.h
var ttsimHeader string

// buildVersion changes whenever the recipe changes in a way the hashed
// inputs do not show.
const buildVersion = "tcc-jit-1"

// sfpiGuard is sfpi.h's "no SFPI builtins" check, disabled in the overlay
// copy used with stock GCC (the stub declares the builtins).
const (
	sfpiGuard        = "#if !__has_builtin(__builtin_rvtt_synth_opcode)"
	sfpiGuardPatched = "#if 0 /* tcc jit: stock GCC lacks the rvtt builtins; sfpi_stub.h declares them */"
)

func (e *Env) cacheDir() (string, error) {
	if e.CacheDir != "" {
		return e.CacheDir, nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("jit: no cache directory (set Env.CacheDir): %v", err)
	}
	return filepath.Join(d, "tcc", "jit"), nil
}

func (e *Env) logf(format string, a ...any) {
	if e.Log != nil {
		fmt.Fprintf(e.Log, format, a...)
	}
}

// run runs c; the error carries the command and its output.
func (e *Env) run(c cmd) (string, error) {
	e.logf("+ %s\n", c)
	x := exec.Command(c.Args[0], c.Args[1:]...)
	x.Dir = c.Dir
	var out bytes.Buffer
	x.Stdout, x.Stderr = &out, &out
	err := x.Run()
	if err != nil {
		return out.String(), fmt.Errorf("%s: %v\n%s", c, err, tail(out.String(), 40))
	}
	return out.String(), nil
}

func tail(s string, n int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}

var treeHashes sync.Map // dir -> string

// hashedTreeDirs are the parts of a tt-metal tree firmware and kernels
// include from.
var hashedTreeDirs = []string{"tt_metal/hw", "tt_metal/api", "tt_metal/include", "tt_metal/hostdevcommon",
	"tt_metal/third_party/tt_llk/tt_llk_blackhole", "tt_metal/third_party/umd/device/blackhole"}

// treeHash is a content hash of the source files under dir's hashed
// subdirectories (memoized per process).
func treeHash(dir string, subdirs []string) (string, error) {
	key := dir + "\x00" + strings.Join(subdirs, "\x00")
	if v, ok := treeHashes.Load(key); ok {
		return v.(string), nil
	}
	h := sha256.New()
	for _, sd := range subdirs {
		base := filepath.Join(dir, sd)
		if _, err := os.Stat(base); err != nil {
			continue
		}
		err := filepath.WalkDir(base, func(p string, de fs.DirEntry, err error) error {
			if err != nil || de.IsDir() {
				return err
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(dir, p)
			fmt.Fprintf(h, "%s\x00%d\x00", rel, len(b))
			h.Write(b)
			return nil
		})
		if err != nil {
			return "", err
		}
	}
	s := hex.EncodeToString(h.Sum(nil))
	treeHashes.Store(key, s)
	return s, nil
}

func (e *Env) toolchainID() string {
	tc := e.Toolchain
	return strings.Join(append([]string{tc.Kind.String(), tc.GXX, tc.Version, tc.LibGCC}, tc.SysIncludes...), "\x00")
}

// firmwareHash keys the firmware cache.
func (e *Env) firmwareHash() (string, error) {
	tree, err := treeHash(e.TTMetalHome, hashedTreeDirs)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%s\x00", buildVersion, e.toolchainID(), tree)
	if sfpi, err := e.sfpiInclude(); err == nil {
		st, err := treeHash(sfpi, []string{"."})
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s\x00", st)
	}
	// the command lines with a placeholder output directory
	for _, p := range procs {
		fmt.Fprintln(h, e.fwCompileCmd(p, "@", "@stub", []string{"@sfpi"}).Args, e.fwLinkCmd(p, "@", "@fw").Args)
	}
	for _, c := range e.hwLibCmds("@") {
		fmt.Fprintln(h, c.Args)
	}
	h.Write([]byte(sfpiStub))
	return hex.EncodeToString(h.Sum(nil))[:24], nil
}

// FirmwareFiles are the files of a firmware directory kernels link with,
// relative to it.
func FirmwareFiles() []string {
	f := []string{"lib/noc.o", "lib/substitutes.o", "lib/tmu-crt0.o"}
	for _, p := range procs {
		f = append(f, "ld/kernel_"+p.name+".ld", p.name+"/"+p.name+".elf", p.name+"/"+p.name+"_weakened.elf")
	}
	return f
}

func checkFirmwareDir(dir string) error {
	for _, f := range FirmwareFiles() {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			return fmt.Errorf("jit: firmware directory %s has no %s", dir, f)
		}
	}
	return nil
}

func (e *Env) check() error {
	if e.Toolchain == nil {
		return fmt.Errorf("jit: Env has no Toolchain (use FindToolchain)")
	}
	return CheckTTMetalHome(e.TTMetalHome)
}

// Firmware returns the firmware directory: Env.FirmwareDir when set
// (checked), else <cache>/firmware/<hash>, built on first use. Layout:
// <dir>/<proc>/<proc>.elf and <proc>_weakened.elf for brisc, ncrisc,
// trisc0..2, plus ld/{firmware,kernel}_<proc>.ld and lib/{noc,substitutes,tmu-crt0}.o.
func Firmware(e *Env) (string, error) {
	if e.FirmwareDir != "" {
		return e.FirmwareDir, checkFirmwareDir(e.FirmwareDir)
	}
	if err := e.check(); err != nil {
		return "", err
	}
	cache, err := e.cacheDir()
	if err != nil {
		return "", err
	}
	h, err := e.firmwareHash()
	if err != nil {
		return "", fmt.Errorf("jit: firmware: hashing inputs: %v", err)
	}
	dir := filepath.Join(cache, "firmware", h)
	if checkFirmwareDir(dir) == nil {
		return dir, nil
	}
	tmp := fmt.Sprintf("%s.tmp%d", dir, os.Getpid())
	os.RemoveAll(tmp)
	defer os.RemoveAll(tmp) // gone once renamed into the cache
	if err := e.buildFirmware(tmp); err != nil {
		return "", err
	}
	os.RemoveAll(dir)
	if err := os.Rename(tmp, dir); err != nil {
		return "", fmt.Errorf("jit: firmware: %v", err)
	}
	return dir, nil
}

// writeSFPIOverlay writes, for stock GCC, the stub header and an overlay
// sfpi.h with the builtins guard disabled into dir; it returns the stub
// path and the sfpi include dirs (overlay first).
func (e *Env) writeSFPIOverlay(dir string) (stub string, incs []string, err error) {
	sfpi, err := e.sfpiInclude()
	if err != nil {
		return "", nil, err
	}
	if !e.stock() {
		return "", []string{sfpi}, nil
	}
	b, err := os.ReadFile(filepath.Join(sfpi, "sfpi.h"))
	if err != nil {
		return "", nil, err
	}
	ov := filepath.Join(dir, "sfpi-overlay")
	if err := os.MkdirAll(ov, 0o755); err != nil {
		return "", nil, err
	}
	patched := strings.Replace(string(b), sfpiGuard, sfpiGuardPatched, 1)
	if err := os.WriteFile(filepath.Join(ov, "sfpi.h"), []byte(patched), 0o644); err != nil {
		return "", nil, err
	}
	stub = filepath.Join(dir, "sfpi_stub.h")
	if err := os.WriteFile(stub, []byte(sfpiStub), 0o644); err != nil {
		return "", nil, err
	}
	return stub, []string{ov, sfpi}, nil
}

func (e *Env) buildFirmware(dir string) error {
	fail := func(what string, err error) error { return fmt.Errorf("jit: firmware %s: %v", what, err) }
	for _, d := range []string{"ld", "lib"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return fail("", err)
		}
	}
	for _, p := range procs {
		for _, kind := range []string{"firmware", "kernel"} {
			if _, err := e.run(e.ldScriptCmd(kind, p, filepath.Join(dir, "ld", kind+"_"+p.name+".ld"))); err != nil {
				return fail(p.name+" linker script", err)
			}
		}
	}
	for _, c := range e.hwLibCmds(filepath.Join(dir, "lib")) {
		if _, err := e.run(c); err != nil {
			return fail("hw objects", err)
		}
	}
	stub, sfpi, err := e.writeSFPIOverlay(filepath.Join(dir, "sfpi"))
	if err != nil {
		return fail("trisc", err)
	}
	for _, p := range procs {
		pd := filepath.Join(dir, p.name)
		if err := os.MkdirAll(pd, 0o755); err != nil {
			return fail(p.name, err)
		}
		if _, err := e.run(e.fwCompileCmd(p, pd, stub, sfpi)); err != nil {
			return fail(p.name+" compile", err)
		}
		if _, err := e.run(e.fwLinkCmd(p, pd, dir)); err != nil {
			return fail(p.name+" link", err)
		}
		elfPath := filepath.Join(pd, p.name+".elf")
		b, err := os.ReadFile(elfPath)
		if err != nil {
			return fail(p.name, err)
		}
		args, err := weakenArgs(b)
		if err != nil {
			return fail(p.name+" weaken "+elfPath, err)
		}
		weak := filepath.Join(pd, p.name+"_weakened.elf")
		if _, err := e.run(cmd{pd, append(append([]string{e.Toolchain.Objcopy}, args...), elfPath, weak)}); err != nil {
			return fail(p.name+" weaken", err)
		}
	}
	return nil
}

// dirHash hashes the named files of dir.
func dirHash(dir string, files []string) (string, error) {
	h := sha256.New()
	for _, f := range files {
		fh, err := os.Open(filepath.Join(dir, f))
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s\x00", f)
		_, err = io.Copy(h, fh)
		fh.Close()
		if err != nil {
			return "", err
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
