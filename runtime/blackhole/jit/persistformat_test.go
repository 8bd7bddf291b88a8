package jit

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tcc-dev/tcc/codegen/hostcfg"
)

// TestPersistentCBFormats: a merged kernel of a persistent program (no CB
// of its own in the program config) gets its data formats from the
// phases' CBs at their merged indices, only from CBs on its cores; two
// formats at one merged index are an error naming both phases.
func TestPersistentCBFormats(t *testing.T) {
	here := []hostcfg.CoreRange{{X0: 0, Y0: 0, X1: 0, Y1: 0}}
	there := []hostcfg.CoreRange{{X0: 1, Y0: 0, X1: 1, Y1: 0}}
	cb := func(index, merged, format int, cores []hostcfg.CoreRange) hostcfg.PhaseCBConfig {
		return hostcfg.PhaseCBConfig{CBConfig: hostcfg.CBConfig{Index: index, DataFormatCode: format, Cores: cores}, MergedIndex: merged}
	}
	k := &hostcfg.KernelConfig{Name: "persist_compute_2", Cores: here, Compute: &hostcfg.ComputeConfig{MathFidelity: "HiFi4"}}
	src := "void kernel_main() {\n}\n"
	t.Run("merged indices", func(t *testing.T) {
		p := &hostcfg.ProgramConfig{Program: "persistent", Persistent: &hostcfg.PersistentConfig{Phases: []hostcfg.PhaseConfig{
			{Index: 0, Name: "a", CBs: []hostcfg.PhaseCBConfig{cb(0, 2, fmtFloat16B, here), cb(16, 0, fmtFloat32, here)}},
			{Index: 1, Name: "b", CBs: []hostcfg.PhaseCBConfig{cb(0, 1, fmtBfp8B, here), cb(1, 3, fmtFloat16, there)}},
		}}}
		files, err := genFiles(p, k, "/k/c.cpp", src, false)
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"0", "6", "5", "255"} // c_3 (Float16) is on another core
		if d := cmp.Diff(want, formatArrays(t, files, 4)["unpack_src_format"]); d != "" {
			t.Errorf("unpack_src_format (-want +got):\n%s", d)
		}
	})
	t.Run("two formats at one index", func(t *testing.T) {
		p := &hostcfg.ProgramConfig{Program: "persistent", Persistent: &hostcfg.PersistentConfig{Phases: []hostcfg.PhaseConfig{
			{Index: 0, Name: "a", CBs: []hostcfg.PhaseCBConfig{cb(0, 2, fmtFloat16B, here)}},
			{Index: 1, Name: "b", CBs: []hostcfg.PhaseCBConfig{cb(4, 2, fmtFloat32, here)}},
		}}}
		_, err := genFiles(p, k, "/k/c.cpp", src, false)
		if err == nil || !strings.Contains(err.Error(), "merged CB index 2 holds data format 5 in phase 0 and 0 in phase 1 (b, CB c_4)") {
			t.Errorf("genFiles: %v, want the conflict at merged index 2 named", err)
		}
	})
}
