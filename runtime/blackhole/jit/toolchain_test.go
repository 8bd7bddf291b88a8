package jit

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeFS answers FindToolchain's questions from a set of existing paths.
func fakeOpts(exists []string, path map[string]string, env map[string]string) ToolchainOptions {
	set := map[string]bool{}
	for _, p := range exists {
		set[p] = true
	}
	return ToolchainOptions{
		TTMetalHome: "/tt",
		Getenv:      func(k string) string { return env[k] },
		LookPath: func(n string) (string, error) {
			if p, ok := path[n]; ok {
				return p, nil
			}
			return "", errors.New("executable file not found in $PATH")
		},
		Exists: func(p string) bool { return set[p] },
		Output: func(name string, args ...string) (string, error) {
			if args[len(args)-1] == "--version" {
				return filepath.Base(name) + " (fake) 12.2.0\nCopyright\n", nil
			}
			return "/lib/rv32im/ilp32/libgcc.a\n", nil
		},
	}
}

func TestFindToolchain(t *testing.T) {
	sfpi := "/tt/runtime/sfpi/compiler/bin/riscv-tt-elf-g++"
	stock := "/usr/bin/riscv64-unknown-elf-g++"
	headers := []string{"/usr/include/newlib/c++/12.2.1", "/usr/include/newlib/c++/12.2.1/arm-none-eabi", "/usr/lib/picolibc/riscv64-unknown-elf/include"}
	stockFiles := append([]string{stock, "/usr/bin/riscv64-unknown-elf-objcopy", "/lib/rv32im/ilp32/libgcc.a"}, headers...)
	onPath := map[string]string{DefaultStockGCC: stock}
	for _, tc := range []struct {
		name     string
		exists   []string
		path     map[string]string
		env      map[string]string
		stockGCC string
		wantKind Kind
		wantGXX  string
		wantErr  []string
	}{
		{name: "sfpi preferred", exists: append([]string{sfpi, "/tt/runtime/sfpi/compiler/bin/riscv-tt-elf-objcopy"}, stockFiles...), path: onPath, wantKind: SFPI, wantGXX: sfpi},
		{name: "opt sfpi", exists: []string{"/opt/tenstorrent/sfpi/compiler/bin/riscv-tt-elf-g++", "/opt/tenstorrent/sfpi/compiler/bin/riscv-tt-elf-objcopy"}, wantKind: SFPI, wantGXX: "/opt/tenstorrent/sfpi/compiler/bin/riscv-tt-elf-g++"},
		{name: "stock", exists: stockFiles, path: onPath, wantKind: Stock, wantGXX: stock},
		{name: "env names the compiler", exists: append(stockFiles, "/x/riscv64-unknown-elf-objcopy"), path: map[string]string{"my-gcc": "/x/riscv64-unknown-elf-g++"},
			env: map[string]string{"TCC_RISCV_GCC": "my-gcc"}, wantKind: Stock, wantGXX: "/x/riscv64-unknown-elf-g++"},
		{name: "flag beats env", exists: stockFiles, path: map[string]string{"flag-gcc": stock}, env: map[string]string{"TCC_RISCV_GCC": "env-gcc"},
			stockGCC: "flag-gcc", wantKind: Stock, wantGXX: stock},
		{name: "no compiler", wantErr: []string{"riscv-tt-elf-g++", `"riscv64-unknown-elf-g++" not found`, "gcc-riscv64-unknown-elf", "TCC_RISCV_GCC"}},
		{name: "no newlib headers", exists: []string{stock, "/usr/bin/riscv64-unknown-elf-objcopy", "/lib/rv32im/ilp32/libgcc.a", headers[2]}, path: onPath,
			wantErr: []string{"/usr/include/newlib/c++/12.2.1 (Debian package libstdc++-arm-none-eabi-newlib)", "picolibc-riscv64-unknown-elf"}},
		{name: "no picolibc", exists: []string{stock, "/usr/bin/riscv64-unknown-elf-objcopy", "/lib/rv32im/ilp32/libgcc.a", headers[0], headers[1]}, path: onPath,
			wantErr: []string{"/usr/lib/picolibc/riscv64-unknown-elf/include (Debian package picolibc-riscv64-unknown-elf)"}},
		{name: "no libgcc", exists: append([]string{stock, "/usr/bin/riscv64-unknown-elf-objcopy"}, headers...), path: onPath,
			wantErr: []string{"libgcc.a", "gcc-riscv64-unknown-elf"}},
		{name: "no objcopy", exists: []string{stock, "/lib/rv32im/ilp32/libgcc.a", headers[0], headers[1], headers[2]}, path: onPath,
			wantErr: []string{"riscv64-unknown-elf-objcopy"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := fakeOpts(tc.exists, tc.path, tc.env)
			o.StockGCC = tc.stockGCC
			got, err := FindToolchain(o)
			if tc.wantErr != nil {
				if err == nil {
					t.Fatalf("no error, toolchain %+v", got)
				}
				for _, w := range tc.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not mention %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Kind != tc.wantKind || got.GXX != tc.wantGXX || !strings.Contains(got.Version, "12.2.0") {
				t.Errorf("got %+v, want kind %v gxx %s", got, tc.wantKind, tc.wantGXX)
			}
			if got.Kind == Stock && (got.LibGCC != "/lib/rv32im/ilp32/libgcc.a" || len(got.SysIncludes) != 3) {
				t.Errorf("stock toolchain %+v", got)
			}
		})
	}
}

func TestCheckTTMetalHome(t *testing.T) {
	good := t.TempDir()
	if err := os.MkdirAll(filepath.Join(good, "tt_metal/hw/firmware/src/tt-1xx"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(good, "tt_metal/hw/firmware/src/tt-1xx/brisc.cc"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, dir, want string
	}{
		{"unset", "", "set TT_METAL_HOME"},
		{"not a tree", t.TempDir(), "has no tt_metal/hw/firmware/src/tt-1xx/brisc.cc"},
		{"good", good, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckTTMetalHome(tc.dir)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, ErrNoTTMetal) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
}
