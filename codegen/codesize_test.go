package codegen_test

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tcc-dev/tcc/codegen"
	"github.com/tcc-dev/tcc/codegen/cpp"
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/ir/longtest"
	"github.com/tcc-dev/tcc/models"
	"github.com/tcc-dev/tcc/models/qwen27b"
)

// compileQwen27B builds the full-size qwen27b decode step (batch 1) on
// mesh and lowers it; Compile validates every program, rule code-size
// included.
func compileQwen27B(t *testing.T, mesh ir.Mesh) *codegen.Build {
	t.Helper()
	b, _, _ := compileQwen(t, nil, mesh)
	return b
}

// compileQwen builds qwen27b with model flags (nil: the defaults) on mesh,
// runs the passes and lowers it; it returns the build, the model and its
// arguments.
func compileQwen(t *testing.T, flags map[string]string, mesh ir.Mesh) (*codegen.Build, qwen27b.Model, models.Args) {
	t.Helper()
	g := qwenGraph(t, flags, mesh)
	m := qwen27b.Model{}
	args, err := models.DefaultArgs(m, flags)
	if err != nil {
		t.Fatal(err)
	}
	b, err := codegen.Compile(g, target.Blackhole())
	if err != nil {
		t.Fatalf("qwen27b on mesh %s: %v", mesh, err)
	}
	return b, m, args
}

// TestQwen27BKernelsFitTheirLimits compiles the qwen27b decode step at
// meshes 1x1 and 1x2 (the attention prologue's head-row gather was 960
// unrolled reads, about 51 KB of NCRISC code, before it became loops) and
// checks the estimates of every program against the kernel config ring.
func TestQwen27BKernelsFitTheirLimits(t *testing.T) {
	longtest.Skip(t, "the code-size limits of every full 27B kernel at 1x1 and 1x2 (~6 CPU-s; every build checks rule code-size anyway)")
	for _, mesh := range []ir.Mesh{{Rows: 1, Cols: 1}, {Rows: 1, Cols: 2}} {
		t.Run(mesh.String(), func(t *testing.T) {
			b := compileQwen27B(t, mesh)
			bh := b.Target
			for _, p := range b.Programs {
				if s := kir.EstimateProgramCode(p.Kernel, bh); s.Total() >= bh.Code.RingBytes {
					t.Errorf("program %s: estimated ring use %d bytes; the ring holds %d", p.Kernel.Name, s.Total(), bh.Code.RingBytes)
				}
				if strings.HasPrefix(p.Kernel.Name, "attn_prologue") {
					if r, limit := kir.EstimateCode(p.Kernel.Kernel("reader")).Bytes, bh.NCRISCCodeBytes*3/4; r > limit {
						t.Errorf("program %s: reader estimated at %d bytes; want the head rows gathered in loops (at most %d)", p.Kernel.Name, r, limit)
					}
				}
			}
		})
	}
}

// TestCodeEstimateTermsMatchCalibration: every kernel of the qwen27b 1x2
// decode build that is in the measured sample (kir/testdata/codesize.tsv,
// by its printed source's name) still has the terms recorded there, so
// the calibration test prices what EstimateCode counts today.
func TestCodeEstimateTermsMatchCalibration(t *testing.T) {
	want := map[string]map[string]int{}
	f, err := os.Open("kir/testdata/codesize.tsv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		col := strings.Split(sc.Text(), "\t")
		if strings.HasPrefix(col[0], "#") || len(col) != 5 {
			continue
		}
		var terms map[string]int
		if err := json.Unmarshal([]byte(col[4]), &terms); err != nil {
			t.Fatal(err)
		}
		want[col[0]] = terms
	}
	b := compileQwen27B(t, ir.Mesh{Rows: 1, Cols: 2})
	matched := 0
	for _, p := range b.Programs {
		for _, k := range p.Kernel.Kernels {
			src, err := cpp.PrintKernel(p.Kernel, k)
			if err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256(src)
			name := fmt.Sprintf("%s_%s.cpp", k.Role, hex.EncodeToString(sum[:6]))
			w, ok := want[name]
			if !ok {
				continue
			}
			delete(want, name)
			matched++
			if diff := cmp.Diff(w, kir.EstimateCode(k).Terms); diff != "" {
				t.Errorf("%s (%s): terms differ from the measured sample (-want +got):\n%s", name, p.Kernel.Name, diff)
			}
		}
	}
	t.Logf("%d kernels of the build are in the measured sample", matched)
	// The sample was measured on the build of 28c45bb: 43 of today's are
	// in it, every kernel source of the decode build the JIT builds with a
	// stock compiler (58 less 6 ethernet and 9 SFPU compute kernels).
	// Re-plans (core counts) and changed kernels rename them; below 8 the
	// check says too little: re-measure the sample (its header says how).
	if matched < 8 {
		t.Errorf("%d kernels of the build are in the measured sample; want at least 8", matched)
	}
}
