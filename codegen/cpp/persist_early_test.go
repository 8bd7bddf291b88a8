package cpp_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/tcc-dev/tcc/codegen"
	"github.com/tcc-dev/tcc/codegen/cpp"
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/persist"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/models/tinymlp"
	"github.com/tcc-dev/tcc/passes"
)

// tinyEarly builds a one-layer tiny-mlp's persistent program with its early
// begins (persist.Build), ready to print.
func tinyEarly(t *testing.T) *kir.Program { return tinyEarlyLayers(t, 1) }

// tinyEarlyLayers is tinyEarly with the given number of layers.
func tinyEarlyLayers(t *testing.T, layers int) *kir.Program {
	t.Helper()
	g := tinymlp.BuildGraph(tinymlp.Sizes{Layers: layers, Hidden: 128, Intermediate: 256, Vocab: 512, Batch: 1})
	_, err := passes.Run(g, passes.Options{})
	require.NoError(t, err)
	b, err := codegen.Compile(g, target.Blackhole())
	require.NoError(t, err)
	p, _, err := persist.Build(b)
	require.NoError(t, err)
	require.NotEmpty(t, p.Persist.Early, "tiny-mlp's matmuls after its norms should begin early")
	require.NoError(t, persist.WithTables(p, b))
	return p
}

const earlyGoldenDir = "testdata/persist_early_golden"

// TestPersistentEarlyGolden: the printed persistent program of a one-layer
// tiny-mlp, whose matmuls' weight readers begin early, is the reviewed
// golden (go test ./codegen/cpp -update rewrites it; the kernels) and
// passes the g++ syntax check.
func TestPersistentEarlyGolden(t *testing.T) {
	p := tinyEarly(t)
	got := printAll(t, p)
	delete(got, p.Name+".json") // the host config: kir's TestPlacePhaseCBsEarly checks its early CB addresses
	// tcc_persist.h is in TestPersistentGolden's golden; the syntax check
	// finds it on its include path.
	delete(got, cpp.PersistHeaderName)
	defines := map[string]map[string]string{}
	for _, k := range p.Kernels {
		defines[k.Name+".cpp"] = k.Defines
	}
	names := make([]string, 0, len(got))
	for n := range got {
		names = append(names, n)
	}
	sort.Strings(names)
	if *cpp.Update {
		require.NoError(t, os.RemoveAll(earlyGoldenDir))
		require.NoError(t, os.MkdirAll(earlyGoldenDir, 0o755))
		for _, n := range names {
			require.NoError(t, os.WriteFile(filepath.Join(earlyGoldenDir, n), []byte(got[n]), 0o644))
		}
	}
	files, _ := filepath.Glob(filepath.Join(earlyGoldenDir, "*"))
	if len(files) != len(got) {
		t.Errorf("%d golden files in %s, %d printed (run go test ./codegen/cpp -update)", len(files), earlyGoldenDir, len(got))
	}
	for _, n := range names {
		t.Run(n, func(t *testing.T) {
			want, err := os.ReadFile(filepath.Join(earlyGoldenDir, n))
			require.NoError(t, err, "missing golden file (run go test ./codegen/cpp -update)")
			if diff := cmp.Diff(string(want), got[n]); diff != "" {
				t.Errorf("%s differs from the golden file (-want +got):\n%s", n, diff)
			}
		})
	}
	checkSyntax(t, got, defines)
}

var (
	earlyBeginRE = regexp.MustCompile(`tcc_phase_begin_early\((\d+), \d+, \d+, \d+, 0x([0-9a-f]{8})u, 0x([0-9a-f]{8})u\);`)
	barrierRE    = regexp.MustCompile(`tcc_phase_(begin_early|begin|end_arrive|end)\((\d+)[,)]`)
)

// TestPersistentEarlyBegins: every early begin of the program prints as the
// simulator runs it. On the kernel of each early begin's RISC and cores
// (and no other): tcc_phase_end_arrive of the phase before (it does not
// wait there) right before tcc_phase_begin_early of the phase, whose mask
// is exactly the phase's early CBs at their merged indices (not the whole
// record); the core's other RISCs print the waiting tcc_phase_end and
// tcc_phase_begin of both phases; every kernel of a core runs the same
// barrier sequence (begin and end of each of the core's phases, in order).
//
// With 4 layers the layers' phases print as step-group loops
// (persist_steps.go): the barriers are read from the kernels with the loops
// unrolled (unrollSteps), and some tcc_phase_begin_early must be inside a
// loop, so the loops carry the early begins.
func TestPersistentEarlyBegins(t *testing.T) {
	for _, layers := range []int{1, 4} {
		t.Run(fmt.Sprintf("%d layers", layers), func(t *testing.T) {
			p := tinyEarlyLayers(t, layers)
			inLoop := 0
			for _, k := range p.Kernels {
				src, err := cpp.PrintKernel(p, k)
				require.NoError(t, err)
				for _, m := range stepLoopRE.FindAllString(string(src), -1) {
					inLoop += strings.Count(m, "tcc_phase_begin_early(")
				}
			}
			if layers > 1 && inLoop == 0 {
				t.Errorf("%d layers: no tcc_phase_begin_early inside a step-group loop; the test wants one", layers)
			}
			checkEarlyBegins(t, p)
		})
	}
}

// stepLoopRE matches a step-group loop of kernel_main (persist_steps.go).
var stepLoopRE = regexp.MustCompile(`(?s)for \(uint32_t tcc_i = 0; tcc_i < \d+u; \+\+tcc_i\) \{\n.*?\n    \}\n`)

// stepTableRE matches a step group's constant table, stepRowRE one row.
var (
	stepTableRE = regexp.MustCompile(`(?s)constexpr tcc_step_(\d+)_t tcc_steps_\d+\[\] = \{\n(.*?)\n\};`)
	stepRowRE   = regexp.MustCompile(`\{([^{}]*)\},`)
	stepFieldRE = regexp.MustCompile(`tcc_s\.f(\d+)\b`)
)

// unrollSteps rewrites every step-group loop of a printed merged kernel
// as its iterations one after another, each with its row's constants in
// place of tcc_s.fN: the statements the loop runs, in order.
func unrollSteps(t *testing.T, src string) string {
	t.Helper()
	rows := map[string][][]string{}
	for _, m := range stepTableRE.FindAllStringSubmatch(src, -1) {
		for _, r := range stepRowRE.FindAllStringSubmatch(m[2], -1) {
			rows[m[1]] = append(rows[m[1]], strings.Split(r[1], ", "))
		}
	}
	return stepLoopRE.ReplaceAllStringFunc(src, func(loop string) string {
		lines := strings.Split(strings.TrimSuffix(loop, "\n"), "\n")
		n, err := strconv.Atoi(strings.TrimSuffix(strings.Fields(lines[0])[7], "u;"))
		require.NoError(t, err, "loop %q", lines[0])
		body := lines[1 : len(lines)-1]
		var id string
		if len(body) > 0 && strings.Contains(body[0], "tcc_steps_") {
			id = strings.TrimSuffix(strings.Split(body[0], "tcc_steps_")[1], "[tcc_i];")
			body = body[1:]
		}
		var out strings.Builder
		for i := 0; i < n; i++ {
			for _, l := range body {
				l = stepFieldRE.ReplaceAllStringFunc(l, func(f string) string {
					k, _ := strconv.Atoi(strings.TrimPrefix(f, "tcc_s.f"))
					require.Less(t, i, len(rows[id]), "step group %s has %d rows, loop runs %d", id, len(rows[id]), n)
					require.Less(t, k, len(rows[id][i]), "step group %s row %d", id, i)
					return strings.TrimSuffix(rows[id][i][k], "u")
				})
				out.WriteString(l + "\n")
			}
		}
		return out.String()
	})
}

// checkEarlyBegins is TestPersistentEarlyBegins on one program.
func checkEarlyBegins(t *testing.T, p *kir.Program) {
	ps := p.Persist
	tables, err := ps.Tables()
	require.NoError(t, err)
	type barrier struct {
		kind  string
		phase int
	}
	seq := map[kir.Core]map[kir.Processor][]barrier{}
	masks := map[int][2]uint64{}
	for _, k := range p.Kernels {
		printed, err := cpp.PrintKernel(p, k)
		require.NoError(t, err)
		src := unrollSteps(t, string(printed))
		var bs []barrier
		for _, m := range barrierRE.FindAllStringSubmatch(src, -1) {
			if strings.Contains(m[0], "uint32_t") {
				continue
			}
			n, _ := strconv.Atoi(m[2])
			bs = append(bs, barrier{m[1], n})
		}
		for _, m := range earlyBeginRE.FindAllStringSubmatch(src, -1) {
			n, _ := strconv.Atoi(m[1])
			lo, _ := strconv.ParseUint(m[2], 16, 32)
			hi, _ := strconv.ParseUint(m[3], 16, 32)
			masks[n] = [2]uint64{lo, hi}
		}
		for _, c := range kir.CoresOf(k.Cores) {
			if seq[c] == nil {
				seq[c] = map[kir.Processor][]barrier{}
			}
			seq[c][k.Processor] = bs
		}
	}
	early := 0
	for c, byProc := range seq {
		if c.IsEth() {
			continue
		}
		for proc, bs := range byProc {
			for i, b := range bs {
				var want string
				switch {
				case b.kind == "begin" || b.kind == "begin_early":
					want = "begin"
					if ps.EarlyOn(b.phase, proc, c) != nil {
						want = "begin_early"
					}
				default:
					want = "end"
					if ps.ArrivesOnly(b.phase, proc, c) {
						want = "end_arrive"
					}
				}
				if b.kind != want {
					t.Errorf("core %s %s: barrier %d is tcc_phase_%s(%d), want tcc_phase_%s", c, proc, i, b.kind, b.phase, want)
				}
				if b.kind == "begin_early" {
					early++
					if i == 0 || bs[i-1].kind != "end_arrive" {
						t.Errorf("core %s %s: tcc_phase_begin_early(%d) not right after a tcc_phase_end_arrive", c, proc, b.phase)
					}
				}
			}
			// The same barrier sequence on every RISC of the core.
			for other, os := range byProc {
				if len(os) != len(bs) {
					t.Errorf("core %s: %s runs %d barriers, %s %d", c, proc, len(bs), other, len(os))
					continue
				}
				for i := range bs {
					if os[i].phase != bs[i].phase || strings.HasPrefix(os[i].kind, "begin") != strings.HasPrefix(bs[i].kind, "begin") {
						t.Errorf("core %s: barrier %d is phase %d on %s, phase %d on %s", c, i, bs[i].phase, proc, os[i].phase, other)
						break
					}
				}
			}
		}
	}
	if early == 0 {
		t.Fatal("no tcc_phase_begin_early printed for a program with early begins")
	}
	for _, e := range ps.Early {
		var want [2]uint64
		for _, i := range ps.Phases[e.Phase].EarlyCBs {
			m := tables.CBMap[e.Phase][i]
			want[m/32] |= 1 << (m % 32)
		}
		all := [2]uint64{}
		for _, m := range tables.CBMap[e.Phase] {
			all[m/32] |= 1 << (m % 32)
		}
		require.NotEqual(t, all, want, "phase %d: every CB is early; the test needs one that is not", e.Phase)
		if got := masks[e.Phase]; got != want {
			t.Errorf("phase %d: tcc_phase_begin_early installs the merged CBs %#x/%#x, want its early CBs %v at %#x/%#x", e.Phase, got[0], got[1], ps.Phases[e.Phase].EarlyCBs, want[0], want[1])
		}
	}
}
