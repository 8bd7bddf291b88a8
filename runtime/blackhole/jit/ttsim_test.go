package jit

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTTSimHeaderIncluded: a compute kernel built for ttsim (Env.TTSim)
// force-includes ttsim.h from its build directory, right after the SFPI
// stub; data-movement kernels and builds for a card do not.
func TestTTSimHeaderIncluded(t *testing.T) {
	for _, tc := range []struct {
		name  string
		ttsim bool
		p     proc
		want  bool
	}{
		{"compute for ttsim", true, procs[TRISC0], true},
		{"pack for ttsim", true, procs[TRISC2], true},
		{"reader for ttsim", true, procs[NCRISC], false},
		{"compute for a card", false, procs[TRISC1], false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := stockEnv()
			e.TTSim = tc.ttsim
			args := e.kernelCompileCmd(tc.p, "/k", "/src", "/k/sfpi_stub.h", nil, "", nil, 0, nil).Args
			i := slices.Index(args, filepath.Join("/k", TTSimHeaderName))
			if got := i > 0 && args[i-1] == "-include"; got != tc.want {
				t.Errorf("-include /k/%s: %v, want %v in %v", TTSimHeaderName, got, tc.want, args)
			}
		})
	}
}

// TestTTSimHeaderRedirects compiles ttsim.h with the host's g++ against a
// stand-in tensix.h that defines DBG_FEATURE_DISABLE's address as
// tt-metal's does: after the force-include the register's macro names the
// header's variable, so tt-llk's writes (reg_write and memory_write take
// the address as a uint32_t) go there and never reach ttsim, which stops
// on a non-zero write of the register.
func TestTTSimHeaderRedirects(t *testing.T) {
	gxx, err := exec.LookPath("g++")
	if err != nil {
		t.Skip("g++ not on PATH")
	}
	dir := t.TempDir()
	files := map[string]string{
		TTSimHeaderName: ttsimHeader,
		"tensix.h": "#ifndef TENSIX_H_INCLUDED\n#define TENSIX_H_INCLUDED\n#include <cstdint>\n" +
			"#define RISCV_DEBUG_REGS_START_ADDR 0xFFB12000\n" +
			"#define RISCV_DEBUG_REG_DBG_FEATURE_DISABLE (RISCV_DEBUG_REGS_START_ADDR | 0x68)\n#endif\n",
		"main.cpp": `#include "tensix.h"
#include <cstdio>
int main() {
    std::uint32_t reg = RISCV_DEBUG_REG_DBG_FEATURE_DISABLE;
    if (reg == 0xFFB12068u) { std::puts("register"); return 1; }
    if (reg != (std::uint32_t)(std::uintptr_t)&tcc_ttsim_dbg_feature_disable) { std::puts("elsewhere"); return 1; }
    std::puts("variable");
    return 0;
}
`,
	}
	for n, c := range files {
		require.NoError(t, os.WriteFile(filepath.Join(dir, n), []byte(c), 0o644))
	}
	bin := filepath.Join(dir, "main")
	out, err := exec.Command(gxx, "-std=c++17", "-Wall", "-Werror", "-I", dir, "-include", filepath.Join(dir, TTSimHeaderName),
		"-o", bin, filepath.Join(dir, "main.cpp")).CombinedOutput()
	require.NoError(t, err, "g++:\n%s", out)
	out, err = exec.Command(bin).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "variable" {
		t.Errorf("DBG_FEATURE_DISABLE's macro after ttsim.h points at %q (%v), want the header's variable", strings.TrimSpace(string(out)), err)
	}
}
