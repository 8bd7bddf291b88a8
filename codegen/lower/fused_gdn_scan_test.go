package lower_test

import (
	"math"
	"strings"
	"testing"

	"github.com/tcc-dev/tcc/codegen/cpp"
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/ir/longtest"
	"github.com/tcc-dev/tcc/ir/numerics"
	"github.com/tcc-dev/tcc/sim/ref"
	"github.com/tcc-dev/tcc/sim/timing"
)

// gdnScanOp builds a one-op graph: gdn_chunk_scan of chunks first ..
// first+count-1 over [B, H, N, 32, D] operands of dtype f (k [B, H/G, N,
// 32, Dk] with k_group = G when kGroup gives G > 1).
func gdnScanOp(t *testing.T, B, H, N, dk, dv, first, count int, f ir.DType, kGroup ...int) *ir.Op {
	t.Helper()
	const L = ir.TileSize
	b := ir.NewBuilder("gdn_chunk_scan")
	in := func(name string, s ...int) *ir.Value { return b.Input(name, ir.T(f, s...)) }
	G := 1
	var opts []ir.Option
	if len(kGroup) > 0 && kGroup[0] > 1 {
		G = kGroup[0]
		opts = append(opts, ir.With("k_group", G))
	}
	u, wk, qg := in("u", B, H, N, L, dv), in("wk", B, H, N, L, dk), in("qg", B, H, N, L, dk)
	qk, k, g := in("qk", B, H, N, L, L), in("k", B, H/G, N, L, dk), in("g", B, H, N, L)
	s := in("state", B, H, 1, dk, dv)
	b.Region(ir.RegionKind("gdn"), 0)
	rs := b.GDNChunkScan(u, wk, qg, qk, k, g, s, first, count, opts...)
	if b.Err() != nil {
		t.Fatal(b.Err())
	}
	b.Output(rs...)
	gr, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	return gr.Ops()[0]
}

// gdnBitDiff counts the elements of got whose bits differ from want's.
func gdnBitDiff(want, got []float32) int {
	diff := 0
	for j := range want {
		if math.Float32bits(want[j]) != math.Float32bits(got[j]) {
			diff++
		}
	}
	return diff
}

// TestGDNChunkScanProgramOnSim runs gdn_chunk_scan on the simulator and
// compares both results with the reference at the device formats, which
// runs gdn_chunk_step's evaluator chunk after chunk (equal to the
// composed chain bit for bit: sim/ref TestGDNChunkStepEqualsComposed,
// passes TestGDNChunkStepFiresOnEveryChunk): bit for bit, for fp32 and
// bf16, scans from chunk 0 and from a later chunk, across g's tile rows
// (chunks 30..34 of 35), several users with more items than cores (the
// carried state must not mix with the next item's), and the 27B's head
// dims, whose heads' value columns are split over cores that share the
// head's tiles by multicast, one round per two chunks (an even count;
// odd counts read one chunk per round).
func TestGDNChunkScanProgramOnSim(t *testing.T) {
	srcDir := t.TempDir()
	sources := map[string]cpp.Source{}
	two := *target.Blackhole()
	two.GridX, two.GridY = 2, 1
	cases := []struct {
		name                          string
		tgt                           *target.Target
		B, H, N, dk, dv, first, count int
		f                             ir.DType
		kGroup                        int // k per key head (k_group) when > 1
	}{
		{"fp32_all_3", target.Blackhole(), 1, 2, 3, 64, 64, 0, 3, ir.FP32, 0},
		{"fp32_from_1_of_4", target.Blackhole(), 1, 2, 4, 32, 64, 1, 2, ir.FP32, 0},
		{"fp32_30_to_34_of_35", target.Blackhole(), 1, 1, 35, 32, 32, 30, 5, ir.FP32, 0},
		{"fp32_3users_2cores", &two, 3, 2, 3, 32, 32, 0, 3, ir.FP32, 0},
		{"bf16_all_3", target.Blackhole(), 1, 2, 3, 64, 32, 0, 3, ir.BF16, 0},
		{"fp32_27b_head_dims_shared", target.Blackhole(), 1, 2, 4, 128, 128, 0, 4, ir.FP32, 0},
		{"fp32_k_group3_2users_2cores", &two, 2, 6, 2, 32, 32, 0, 2, ir.FP32, 3},
		{"fp32_k_group2_shared_heads", target.Blackhole(), 1, 4, 2, 64, 128, 0, 2, ir.FP32, 2},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.kGroup > 1 {
				longtest.Skip(t, "k per key head (~1 CPU-s)")
			}
			op := gdnScanOp(t, c.B, c.H, c.N, c.dk, c.dv, c.first, c.count, c.f, c.kGroup)
			args := gdnChunkArgs(op, uint64(i+1))
			want, err := ref.EvalOpData(op, args, ref.DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			got := gdnChunkRun(t, c.tgt, op, args, srcDir, sources)
			for r, name := range []string{"o", "new_state"} {
				w, g := want[r].Data, got[r]
				diff := gdnBitDiff(w, g)
				t.Logf("%s %s: PCC %.7f, %d of %d elements differ", name, op.Results[r].Type.Shape, numerics.PCC(w, g), diff, len(w))
				if diff > 0 {
					t.Errorf("%s: %d of %d elements differ from the reference; want bit for bit", name, diff, len(w))
				}
			}
		})
	}
	t.Run("kernels compile", func(t *testing.T) {
		longtest.Skip(t, "the g++ syntax check of the gdn_chunk_scan kernels")
		lower.CheckKernelSyntax(t, "gdn_chunk_scan kernels", t.TempDir(), sources, false)
	})
}

// TestGDNChunkScanBeatsSteps: the timing model's time of one
// gdn_chunk_scan of the 27B's 8 chunks (mesh 1x2: 24 value heads of a
// 128x128 fp32 state) is below the 8 gdn_chunk_step programs it replaces,
// each with the per-program cost, by at least the launch costs saved, and
// takes at most 70 us: its reader reads two chunks per round under one
// barrier (one chunk's tiles load half the DRAM banks) and no g tile per
// chunk (72.8 us with one chunk per round and g's tile read each chunk).
func TestGDNChunkScanBeatsSteps(t *testing.T) {
	tgt := target.Blackhole()
	const N = 8
	scan, err := lower.Lower(gdnScanOp(t, 1, 24, N, 128, 128, 0, N, ir.FP32), lower.NewContext(tgt))
	if err != nil {
		t.Fatal(err)
	}
	st, err := timing.Simulate(scan, tgt, timing.Default(), timing.Options{})
	if err != nil {
		t.Fatal(err)
	}
	steps, stepExp := 0.0, 0.0
	for c := range N {
		p, err := lower.Lower(gdnChunkOp(t, 1, 24, N, 128, 128, c, ir.FP32), lower.NewContext(tgt))
		if err != nil {
			t.Fatal(err)
		}
		pt, err := timing.Simulate(p, tgt, timing.Default(), timing.Options{})
		if err != nil {
			t.Fatal(err)
		}
		steps += pt.US()
		stepExp = max(stepExp, computeBusy(pt, "exp_tile"))
	}
	scanExp := computeBusy(st, "exp_tile")
	t.Logf("scan of %d chunks on %d cores: %.2f us (exps %.2f us); %d steps: %.2f us (exps %.2f us each at most)", N, len(scan.Cores()), st.US(), scanExp, N, steps, stepExp)
	if st.US() > 70 {
		t.Errorf("the scan takes %.2f us, want at most 70 us (two chunks per read round, no g tile per chunk)", st.US())
	}
	if st.US() >= steps {
		t.Errorf("the scan takes %.2f us, the steps %.2f us: want the scan faster", st.US(), steps)
	}
	// The N chunks' rows sit in one g tile, whose decay exps the scan's
	// items run once, as one step's items do (not once per chunk).
	if scanExp <= 0 || scanExp > 1.01*stepExp {
		t.Errorf("the scan's compute runs exp_tile for %.2f us, a step's %.2f us: want the decay exps once per g tile, at most a step's", scanExp, stepExp)
	}
}

// computeBusy is the predicted microseconds the latest-finishing compute
// thread of pt's first device spent in instruction call.
func computeBusy(pt *timing.ProgramTime, call string) float64 {
	for _, k := range pt.Devices[0].Kernels {
		if k.Role == kir.RoleCompute {
			return k.Busy[call]
		}
	}
	return 0
}

// TestGDNChunkScanLongOnSim runs the GDN prefill's chunk loop over 2,048
// tokens (64 chunks of 32, one user, two heads of 64x64 fp32 state) as
// one gdn_chunk_scan program on the simulator, against the reference
// running gdn_chunk_step's evaluator chunk after chunk, each step from
// the state the previous one left (as TestGDNChunkScanOnSim runs the
// step programs); it prints the agreement of the outputs and the final
// state and wants them bit for bit.
func TestGDNChunkScanLongOnSim(t *testing.T) {
	longtest.Skip(t, "a 64-chunk gdn_chunk_scan on the simulator (~2,048 tokens)")
	const N, H, D = 64, 2, 64
	tgt := target.Blackhole()
	op := gdnScanOp(t, 1, H, N, D, D, 0, N, ir.FP32)
	args := gdnChunkArgs(op, 7)
	got := gdnChunkRun(t, tgt, op, args, t.TempDir(), map[string]cpp.Source{})
	refArgs := append([][]float32(nil), args...)
	var wantO []float32
	for c := range N {
		want, err := ref.EvalOpData(gdnChunkOp(t, 1, H, N, D, D, c, ir.FP32), refArgs, ref.DefaultOptions())
		if err != nil {
			t.Fatal(err)
		}
		// o of chunk c for each head, in the scan's [1, H, N, 32, D] order.
		wantO = append(wantO, want[0].Data...)
		refArgs[6] = want[1].Data
	}
	// wantO is chunk-major ([N][H][32*D]); the scan's o is head-major.
	blk := ir.TileSize * D
	gotO := make([]float32, 0, len(wantO))
	for c := range N {
		for h := range H {
			gotO = append(gotO, got[0][(h*N+c)*blk:(h*N+c+1)*blk]...)
		}
	}
	for _, r := range []struct {
		name      string
		want, got []float32
	}{{"outputs", wantO, gotO}, {"final state", refArgs[6], got[1]}} {
		diff := gdnBitDiff(r.want, r.got)
		t.Logf("%s after %d tokens: PCC %.7f, max rel err %.3g, %d of %d elements differ", r.name, N*ir.TileSize, numerics.PCC(r.want, r.got), numerics.MaxRelErr(r.want, r.got), diff, len(r.want))
		if diff > 0 {
			t.Errorf("%s: %d elements differ from the reference; want bit for bit", r.name, diff)
		}
	}
}

// TestGDNChunkScanErrors: chunks past the end and an empty scan are clear
// errors, not panics.
func TestGDNChunkScanErrors(t *testing.T) {
	past := gdnScanOp(t, 1, 1, 4, 32, 32, 1, 3, ir.FP32)
	past.Attrs = ir.Attrs{"first": 2, "count": 3}
	empty := gdnScanOp(t, 1, 1, 4, 32, 32, 1, 3, ir.FP32)
	empty.Attrs = ir.Attrs{"first": 0, "count": 0}
	for _, c := range []struct {
		name string
		op   *ir.Op
		rule string
	}{
		{"chunks past the end", past, "gdn-chunk-index"},
		{"no chunk", empty, "attr"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := lower.Lower(c.op, lower.NewContext(target.Blackhole()))
			if err == nil || !strings.Contains(err.Error(), "rule "+c.rule) {
				t.Errorf("error %v, want rule %s", err, c.rule)
			}
		})
	}
}

// TestGDNChunkScanGroupsStateUpdate: the scan's compute runs the S'
// update's products a block of state tiles at a time (all S * egl, then
// all kd^T vNew, then the sums), so its FPU inits per chunk stay few: at
// the 27B's head dims (kt = 4, one value tile per item) at most 14 per
// chunk (11.9 with blocks of 4 tiles), where one init per op per state
// tile took 20.9.
func TestGDNChunkScanGroupsStateUpdate(t *testing.T) {
	tgt := target.Blackhole()
	const N = 8
	p, err := lower.Lower(gdnScanOp(t, 1, 2, N, 128, 128, 0, N, ir.FP32), lower.NewContext(tgt))
	if err != nil {
		t.Fatal(err)
	}
	params := timing.Default()
	pt, err := timing.Simulate(p, tgt, params, timing.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var initUS float64
	for _, k := range pt.Devices[0].Kernels {
		if k.Role != kir.RoleCompute {
			continue
		}
		for call, us := range k.Busy {
			if strings.HasSuffix(call, "_init") || strings.HasSuffix(call, "_init_short") {
				initUS += us
			}
		}
		break
	}
	perChunk := initUS * params.ClockHz / 1e6 / params.InitCycles / N
	t.Logf("%.2f us of FPU and SFPU inits: %.1f per chunk", initUS, perChunk)
	if perChunk > 14 {
		t.Errorf("the compute runs %.1f inits per chunk, want at most 14 (the S' update's ops grouped by block)", perChunk)
	}
}

// TestGDNChunkScanCodeFits: the scan's kernels pass Lower's checks (rule
// code-size: each TRISC's budget and the kernel config ring) at the 27B's
// per-device shapes of a whole 4,096-token prompt (128 chunks): 24 value
// heads (mesh 1x2, one value tile per item) and 48 (p300, two value tiles
// per item, whose peeled loops once took 28,512 bytes per TRISC).
func TestGDNChunkScanCodeFits(t *testing.T) {
	for _, tc := range []struct {
		name string
		H    int
		f    ir.DType
	}{
		{"fp32_24_heads", 24, ir.FP32},
		{"fp32_48_heads", 48, ir.FP32},
		{"bf16_48_heads", 48, ir.BF16},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tgt := target.Blackhole()
			if _, err := lower.Lower(gdnScanOp(t, 1, tc.H, 128, 128, 128, 0, 128, tc.f), lower.NewContext(tgt)); err != nil {
				t.Fatal(err)
			}
		})
	}
}
