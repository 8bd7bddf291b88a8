package cpp_test

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/tcc-dev/tcc/codegen"
	"github.com/tcc-dev/tcc/codegen/cpp"
	"github.com/tcc-dev/tcc/codegen/hostcfg"
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/persist"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
)

// chain compiles n programs x -> x+1 -> (x+1)+1 ... on a 32x64 bf16
// tensor: n phases whose kernels differ only in their buffers (argument
// values), as a model's layers do.
func chain(t *testing.T, n int, tg *target.Target) *codegen.Build {
	t.Helper()
	b := ir.NewBuilder("chain")
	v := b.Input("x", ir.T(ir.BF16, 32, 64))
	for range n {
		v = b.AddScalar(v, 1)
	}
	b.Output(v)
	g, err := b.Finish()
	require.NoError(t, err)
	build, err := codegen.Compile(g, tg)
	require.NoError(t, err)
	require.Len(t, build.Programs, n)
	return build
}

// persistent builds b's persistent program ready to print.
func persistent(t *testing.T, b *codegen.Build) *kir.Program {
	t.Helper()
	p, _, err := persist.Build(b)
	require.NoError(t, err)
	require.NoError(t, persist.WithTables(p, b))
	return p
}

// printAll prints every merged kernel ("<kernel>.cpp") and the host config
// with its persistent section ("<program>.json").
func printAll(t *testing.T, p *kir.Program) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, k := range p.Kernels {
		src, err := cpp.PrintKernel(p, k)
		require.NoError(t, err)
		out[k.Name+".cpp"] = string(src)
	}
	tg := target.Blackhole()
	cfg, err := hostcfg.ConfigValidated(p, tg)
	require.NoError(t, err)
	cfg.Persistent, err = hostcfg.Persistent(p, tg)
	require.NoError(t, err)
	js, err := cfg.JSON()
	require.NoError(t, err)
	out[p.Name+".json"] = string(js)
	out[cpp.PersistHeaderName] = cpp.PersistHeader()
	return out
}

const persistGoldenDir = "testdata/persist_golden"

// TestPersistentGolden: the printed kernels and host config of a
// two-phase persistent program (phase 1 waits for phase 0) are the
// reviewed golden files (go test ./codegen/cpp -update rewrites them), and
// every kernel passes the g++ syntax check.
func TestPersistentGolden(t *testing.T) {
	got := printAll(t, persistent(t, chain(t, 2, target.Blackhole())))
	names := make([]string, 0, len(got))
	for n := range got {
		names = append(names, n)
	}
	sort.Strings(names)
	if *cpp.Update {
		require.NoError(t, os.RemoveAll(persistGoldenDir))
		require.NoError(t, os.MkdirAll(persistGoldenDir, 0o755))
		for _, n := range names {
			require.NoError(t, os.WriteFile(filepath.Join(persistGoldenDir, n), []byte(got[n]), 0o644))
		}
	}
	files, _ := filepath.Glob(filepath.Join(persistGoldenDir, "*"))
	if len(files) != len(got) {
		t.Errorf("%d golden files in %s, %d printed (run go test ./codegen/cpp -update)", len(files), persistGoldenDir, len(got))
	}
	for _, n := range names {
		t.Run(n, func(t *testing.T) {
			want, err := os.ReadFile(filepath.Join(persistGoldenDir, n))
			require.NoError(t, err, "missing golden file (run go test ./codegen/cpp -update)")
			if diff := cmp.Diff(string(want), got[n]); diff != "" {
				t.Errorf("%s differs from the golden file (-want +got):\n%s", n, diff)
			}
		})
	}
	// The phase machinery (in the shared header) and the phases as the
	// reader expects them.
	hdr := got[cpp.PersistHeaderName]
	for _, want := range []string{
		"setup_local_cb_read_write_interfaces<true, true, false, false>(cbs + 2, 0, lo);",
		"setup_local_cb_read_write_interfaces<true, true, false, false>(cbs + 2, 32, hi);",
		"rta_l1_base = tcc_persist::rta0 + rta;",
		"tcc_persist::tables = crta_l1_base[1];",
	} {
		if !strings.Contains(hdr, want) {
			t.Errorf("%s lacks %q", cpp.PersistHeaderName, want)
		}
	}
	brisc := got["persist_brisc_0.cpp"]
	for _, want := range []string{
		`#include "tcc_persist.h"`,
		"tcc_phase_begin(0, ", "tcc_phase_end(0);", "tcc_phase_begin(1, ", "tcc_phase_end(1);",
		"constexpr uint32_t tcc_deps_0[] = {0};", "tcc_phase_body_0(tcc_deps_0, 1);",
	} {
		if !strings.Contains(brisc, want) {
			t.Errorf("persist_brisc_0.cpp lacks %q", want)
		}
	}
	// The machinery is the header's alone: no merged kernel repeats it.
	for n, src := range got {
		if strings.HasSuffix(n, ".cpp") && (strings.Contains(src, "inline void tcc_phase_begin(") || strings.Contains(src, "namespace tcc_persist")) {
			t.Errorf("%s defines the phase machinery itself; it should include %s", n, cpp.PersistHeaderName)
		}
	}
	// kernel_main moves the argument bases into the tables buffer before
	// it reads an argument.
	main := brisc[strings.Index(brisc, "void kernel_main() {"):]
	if i, j := strings.Index(main, "tcc_persist_init();"), strings.Index(main, "get_common_arg_val"); i < 0 || j < 0 || i > j {
		t.Errorf("kernel_main reads an argument (at %d) before tcc_persist_init() (at %d)", j, i)
	}
	checkSyntax(t, got, nil)
}

// checkSyntax runs the g++ syntax check on the printed kernels of got,
// each built with its defines (by file name; nil: none).
func checkSyntax(t *testing.T, got map[string]string, defines map[string]map[string]string) {
	t.Helper()
	dir := t.TempDir()
	sources := map[string]cpp.Source{}
	for n, src := range got {
		if !strings.HasSuffix(n, ".cpp") {
			continue
		}
		f := filepath.Join(dir, n)
		require.NoError(t, os.WriteFile(f, []byte(src), 0o644))
		proc := kir.RISCV0
		switch {
		case strings.Contains(src, "on RISCV_1 = NCRISC"):
			proc = kir.RISCV1
		case strings.Contains(src, "on TRISC0/1/2"):
			proc = kir.ComputeProc
		}
		sources[f] = cpp.Source{Processor: proc, Defines: defines[n]}
		if proc == kir.ComputeProc {
			// The unpack and pack threads' CB install and page-counter
			// reload (tcc_persist.h) too: a copy of the source each.
			for _, th := range []string{"TRISC_UNPACK", "TRISC_PACK"} {
				g := filepath.Join(dir, strings.ToLower(th)+"_"+n)
				require.NoError(t, os.WriteFile(g, []byte(src), 0o644))
				sources[g] = cpp.Source{Processor: proc, Defines: defines[n], Thread: th}
			}
		}
	}
	outputs, ok, err := cpp.SyntaxCheck(dir, sources)
	if errors.Is(err, cpp.ErrNoCompiler) {
		t.Skip("!!!!! g++ is not installed: SKIPPING the syntax check of the persistent kernels (CI installs it) !!!!!")
	}
	require.NoError(t, err)
	for d, out := range outputs {
		if !ok[d] || out != "" {
			t.Errorf("g++ %s:\n%s", d, out)
		}
	}
}

var bodyDef = regexp.MustCompile(`(?m)^__attribute__\(\(noinline\)\) void tcc_phase_body_\d+\(`)

// TestPersistentSharesBodies: 64 phases whose kernels differ only in
// argument values (64 layers) print as ONE body function per merged
// kernel, called for every phase (in loops), and the estimated code is
// that of one body plus the calls, far below the 64 bodies in line.
func TestPersistentSharesBodies(t *testing.T) {
	p := persistent(t, chain(t, 64, target.Blackhole()))
	for _, k := range p.Kernels {
		src, err := cpp.PrintKernel(p, k)
		require.NoError(t, err)
		text := string(src)
		if got := len(bodyDef.FindAllString(text, -1)); got != 1 {
			t.Errorf("%s: %d body functions, want 1 (64 phases identical up to their arguments)", k.Name, got)
		}
		// The 64 calls differ in constants only: they run in loops over
		// tables of them (persist_steps.go), at most one call in line each.
		if got := strings.Count(text, "tcc_phase_body_0("); got < 2 || got > 64+1 {
			t.Errorf("%s: tcc_phase_body_0 named %d times, want its definition and 1..64 calls", k.Name, got)
		}
		pc, err := cpp.EstimatePersistentKernel(p, k)
		require.NoError(t, err)
		if pc.Phases != 64 || pc.Bodies != 1 {
			t.Errorf("%s: %d phases, %d bodies; want 64, 1", k.Name, pc.Phases, pc.Bodies)
		}
		// kernel_main keeps every phase's barriers and done-word signals:
		// the bodies are what sharing saves.
		if pc.Shared.Bytes >= pc.Inlined.Bytes {
			t.Errorf("%s: shared estimate %d bytes, not below the inlined %d", k.Name, pc.Shared.Bytes, pc.Inlined.Bytes)
		}
	}
}

// TestPersistentDeterministic: two builds print byte-identical kernels and
// host configs.
func TestPersistentDeterministic(t *testing.T) {
	a := printAll(t, persistent(t, chain(t, 3, target.Blackhole())))
	b := printAll(t, persistent(t, chain(t, 3, target.Blackhole())))
	if diff := cmp.Diff(a, b); diff != "" {
		t.Errorf("two prints differ (-first +second):\n%s", diff)
	}
}

// TestPersistentCodeSizeRule: images over the card's limits are refused
// with rule code-size naming the kernel and the bytes.
func TestPersistentCodeSizeRule(t *testing.T) {
	cases := []struct {
		name string
		edit func(*target.Target)
		want string
	}{
		{"image over MEM_MAX_KERNEL_SIZE", func(tg *target.Target) { tg.Code.XIPImageBytes = 1024 }, "image exceeds MEM_MAX_KERNEL_SIZE (1024 bytes)"},
		{"arguments over the ring", func(tg *target.Target) { tg.Code.RingBytes = 40 }, "more than the 39-byte ring holds"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := chain(t, 2, target.Blackhole())
			p, _, err := persist.Build(b)
			require.NoError(t, err)
			tg := *b.Target
			tc.edit(&tg)
			b.Target = &tg
			err = persist.WithTables(p, b)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "[rule code-size]") {
				t.Fatalf("error %v, want rule %s containing %q", err, kir.RuleCodeSize, tc.want)
			}
		})
	}
}

// TestPersistentArgsInTables: the kernel config ring holds two common
// arguments per worker merged kernel whatever the phases (every phase's
// arguments are in the tables buffer), while the tables buffer's page
// holds every core's argument vectors after its records; phases with the
// same CBs share one record.
func TestPersistentArgsInTables(t *testing.T) {
	tg := target.Blackhole()
	ring := map[int]int{}
	for _, n := range []int{2, 64} {
		p := persistent(t, chain(t, n, tg))
		r := kir.PersistentRing(p, tg)
		ring[n] = r.Bytes()
		if r.RuntimeArgs != 0 || r.CommonArgs != 3*16 {
			t.Errorf("%d phases: ring arguments runtime %d, common %d bytes; want 0 and 48 (persist_ctl, persist_tables per RISC)", n, r.RuntimeArgs, r.CommonArgs)
		}
		tb, err := p.Persist.Tables()
		require.NoError(t, err)
		page := p.Buffer(kir.TablesBuffer).PageSize
		for _, c := range p.Cores() {
			if c.IsEth() {
				continue
			}
			slots, end := tb.Args(p, c)
			if end > page {
				t.Errorf("%d phases, core %s: argument vectors end at %d, past the %d-byte tables page", n, c, end, page)
			}
			recEnd := kir.TableArgHeader + kir.TableArgHeaderBytes
			for q, off := range tb.Offsets(p.Persist, c) {
				recEnd = max(recEnd, off+tb.Record[q])
			}
			for s, v := range slots {
				if v.Kernel == nil {
					t.Errorf("%d phases, core %s: no merged kernel in argument slot %d", n, c, s)
					continue
				}
				if v.Runtime < recEnd || v.Common < v.Runtime+4*v.RuntimeWords {
					t.Errorf("%d phases, core %s slot %d: runtime vector at %d, common at %d, overlapping the records (end %d) or each other", n, c, s, v.Runtime, v.Common, recEnd)
				}
			}
		}
		if n == 64 && r.TablesArgs < 64*4 {
			t.Errorf("64 phases: %d bytes of arguments in the tables, want at least one word per phase", r.TablesArgs)
		}
		// The phases' CB records are the same (the same CBs on the same
		// cores): one record, shared, not one per phase.
		own := 0
		for q := range p.Persist.Phases {
			if tb.RecordOf[q] == q {
				own++
			}
		}
		if own != 1 {
			t.Errorf("%d phases: %d CB records of their own, want 1 shared by all", n, own)
		}
	}
	if ring[2] != ring[64] {
		t.Errorf("the ring's use grows with the phases: %d bytes for 2, %d for 64", ring[2], ring[64])
	}
}

// allReduces compiles n two-card all-reduces in a row on a 1x2 mesh: n
// phases on the ethernet cores, the same up to their constants.
func allReduces(t *testing.T, n int) *codegen.Build {
	t.Helper()
	b := ir.NewBuilder("ring")
	b.G.Mesh = ir.Mesh{Rows: 1, Cols: 2}
	v := b.Input("x", ir.T(ir.BF16, 1, 1, 1024))
	for range n {
		v = b.AllReduce(v, 2)
	}
	b.Output(v)
	g, err := b.Finish()
	require.NoError(t, err)
	build, err := codegen.Compile(g, target.Blackhole())
	require.NoError(t, err)
	return build
}

// TestPersistentEthStepsLoop: an ethernet core's phases that differ in
// constants only print as one loop over a table of them, so the merged
// ethernet kernel's estimated code grows by a few table words per phase
// (it grew by ~260 bytes a phase with every phase's calls in line), and
// the printed kernels pass the g++ syntax check.
func TestPersistentEthStepsLoop(t *testing.T) {
	eth := map[int]int{}
	for _, n := range []int{4, 32} {
		p := persistent(t, allReduces(t, n))
		got := map[string]string{}
		for _, k := range p.Kernels {
			if !k.OnEth() {
				continue
			}
			src, err := cpp.PrintKernel(p, k)
			require.NoError(t, err)
			text := string(src)
			if !strings.Contains(text, "one loop over their constants") || !strings.Contains(text, "for (uint32_t tcc_i = 0; tcc_i < ") {
				t.Errorf("%d all-reduces, %s: no step loop in kernel_main", n, k.Name)
			}
			pc, err := cpp.EstimatePersistentKernel(p, k)
			require.NoError(t, err)
			eth[n] = max(eth[n], pc.Shared.Bytes)
			got[k.Name+".cpp"] = text
		}
		require.NotEmpty(t, got, "no ethernet kernel")
		if n == 4 {
			checkSyntax(t, got, nil)
		}
	}
	if per := (eth[32] - eth[4]) / 28; per > 64 {
		t.Errorf("the merged ethernet kernel's estimate grows by %d bytes a phase (%d bytes at 4 all-reduces, %d at 32), want at most 64", per, eth[4], eth[32])
	}
}
