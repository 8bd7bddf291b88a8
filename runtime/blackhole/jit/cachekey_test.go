package jit

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tcc-dev/tcc/codegen/hostcfg"
)

// TestKernelHashAnyBuildDir: the same kernel written into two build
// directories (each run of tcc writes its build into a new temporary one)
// has one cache key, so a second run reuses the first's images; another
// source has another.
func TestKernelHashAnyBuildDir(t *testing.T) {
	fw := t.TempDir()
	for _, f := range FirmwareFiles() {
		p := filepath.Join(fw, f)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(f), 0o644))
	}
	e := stockEnv()
	e.TTMetalHome = "" // no tree to hash
	p := &hostcfg.ProgramConfig{Program: "copy"}
	k := &hostcfg.KernelConfig{Name: "reader", Source: "kernels/reader.cpp", Processor: "RISCV_0"}
	key := func(src string) string {
		dir := t.TempDir()
		require.NoError(t, os.MkdirAll(filepath.Join(dir, "kernels"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, k.Source), []byte(src), 0o644))
		j, err := e.prepareKernel(dir, p, k)
		require.NoError(t, err)
		require.Contains(t, j.files["kernel_includes.hpp"], dir, "the generated files name the build directory")
		h, err := e.kernelHash(j, k, fw)
		require.NoError(t, err)
		return h
	}
	src := "void kernel_main() {}\n"
	a, b := key(src), key(src)
	require.Equal(t, a, b, "one kernel in two build directories")
	require.NotEqual(t, a, key("void kernel_main() { int x = 1; (void)x; }\n"), "another source")
}
