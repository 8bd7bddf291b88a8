package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/ir"
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

// TestDumpCompared: --chip-dump writes both sides of a buffer whose
// defined elements differ, and the differing elements; a buffer that
// differs only in its tile padding (rows past the shape) writes nothing.
// Without a chip the flag is refused.
func TestDumpCompared(t *testing.T) {
	dir := t.TempDir()
	tt := runtime.Tensor{Buffer: kir.Buffer{Name: "b1/s3", DType: ir.BF16, Layout: ir.TileLayout, PageSize: 2048, Pages: 1}, Shape: ir.Shape{2, 32}}
	data := make([]float32, 64)
	for i := range data {
		data[i] = float32(i)
	}
	sim, err := runtime.Encode(tt, data)
	require.NoError(t, err)
	data[33] = 0.5 // element [1 1]
	chip, err := runtime.Encode(tt, data)
	require.NoError(t, err)
	padded := append([]byte(nil), sim...)
	padded[2*2*16] ^= 1 // row 2, column 0: tile padding
	var errs strings.Builder
	dump := dumpCompared(dir, &errs)
	r := runtime.ProgramResult{Index: 2, Program: "matmul4_133", Launch: 1}
	dump(r, tt, padded, sim)
	files, _ := filepath.Glob(filepath.Join(dir, "*"))
	require.Empty(t, files, "padding only")
	dump(r, tt, chip, sim)
	for ext, want := range map[string][]byte{".chip": chip, ".sim": sim} {
		got, err := os.ReadFile(filepath.Join(dir, "p2-matmul4_133-l1-b1_s3"+ext))
		require.NoError(t, err)
		require.Equal(t, want, got, ext)
	}
	txt, err := os.ReadFile(filepath.Join(dir, "p2-matmul4_133-l1-b1_s3.txt"))
	require.NoError(t, err)
	want := "# program 2 matmul4_133 launch 1: buffer b1/s3 bf16 tile [2,32], 1 defined elements differ (index, chip, simulator)\n[1 1] chip 0.5 (0x3f00) sim 33 (0x4204)\n"
	if d := cmp.Diff(want, string(txt)); d != "" {
		t.Errorf("dump text (-want +got):\n%s", d)
	}
	require.Empty(t, errs.String())
	_, err = openMesh(runFlags{backend: "sim", chipDump: dir}, ir.Mesh{Rows: 1, Cols: 1})
	require.ErrorContains(t, err, "--chip-dump needs a chip")
}

// TestLaunchLine: the line before each launch names the program (its index
// and kernel name) and the launch, so that a ttsim fatal, which ends the
// process, follows the name of what it was running.
func TestLaunchLine(t *testing.T) {
	got := launchLine(runtime.ProgramResult{Index: 23, Program: "tril_inverse_187", Launch: 2})
	require.Equal(t, "tcc: chip: program 23 tril_inverse_187, launch 2", got)
}
