package jit

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Kind says which compiler a Toolchain is.
type Kind int

const (
	// SFPI is tt-metal's riscv-tt-elf-g++, which knows -mcpu=tt-bh and the
	// SFPU builtins.
	SFPI Kind = iota
	// Stock is a stock riscv64-unknown-elf-g++ (Debian's
	// gcc-riscv64-unknown-elf); compute kernels that use the SFPU cannot be
	// built with it.
	Stock
)

func (k Kind) String() string {
	if k == SFPI {
		return "SFPI"
	}
	return "stock"
}

// DefaultStockGCC is the stock compiler looked up on PATH when neither the
// caller nor TCC_RISCV_GCC names one.
const DefaultStockGCC = "riscv64-unknown-elf-g++"

// Debian packages a stock toolchain needs.
const (
	pkgGCC      = "gcc-riscv64-unknown-elf"
	pkgPicolibc = "picolibc-riscv64-unknown-elf"
	pkgNewlibCC = "libstdc++-arm-none-eabi-newlib"
)

// Toolchain is a RISC-V C++ compiler and what is needed to use it.
type Toolchain struct {
	Kind Kind
	// GXX is the absolute path of the C++ driver, Objcopy of the objcopy
	// next to it.
	GXX     string
	Objcopy string
	// Version is the first line of `GXX --version`.
	Version string
	// LibGCC is the rv32im/ilp32 libgcc.a linked by path (stock only).
	LibGCC string
	// SysIncludes are the -isystem directories: newlib libstdc++ and
	// picolibc (stock only).
	SysIncludes []string
}

// ToolchainOptions control FindToolchain. Zero values mean the real
// environment; the function fields let tests fake it.
type ToolchainOptions struct {
	// TTMetalHome is the tt-metal tree whose runtime/sfpi is searched.
	TTMetalHome string
	// StockGCC names the stock compiler (flag value); empty means env
	// TCC_RISCV_GCC, then DefaultStockGCC.
	StockGCC string
	// NoSFPI skips the SFPI compiler even when present.
	NoSFPI bool

	Getenv   func(string) string
	LookPath func(string) (string, error)
	Exists   func(string) bool
	// Output runs a command and returns its stdout.
	Output func(name string, args ...string) (string, error)
}

func (o *ToolchainOptions) fill() {
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	if o.LookPath == nil {
		o.LookPath = exec.LookPath
	}
	if o.Exists == nil {
		o.Exists = func(p string) bool { _, err := os.Stat(p); return err == nil }
	}
	if o.Output == nil {
		o.Output = func(name string, args ...string) (string, error) {
			b, err := exec.Command(name, args...).Output()
			return string(b), err
		}
	}
}

// SFPICompilerPaths are where the SFPI compiler is looked for, in order.
func SFPICompilerPaths(ttMetalHome string) []string {
	var p []string
	if ttMetalHome != "" {
		p = append(p, filepath.Join(ttMetalHome, "runtime/sfpi/compiler/bin/riscv-tt-elf-g++"))
	}
	return append(p, "/opt/tenstorrent/sfpi/compiler/bin/riscv-tt-elf-g++")
}

// Debian's newlib libstdc++ and picolibc header directories (GCC 12).
var stockSysIncludes = []struct{ dir, pkg string }{
	{"/usr/include/newlib/c++/12.2.1", pkgNewlibCC},
	{"/usr/include/newlib/c++/12.2.1/arm-none-eabi", pkgNewlibCC},
	{"/usr/lib/picolibc/riscv64-unknown-elf/include", pkgPicolibc},
}

const debianLibGCC = "/usr/lib/gcc/riscv64-unknown-elf/12.2.0/rv32im/ilp32/libgcc.a"

// FindToolchain finds the compiler: the SFPI compiler when present, else
// the stock one. Errors name what to install.
func FindToolchain(o ToolchainOptions) (*Toolchain, error) {
	o.fill()
	if !o.NoSFPI {
		for _, p := range SFPICompilerPaths(o.TTMetalHome) {
			if o.Exists(p) {
				return finish(&Toolchain{Kind: SFPI, GXX: p, Objcopy: sibling(p, "objcopy")}, o)
			}
		}
	}
	name := o.StockGCC
	if name == "" {
		name = o.Getenv("TCC_RISCV_GCC")
	}
	if name == "" {
		name = DefaultStockGCC
	}
	gxx, err := o.LookPath(name)
	if err != nil {
		return nil, fmt.Errorf("jit: no RISC-V compiler: SFPI compiler not found (%s) and stock %q not found: %v; install tt-metal's SFPI toolchain or the Debian package %s (or name a compiler with TCC_RISCV_GCC)",
			strings.Join(SFPICompilerPaths(o.TTMetalHome), ", "), name, err, pkgGCC)
	}
	if abs, err := filepath.Abs(gxx); err == nil {
		gxx = abs
	}
	tc := &Toolchain{Kind: Stock, GXX: gxx, Objcopy: sibling(gxx, "objcopy")}
	lib, _ := o.Output(gxx, "-march=rv32im", "-mabi=ilp32", "-print-file-name=libgcc.a")
	lib = strings.TrimSpace(lib)
	if !filepath.IsAbs(lib) || !o.Exists(lib) {
		lib = debianLibGCC
	}
	if !o.Exists(lib) {
		return nil, fmt.Errorf("jit: stock compiler %s: no rv32im/ilp32 libgcc.a (tried -print-file-name and %s); install the Debian package %s", gxx, debianLibGCC, pkgGCC)
	}
	tc.LibGCC = lib
	var missing []string
	for _, s := range stockSysIncludes {
		if !o.Exists(s.dir) {
			missing = append(missing, fmt.Sprintf("%s (Debian package %s)", s.dir, s.pkg))
		}
		tc.SysIncludes = append(tc.SysIncludes, s.dir)
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("jit: stock compiler %s needs newlib C++ and picolibc headers; missing %s; install %s and %s",
			gxx, strings.Join(missing, ", "), pkgNewlibCC, pkgPicolibc)
	}
	return finish(tc, o)
}

// sibling is the binutils tool next to a g++ driver: .../riscv64-unknown-elf-g++
// -> .../riscv64-unknown-elf-objcopy.
func sibling(gxx, tool string) string {
	dir, base := filepath.Split(gxx)
	if i := strings.LastIndex(base, "-"); i >= 0 {
		return filepath.Join(dir, base[:i+1]+tool)
	}
	return filepath.Join(dir, tool)
}

func finish(tc *Toolchain, o ToolchainOptions) (*Toolchain, error) {
	out, err := o.Output(tc.GXX, "--version")
	if err != nil {
		return nil, fmt.Errorf("jit: %s --version: %v", tc.GXX, err)
	}
	tc.Version = strings.TrimSpace(strings.SplitN(out, "\n", 2)[0])
	if !o.Exists(tc.Objcopy) {
		return nil, fmt.Errorf("jit: %s compiler %s has no %s next to it", tc.Kind, tc.GXX, filepath.Base(tc.Objcopy))
	}
	return tc, nil
}

// ErrNoTTMetal is returned (wrapped) when TT_METAL_HOME is unset or wrong.
var ErrNoTTMetal = errors.New("TT_METAL_HOME not set or not a tt-metal tree")

// CheckTTMetalHome checks that dir is a tt-metal source tree.
func CheckTTMetalHome(dir string) error {
	if dir == "" {
		return fmt.Errorf("jit: %w: set TT_METAL_HOME to a tt-metal checkout (tt-metal@923191064229)", ErrNoTTMetal)
	}
	p := filepath.Join(dir, "tt_metal/hw/firmware/src/tt-1xx/brisc.cc")
	if _, err := os.Stat(p); err != nil {
		return fmt.Errorf("jit: %w: %s has no %s", ErrNoTTMetal, dir, "tt_metal/hw/firmware/src/tt-1xx/brisc.cc")
	}
	return nil
}
