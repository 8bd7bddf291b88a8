package kir_test

import (
	"testing"

	"github.com/tcc-dev/tcc/codegen/kir"
)

// TestArgPhase: a merged kernel's argument names map back to their phase;
// the kernel's own ("persist_...") and malformed prefixes have none.
func TestArgPhase(t *testing.T) {
	for _, tc := range []struct {
		name  string
		phase int
		ok    bool
	}{
		{kir.PhaseArgPrefix(17) + "src_addr", 17, true},
		{"p0_x", 0, true},
		{"persist_ctl", 0, false},
		{"persist_steps", 0, false},
		{"p_x", 0, false},
		{"p017_x", 0, false},
		{"p17", 0, false},
		{"q3_x", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, ok := kir.ArgPhase(tc.name)
			if p != tc.phase || ok != tc.ok {
				t.Errorf("ArgPhase(%q) = %d, %v; want %d, %v", tc.name, p, ok, tc.phase, tc.ok)
			}
		})
	}
}

// TestPhaseWord: PhaseWord and DecodePhaseWord invert each other; zero
// (no phase started) decodes to nothing.
func TestPhaseWord(t *testing.T) {
	for _, p := range []int{0, 1, 516} {
		for _, ended := range []bool{false, true} {
			gp, ge, ok := kir.DecodePhaseWord(kir.PhaseWord(p, ended))
			if gp != p || ge != ended || !ok {
				t.Errorf("DecodePhaseWord(PhaseWord(%d, %v)) = %d, %v, %v", p, ended, gp, ge, ok)
			}
		}
	}
	if _, _, ok := kir.DecodePhaseWord(0); ok {
		t.Error("DecodePhaseWord(0) decodes a phase")
	}
}
