package lower_test

import (
	"fmt"
	"math"
	"math/rand/v2"
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

// flashGrid is Blackhole with a grid of n worker cores (rows of at most
// 11; n must factor so): a decode attention of `items` work items gets
// groups of n/items cores when its cost estimate wants at least that many
// (a long cache).
func flashGrid(n int) *target.Target {
	t := *target.Blackhole()
	t.GridY = (n + t.GridX - 1) / t.GridX
	t.GridX = n / t.GridY
	if t.GridX*t.GridY != n {
		panic(fmt.Sprintf("flashGrid(%d): no grid of rows of at most 11 cores", n))
	}
	return &t
}

// flashStats compares a flash-decoding result with the reference.
type flashStats struct {
	pcc    float64 // against the same-formats reference
	refPCC float64 // of the same-formats reference against fp32 math
	maxErr float64 // max |got - want| in bf16 ulps of max |want|
	differ int     // elements not bit for bit
	// the worst error against fp32 math of the device and of the
	// same-formats reference, in bf16 ulps of max |exact|
	devErr, refErr float64
}

func (s flashStats) String() string {
	return fmt.Sprintf("PCC %.7f, max err %.2f bf16 ulps of max |out|, %d elements differ; vs fp32 math: device %.2f ulps, reference %.2f (PCC %.7f)",
		s.pcc, s.maxErr, s.differ, s.devErr, s.refErr, s.refPCC)
}

// bf16ULP is one unit in the last place of bf16 at |x| (normal range).
func bf16ULP(x float64) float64 {
	e := math.Ilogb(math.Max(math.Abs(x), 0x1p-126))
	return math.Ldexp(1, e-7)
}

// maxAbs is the largest |x| of xs.
func maxAbs(xs []float32) float64 {
	m := 0.0
	for _, x := range xs {
		m = math.Max(m, math.Abs(float64(x)))
	}
	return m
}

// compareFlash computes flashStats of got against want (same formats)
// and exact (fp32 math).
func compareFlash(want, exact, got []float32) flashStats {
	s := flashStats{pcc: numerics.PCC(want, got), refPCC: numerics.PCC(exact, want)}
	ulp, eulp := bf16ULP(maxAbs(want)), bf16ULP(maxAbs(exact))
	for i := range want {
		if got[i] != want[i] {
			s.differ++
		}
		d := math.Abs(float64(got[i]) - float64(want[i]))
		if math.IsNaN(d) {
			d = math.Inf(1)
		}
		s.maxErr = math.Max(s.maxErr, d/ulp)
		s.devErr = math.Max(s.devErr, math.Abs(float64(got[i])-float64(exact[i]))/eulp)
		s.refErr = math.Max(s.refErr, math.Abs(float64(want[i])-float64(exact[i]))/eulp)
	}
	return s
}

// flashCase is one sdpa_decode_gated run: B users, H q heads, Hkv kv
// heads of dim D, an L-long cache, at pos, on a grid of cores cores
// (0: all of Blackhole's), with the group size the program must use.
type flashCase struct {
	name                 string
	B, H, Hkv, D, L, pos int
	cores, group         int
	dt                   ir.DType
	fid                  string
}

// Bounds of the flash-decoding result against the same-formats reference,
// which computes the whole row in one pass (attendGatedFPU). The online
// softmax rounds in another order: each core shifts its exponents by its
// own running maximum, so its P differs from the reference's by a factor
// and the FPU's tf32 reads of P (and of the fp32 intermediates) truncate
// other bits; the rescaled sums, the merge of the partials and 1/l taken
// before the rounding to q's dtype round elsewhere too. Each of the two
// is off fp32 math by up to about one bf16 ulp of the largest result
// (the rounding to q's dtype, then the gate's product), in different
// places: they differ by up to two (the 70 long cases: at most 2.00, the
// reference up to 1.63 ulps off fp32 math there, the device up to 1.45
// and never more than 0.15 further than the reference). So, with a
// margin, at HiFi4 (every model op's fidelity): max |got - want| <= 3
// bf16 ulps of max |want| and PCC >= 0.99999 (at least 0.999993 in those
// cases). At lower fidelities the FPU's products keep fewer bits and the
// two orders drift further apart, as each drifts from fp32 math: the
// bounds scale with the reference's own error e (ulps) and 1 - PCC
// against fp32 math: max |got - want| <= max(3, 2e) ulps and 1 - PCC <=
// max(1e-5, 2 (1 - PCC_ref)). Always, the device is no further from fp32
// math than the reference plus one ulp (it is closer in most long cases:
// its partial sums are shorter).
const (
	flashMinPCC  = 0.99999
	flashMaxDiff = 3 // bf16 ulps of the largest result
	flashMaxLoss = 1
)

// ok reports whether s is within the bounds above.
func (s flashStats) ok() bool {
	return 1-s.pcc <= max(1-flashMinPCC, 2*(1-s.refPCC)) && s.maxErr <= max(flashMaxDiff, 2*s.refErr) && s.devErr <= s.refErr+flashMaxLoss
}

// testFlash runs tc on the simulator (cache rows past pos NaN) and checks
// it against the reference within the bounds above; it also checks that
// the program split each item over tc.group cores.
func testFlash(t *testing.T, tc flashCase) flashStats {
	t.Helper()
	tgt := target.Blackhole()
	if tc.cores > 0 {
		tgt = flashGrid(tc.cores)
	}
	dt := tc.dt
	if dt == 0 {
		dt = ir.BF16
	}
	fid := tc.fid
	if fid == "" {
		fid = "HiFi4"
	}
	op := sdpaGatedOp(t, dt, tc.B, 0, tc.H, tc.Hkv, tc.D, tc.L, fid)
	rng := rand.New(rand.NewPCG(uint64(tc.pos), 31))
	data := make([][]float32, len(op.Operands))
	for i, v := range op.Operands {
		data[i] = attnData(rng, v, tc.pos)
	}
	data[3] = []float32{float32(tc.pos)} // exact (attnData rounds to bf16: 4095 would be 4096)
	for _, c := range []int{1, 2} {
		for i := range data[c] {
			if (i/tc.D)%tc.L > tc.pos {
				data[c][i] = float32(math.NaN())
			}
		}
	}
	r := attnRun(t, tgt, op, nil, data)
	if items, n := tc.B*tc.Hkv, len(r.prog.Cores()); tc.group > 1 && n != items*tc.group || tc.group == 1 && n > items {
		t.Fatalf("%s: %d cores for %d items, want groups of %d", r.prog.Name, n, items, tc.group)
	}
	return checkFlash(t, op, r)
}

// checkFlash checks the result of sdpa_decode_gated run r against the
// reference within the bounds above, and that of sdpa_prefill_gated bit
// for bit (its reference follows the program's order, attendFlashFPU).
func checkFlash(t *testing.T, op *ir.Op, r attnRunResult) flashStats {
	t.Helper()
	want, err := ref.EvalOp(op, r.in, ref.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	exact, err := ref.EvalOp(op, r.in, ref.ExactOptions())
	if err != nil {
		t.Fatal(err)
	}
	s := compareFlash(want[0].Data, exact[0].Data, r.got[0])
	t.Logf("%s: %d cores, %d simulator steps; %s", r.prog.Name, len(r.prog.Cores()), r.steps, s)
	if !s.ok() {
		t.Errorf("out: %s; want 1 - PCC <= max(%.0e, 2 (1 - the reference's)), max err <= max(%v, twice the reference's) ulps, error vs fp32 math <= the reference's + %v ulp", s, 1-flashMinPCC, flashMaxDiff, flashMaxLoss)
	}
	if op.Kind == ir.OpSDPAPrefillGated && s.differ > 0 {
		// the reference follows the flash prefill's chunked order
		// (attender.attendFlashFPU): bit for bit
		t.Errorf("out: %d of %d elements differ from the same-formats reference; want bit for bit (%s)", s.differ, len(r.got[0]), s)
	}
	return s
}

// The small config's attention per device at mesh 1x2: 4 q heads, 2 kv
// heads of dim 64 (items = 2B).
const flashH, flashHkv, flashD = 4, 2, 64

// TestFlashSDPAOnSim: sdpa_decode_gated at odd positions and split
// counts against the reference. Quick: a few short caches (groups of 1, 2
// and 3, a core with no tiles, an uneven split, a group of 12 merging
// eleven partials at once); TCC_LONG: a 4096-long cache at positions 0,
// 1, 31, 32, 33, 1000 and 4095, groups of 1, 2, 3, 5 and 11, B = 1 and
// 3. (G = 2 rows of a partial are live, so a gather slot stacks 16
// partials and one level is the cheapest tree for these groups; the
// combine's two-level trees, stacked too, are SplitCombine's tests'.)
func TestFlashSDPAOnSim(t *testing.T) {
	t.Parallel()
	quick := []flashCase{
		// 3 tiles over 2 cores (1 and 2 tiles), pos in the last tile's middle
		{name: "b1_l128_pos70_g2", B: 1, L: 128, pos: 70, cores: 4, group: 2},
		// one tile over 3 cores: two have none (the leader skips them)
		{name: "b3_l512_pos5_g3", B: 3, L: 512, pos: 5, cores: 18, group: 3},
		// several items per core, several chunks (11 tiles, chunks of 8)
		{name: "b3_l512_pos350_g1", B: 3, L: 512, pos: 350, cores: 2, group: 1},
		// groups of 12: 32 tiles over 11 cores (3 each, 2 on the last),
		// their partials stacked in one gather slot, merged at once
		{name: "b1_l1024_pos1000_g12_stacked", B: 1, L: 1024, pos: 1000, cores: 24, group: 12},
	}
	for _, tc := range quick {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.H, tc.Hkv, tc.D = flashH, flashHkv, flashD
			testFlash(t, tc)
		})
	}
	if !longtest.Enabled() {
		t.Log("the 4096-long cache cases are long checks (TCC_LONG=1)")
		return
	}
	for _, B := range []int{1, 3} {
		for _, g := range []int{1, 2, 3, 5, 11} {
			for _, pos := range []int{0, 1, 31, 32, 33, 1000, 4095} {
				tc := flashCase{name: fmt.Sprintf("b%d_g%d_pos%d", B, g, pos), B: B, H: flashH, Hkv: flashHkv, D: flashD, L: 4096, pos: pos,
					cores: 2 * B * g, group: g}
				t.Run(tc.name, func(t *testing.T) {
					t.Parallel()
					testFlash(t, tc)
				})
			}
		}
	}
}

// TestFlashSDPAKernelsCompile lowers the flash-decoding program in both
// forms (groups of one core with several items per core, and groups
// merged by SplitCombine; bf16 and fp32), validates each and runs the g++
// syntax check on every kernel (read_tile_value among them).
func TestFlashSDPAKernelsCompile(t *testing.T) {
	dir := t.TempDir()
	sources := map[string]cpp.Source{}
	for _, tc := range []struct {
		name  string
		dt    ir.DType
		B, L  int
		cores int // 0: Blackhole's grid
	}{
		{"g1", ir.BF16, 3, 512, 2},
		{"merged", ir.BF16, 1, 8192, 0},
		{"merged_fp32", ir.FP32, 2, 1024, 0},
	} {
		tgt := target.Blackhole()
		if tc.cores > 0 {
			tgt = flashGrid(tc.cores)
		}
		op := sdpaGatedOp(t, tc.dt, tc.B, 0, flashH, flashHkv, flashD, tc.L, "HiFi4")
		p, err := lower.Lower(op, lower.NewContext(tgt))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if err := kir.Validate(p, tgt); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		lower.WriteKernels(t, dir, tc.name, p, sources)
	}
	longtest.Skip(t, "the g++ syntax check of the flash-decoding kernels (~1 CPU-s; the lowering and validation above run in every suite)")
	lower.CheckKernelSyntax(t, "flash-decoding kernels", dir, sources, true)
}

// flashAtPos makes the reader of flash-decoding program p take pos as the
// constant pos instead of reading it: the timing model does not know the
// pos buffer's contents (it would read 0), and every loop count of the
// program follows from this one value (the compute kernel reads it from
// the page the reader writes).
func flashAtPos(t *testing.T, p *kir.Program, pos int) {
	t.Helper()
	if !readerAtPos(p, pos) {
		t.Fatalf("%s: no reader reads pos", p.Name)
	}
}

// readerAtPos is flashAtPos reporting whether a reader reads pos.
func readerAtPos(p *kir.Program, pos int) bool {
	for _, k := range p.Kernels {
		if k.Role != kir.RoleReader {
			continue
		}
		for i, s := range k.Body {
			if l, ok := s.(kir.Let); ok && l.Var.Name == "pos" {
				if _, ok := l.Value.(kir.L1Read32); ok {
					k.Body[i] = kir.Let{Var: l.Var, Value: kir.Ci(pos)}
					return true
				}
			}
		}
	}
	return false
}

// TestFlashSDPACostFollowsPosition: the timing model's time of the 27B
// attention (mesh 1x2 per device: 12 q heads, 2 kv heads of dim 256)
// grows with the position and hardly with the cache length: at one
// position a 16k cache costs about what a 4k cache does, and the last
// position of the 4k cache costs far more than position 1023. (The whole-
// cache program this replaces cost 509 us at a 4k cache at any position.)
func TestFlashSDPACostFollowsPosition(t *testing.T) {
	us := map[[2]int]float64{}
	for _, L := range []int{4096, 16384} {
		for _, pos := range []int{0, 1023, 4095} {
			_, op, _ := attnGraph(t, 1, 12, 2, 256, 64, L)
			u, cores := simulateAt(t, op, pos)
			us[[2]int{L, pos}] = u
			t.Logf("cache %5d, position %4d: %3d cores, %7.2f us", L, pos, cores, u)
		}
	}
	for _, pos := range []int{0, 1023, 4095} {
		if a, b := us[[2]int{4096, pos}], us[[2]int{16384, pos}]; b > 1.25*a {
			t.Errorf("position %d: %.1f us with a 16k cache, %.1f with a 4k one; want within 25%%", pos, b, a)
		}
	}
	for _, L := range []int{4096, 16384} {
		t0, t1, t4 := us[[2]int{L, 0}], us[[2]int{L, 1023}], us[[2]int{L, 4095}]
		if !(t0 < t1 && 1.3*t1 < t4) {
			t.Errorf("cache %d: %.1f, %.1f, %.1f us at positions 0, 1023, 4095; want growing with the position", L, t0, t1, t4)
		}
	}
}

// simulateAt lowers op, sets its position buffer to pos (flashAtPos) and
// returns the program's predicted time and core count.
func simulateAt(t *testing.T, op *ir.Op, pos int) (float64, int) {
	t.Helper()
	tgt := target.Blackhole()
	p, err := lower.Lower(op, lower.NewContext(tgt))
	if err != nil {
		t.Fatal(err)
	}
	flashAtPos(t, p, pos)
	pt, err := timing.Simulate(p, tgt, timing.Default(), timing.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return pt.US(), len(p.Cores())
}
