package cli

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tcc-dev/tcc/runtime"
)

// TestReportChip checks the chip report: one line per program summing up
// all its launches (every step's), the most severe outcome first with the
// first launch that had it, and the count of bad launches.
func TestReportChip(t *testing.T) {
	r := func(i int, p string, launch int, status, detail string) runtime.ProgramResult {
		return runtime.ProgramResult{Index: i, Program: p, Launch: launch, Status: status, Detail: detail}
	}
	rs := []runtime.ProgramResult{
		r(0, "embedding_12", 1, "matched", "3 buffers bit-exact"),
		r(1, "matmul_add_18", 1, "matched", "3 buffers bit-exact"),
		r(2, "rms_norm_14", 1, "skipped", "needs the SFPU"),
		r(0, "embedding_12", 2, "matched", "3 buffers bit-exact"),
		r(1, "matmul_add_18", 2, "differs", "buffer t19: first: element [0 3]"),
		r(2, "rms_norm_14", 2, "skipped", "needs the SFPU"),
		r(0, "embedding_12", 3, "failed", "ttsim stopped"),
		r(1, "matmul_add_18", 3, "differs", "buffer t19: first: element [0 5]"),
		r(2, "rms_norm_14", 3, "skipped", "needs the SFPU"),
	}
	var b strings.Builder
	bad := reportChip(&b, rs)
	want := `chip: program 0 embedding_12: failed (1 failed, 2 matched of 3 launches; launch 3: ttsim stopped)
chip: program 1 matmul_add_18: differs (2 differs, 1 matched of 3 launches; launch 2: buffer t19: first: element [0 3])
chip: program 2 rms_norm_14: skipped (3 skipped of 3 launches; launch 1: needs the SFPU)
chip: 9 launches: 3 matched the simulator bit for bit on the elements they define, 2 differed, 1 failed, 3 skipped
`
	if d := cmp.Diff(want, b.String()); d != "" {
		t.Errorf("report (-want +got):\n%s", d)
	}
	if bad != 3 {
		t.Errorf("bad launches = %d, want 3", bad)
	}
}
