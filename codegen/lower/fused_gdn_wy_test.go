package lower_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tcc-dev/tcc/codegen/cpp"
	"github.com/tcc-dev/tcc/codegen/lower"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/ir/longtest"
	"github.com/tcc-dev/tcc/ir/numerics"
	"github.com/tcc-dev/tcc/sim/ref"
	"github.com/tcc-dev/tcc/sim/timing"
)

// gdnWYOp builds a one-op graph: gdn_chunk_wy over [B, H, N, 32, D] fp32
// operands (gdn_chunk_prep, with q, when withQ; with exp_g = 1 when
// expG; with decay = 1 too, gamma g's row form [B, H, N, 1, 32], when
// decay; with rows = 1 too, eg and gamma one input g [B, H, N, 32], when
// rows; with beta_seq = 1 too, beta [B, N*32, H] tokens first, when
// rows[1]).
func gdnWYOp(t *testing.T, B, H, N, dk, dv int, withQ, expG, decay bool, rows ...bool) *ir.Op {
	t.Helper()
	const L = ir.TileSize
	b := ir.NewBuilder("gdn_chunk_wy")
	in := func(name string, s ...int) *ir.Value { return b.Input(name, ir.T(ir.FP32, s...)) }
	kh := H
	if len(rows) > 3 && rows[3] { // kx and k per key head, k_group = 3
		kh = H / 3
	}
	kx, k, v := in("kx", B, kh, N, L, dk), in("k", B, kh, N, L, dk), in("v", B, H, N, L, dv)
	byRows, betaSeq := len(rows) > 0 && rows[0], len(rows) > 1 && rows[1]
	betaShape := []int{B, H, N, L, 1}
	if betaSeq {
		betaShape = []int{B, N * L, H}
	}
	beta := in("beta", betaShape...)
	var eg, gamma *ir.Value
	if byRows {
		eg = in("g", B, H, N, L)
		gamma = eg
	} else if eg = in("eg", B, H, N, L, 1); decay {
		gamma = in("g_row", B, H, N, 1, L)
	} else {
		gamma = in("gamma", B, H, N, L, L)
	}
	b.Region(ir.RegionKind("gdn"), 0)
	var rs []*ir.Value
	switch {
	case len(rows) > 3 && rows[3]: // q, kx and k per key head, q_group = k_group = 3
		rs = b.GDNChunkPrep(kx, k, v, beta, eg, gamma, in("q", B, H/3, N, L, dk), ir.With("exp_g", 1), ir.With("decay", 1), ir.With("rows", 1), ir.With("beta_seq", 1), ir.With("q_group", 3), ir.With("k_group", 3))
	case len(rows) > 2 && rows[2]: // q per key head, q_group = 3
		rs = b.GDNChunkPrep(kx, k, v, beta, eg, gamma, in("q", B, H/3, N, L, dk), ir.With("exp_g", 1), ir.With("decay", 1), ir.With("rows", 1), ir.With("beta_seq", 1), ir.With("q_group", 3))
	case betaSeq:
		rs = b.GDNChunkPrep(kx, k, v, beta, eg, gamma, in("q", B, H, N, L, dk), ir.With("exp_g", 1), ir.With("decay", 1), ir.With("rows", 1), ir.With("beta_seq", 1))
	case byRows:
		rs = b.GDNChunkPrep(kx, k, v, beta, eg, gamma, in("q", B, H, N, L, dk), ir.With("exp_g", 1), ir.With("decay", 1), ir.With("rows", 1))
	case decay:
		rs = b.GDNChunkPrep(kx, k, v, beta, eg, gamma, in("q", B, H, N, L, dk), ir.With("exp_g", 1), ir.With("decay", 1))
	case expG:
		rs = b.GDNChunkPrep(kx, k, v, beta, eg, gamma, in("q", B, H, N, L, dk), ir.With("exp_g", 1))
	case withQ:
		rs = b.GDNChunkPrep(kx, k, v, beta, eg, gamma, in("q", B, H, N, L, dk))
	default:
		rs = b.GDNChunkWY(kx, k, v, beta, eg, gamma)
	}
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

// gdnWYArgs draws model-like operands (k rows of norm 4/sqrt(Dk), v
// N(0, 0.5), beta in (0, 1), eg = exp(g) and gamma = tril(exp(g_i -
// g_j)) of a running sum g of negative log decays); kx is k when shared,
// else k scaled by 0.9.
func gdnWYArgs(op *ir.Op, seed uint64, shared bool) [][]float32 {
	rng := rand.New(rand.NewPCG(seed, 13))
	args := make([][]float32, len(op.Operands))
	for i, v := range op.Operands {
		args[i] = make([]float32, v.Type.Shape.Numel())
	}
	dk := op.Operands[1].Type.Shape[4]
	for row := range len(args[1]) / dk {
		r := args[1][row*dk : (row+1)*dk]
		var ss float64
		for j := range r {
			x := rng.NormFloat64()
			r[j], ss = float32(x), ss+x*x
		}
		for j := range r {
			r[j] = float32(float64(r[j]) / math.Sqrt(ss) / math.Sqrt(float64(dk)) * 4)
		}
	}
	for j := range args[0] {
		args[0][j] = args[1][j]
		if !shared {
			args[0][j] *= 0.9
		}
	}
	for j := range args[2] {
		args[2][j] = float32(rng.NormFloat64() * 0.5)
	}
	if len(args) > 6 { // q: rows like k's
		for j := range args[6] {
			args[6][j] = args[1][(j+dk)%len(args[1])] * 1.5
		}
	}
	const L = ir.TileSize
	for c := range len(args[3]) / L {
		var gs [L]float64
		acc := 0.0
		for i := range L {
			args[3][c*L+i] = float32(rng.Float64())
			acc -= math.Abs(rng.NormFloat64()) * 0.1
			gs[i] = acc
			args[4][c*L+i] = float32(math.Exp(acc))
			if expG, _ := ir.GDNChunkPrepExpG(op.Attrs); expG { // operand eg is g
				args[4][c*L+i] = float32(acc)
			}
			if decay, _ := ir.GDNChunkPrepDecay(op.Attrs); decay { // gamma is g's row form
				args[5][c*L+i] = float32(acc)
				continue
			}
			for j := 0; j <= i; j++ {
				args[5][(c*L+i)*L+j] = float32(math.Exp(gs[i] - gs[j]))
			}
		}
	}
	return args
}

// TestGDNChunkWYOnSim runs gdn_chunk_wy and gdn_chunk_prep on the
// simulator and compares every result with the reference at the device
// formats (equal to the composed chain bit for bit: sim/ref
// TestGDNChunkWYEqualsComposed): bit for bit, with kx and k one buffer
// (the model's case: read once) and two, several users and more items
// than cores (two cores), and the 27B's head dims. Every program passes kir.Validate and its kernels a g++
// syntax check (TCC_LONG).
func TestGDNChunkWYOnSim(t *testing.T) {
	srcDir := t.TempDir()
	sources := map[string]cpp.Source{}
	two := *target.Blackhole()
	two.GridX, two.GridY = 2, 1
	cases := []struct {
		name            string
		tgt             *target.Target
		B, H, N, dk, dv int
		shared, withQ   bool
		expG, decay     bool
		rows, betaSeq   bool
		qGroup          bool // q per key head, q_group = 3
		kGroup          bool // q, kx and k per key head, q_group = k_group = 3
	}{
		{"shared_k", target.Blackhole(), 1, 2, 3, 64, 32, true, false, false, false, false, false, false, false},
		{"separate_kx", target.Blackhole(), 1, 2, 2, 32, 64, false, false, false, false, false, false, false, false},
		{"users2_2cores", &two, 2, 2, 3, 32, 32, true, false, false, false, false, false, false, false},
		{"27b_head_dims", target.Blackhole(), 1, 1, 2, 128, 128, true, false, false, false, false, false, false, false},
		{"prep_shared_k", target.Blackhole(), 1, 2, 3, 64, 32, true, true, false, false, false, false, false, false},
		{"prep_separate_kx_2cores", &two, 2, 2, 3, 32, 64, false, true, false, false, false, false, false, false},
		{"prep_27b_head_dims", target.Blackhole(), 1, 1, 2, 128, 128, true, true, false, false, false, false, false, false},
		{"prep_exp_g_separate_kx_2cores", &two, 2, 2, 3, 32, 64, false, true, true, false, false, false, false, false},
		{"prep_decay_separate_kx_2cores", &two, 2, 2, 3, 32, 64, false, true, true, true, false, false, false, false},
		{"prep_decay_27b_head_dims", target.Blackhole(), 1, 1, 2, 128, 128, true, true, true, true, false, false, false, false},
		{"prep_rows_separate_kx_2cores", &two, 2, 2, 3, 32, 64, false, true, true, true, true, false, false, false},
		{"prep_rows_N33_two_g_tiles", target.Blackhole(), 1, 1, 33, 32, 32, true, true, true, true, true, false, false, false},
		{"prep_rows_27b_head_dims", target.Blackhole(), 1, 1, 2, 128, 128, true, true, true, true, true, false, false, false},
		{"prep_beta_seq_users2_2cores", &two, 2, 3, 3, 32, 32, false, true, true, true, true, true, false, false},
		{"prep_beta_seq_H40_two_head_tiles", target.Blackhole(), 1, 40, 1, 32, 32, true, true, true, true, true, true, false, false},
		{"prep_q_group3_users2_2cores", &two, 2, 6, 3, 32, 32, false, true, true, true, true, true, true, false},
		{"prep_qk_group3_shared_k_users2_2cores", &two, 2, 6, 3, 32, 32, true, true, true, true, true, true, true, true},
		{"prep_qk_group3_separate_kx_2cores", &two, 1, 6, 2, 32, 32, false, true, true, true, true, true, true, true},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.N > ir.TileSize || c.H > ir.TileSize {
				longtest.Skip(t, "g's or beta's second tile (~1.5 CPU-s)")
			}
			if c.qGroup {
				longtest.Skip(t, "q (and k) per key head (~1.3 CPU-s)")
			}
			op := gdnWYOp(t, c.B, c.H, c.N, c.dk, c.dv, c.withQ, c.expG, c.decay, c.rows, c.betaSeq, c.qGroup, c.kGroup)
			args := gdnWYArgs(op, uint64(i+1), c.shared)
			want, err := ref.EvalOpData(op, args, ref.DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			ctx := lower.NewContext(c.tgt)
			if c.shared {
				ctx.Names = map[*ir.Value]string{op.Operands[0]: ctx.BufferName(op.Operands[1])}
			}
			got, _ := gdnRunWith(t, c.tgt, ctx, op, args, srcDir, sources, nil)
			for r, name := range []string{"u", "wk", "qg", "qk"}[:len(op.Results)] {
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
		longtest.Skip(t, "the g++ syntax check of the gdn_chunk_wy kernels")
		lower.CheckKernelSyntax(t, "gdn_chunk_wy kernels", t.TempDir(), sources, false)
	})
}

// TestGDNChunkWYBeatsComposed: the timing model's time of one
// gdn_chunk_wy at the 27B's shapes (mesh 1x2: 24 value heads, Dk = Dv =
// 128; 16 chunks, the 4,096 tokens' 128 under TCC_LONG) is below the sum of the five composed
// programs it replaces (mul, bmm_transpose_b_mul, tril_inverse, two
// bmm_scale_b), and gdn_chunk_prep's below the seven (with the query
// side's mul and bmm_transpose_b_mul) and below gdn_chunk_wy and those
// two.
func TestGDNChunkWYBeatsComposed(t *testing.T) {
	tgt := target.Blackhole()
	const B, H, D, L = 1, 24, 128, ir.TileSize
	N := 16 // 512 tokens; 4,096 (~9 CPU-s) under TCC_LONG
	if longtest.Enabled() {
		N = 128
	}
	b := ir.NewBuilder("composed")
	in := func(name string, s ...int) *ir.Value { return b.Input(name, ir.T(ir.FP32, s...)) }
	k, v := in("k", B, H, N, L, D), in("v", B, H, N, L, D)
	beta, eg, gamma := in("beta", B, H, N, L, 1), in("eg", B, H, N, L, 1), in("gamma", B, H, N, L, L)
	b.Region(ir.RegionKind("gdn"), 0)
	q := in("q", B, H, N, L, D)
	kb := b.Mul(k, beta)
	a := b.BMMTransposeBMul(kb, k, gamma)
	tr := b.TrilInverse(a)
	b.Output(b.BMMScaleB(tr, v, beta), b.BMMScaleB(tr, kb, eg), b.Mul(q, eg), b.BMMTransposeBMul(q, k, gamma))
	gr, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	us := func(op *ir.Op, ctx *lower.Context) float64 {
		p, err := lower.Lower(op, ctx)
		if err != nil {
			t.Fatal(err)
		}
		st, err := timing.Simulate(p, tgt, timing.Default(), timing.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return st.US()
	}
	composed, composedQ := 0.0, 0.0
	for i, op := range gr.Ops() {
		d := us(op, lower.NewContext(tgt))
		if i < 5 {
			composed += d
		}
		composedQ += d
	}
	fused := func(withQ bool) float64 {
		op := gdnWYOp(t, B, H, N, D, D, withQ, false, false)
		ctx := lower.NewContext(tgt)
		ctx.Names = map[*ir.Value]string{op.Operands[0]: ctx.BufferName(op.Operands[1])}
		return us(op, ctx)
	}
	wy, prep := fused(false), fused(true)
	t.Logf("gdn_chunk_wy %.2f us, the five composed programs %.2f us; gdn_chunk_prep %.2f us, the seven %.2f us", wy, composed, prep, composedQ)
	if wy >= composed {
		t.Errorf("gdn_chunk_wy takes %.2f us, the composed programs %.2f us: want it faster", wy, composed)
	}
	if prep >= composedQ || prep >= wy+composedQ-composed {
		t.Errorf("gdn_chunk_prep takes %.2f us, the composed programs %.2f us, gdn_chunk_wy and the query side's two %.2f us: want it faster than both", prep, composedQ, wy+composedQ-composed)
	}
}

// TestGDNChunkPrepDecayCostsNoMore (and the prep with rows and beta_seq
// within 3% of the decay's, which reads g's column and row and beta's
// column tiles from DRAM): the timing model's time of
// gdn_chunk_prep with decay (Γ = tril(exp(g - g_row)) computed on the
// device, its upper triangle zeroed by the exp of the mask's -2^100) at
// the 27B's shapes (24 value heads, Dk = Dv = 128, 16 chunks) is within
// 3% of the prep that reads Γ from DRAM instead (exp_g only): the same
// tiles move, and the writer no longer zeroes Γ's 496 upper elements and
// A's 528 an item (it zeroed them element by element: 163.4 us against
// 138.3 us, 18% more).
func TestGDNChunkPrepDecayCostsNoMore(t *testing.T) {
	tgt := target.Blackhole()
	const H, N, D = 24, 16, 128
	us := func(decay bool, rowsBetaSeq ...bool) float64 {
		op := gdnWYOp(t, 1, H, N, D, D, true, true, decay, rowsBetaSeq...)
		ctx := lower.NewContext(tgt)
		ctx.Names = map[*ir.Value]string{op.Operands[0]: ctx.BufferName(op.Operands[1])}
		p, err := lower.Lower(op, ctx)
		if err != nil {
			t.Fatal(err)
		}
		st, err := timing.Simulate(p, tgt, timing.Default(), timing.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return st.US()
	}
	decay, read := us(true), us(false)
	// The prep reading g's rows and the gates' beta (rows, beta_seq): two
	// tiles an item where it read three, and 96 element moves.
	rows := us(true, true, true)
	t.Logf("gdn_chunk_prep reading g's rows and beta tokens first %.2f us", rows)
	if rows > decay*1.03 {
		t.Errorf("gdn_chunk_prep with rows and beta_seq takes %.2f us, %.1f%% more than the %.2f us of the prep reading the column and row tiles: want at most 3%%", rows, (rows/decay-1)*100, decay)
	}
	t.Logf("gdn_chunk_prep with decay %.2f us, reading Γ %.2f us", decay, read)
	if decay > read*1.03 {
		t.Errorf("gdn_chunk_prep with decay takes %.2f us, %.1f%% more than the %.2f us of the prep reading Γ: want at most 3%%", decay, (decay/read-1)*100, read)
	}
}

// TestGDNChunkPrepZeroSign: gdn_chunk_prep's qk = r(q k^T) * Γ where Γ's
// upper triangle is 0 and q k^T is negative and exact in bf16 (q and k on
// a grid of 1/16): the program's ELWMUL writes +0 there (the FPU never
// writes -0) and the reference gives the same bits, where IEEE float32
// gives -0 (sim/ref TestDeviceMulZeroSign).
func TestGDNChunkPrepZeroSign(t *testing.T) {
	const L, D = ir.TileSize, 32
	tgt := target.Blackhole()
	op := gdnWYOp(t, 1, 1, 1, D, D, true, false, false)
	args := gdnWYArgs(op, 7, true)
	for _, x := range [][]float32{args[0], args[1], args[6]} { // kx, k, q on a grid of 1/16
		for j := range x {
			x[j] = float32(math.Round(float64(x[j])*16) / 16)
		}
	}
	negUpper := 0 // upper-triangle elements of q k^T below zero
	for i := range L {
		for j := i + 1; j < L; j++ {
			var s float64
			for d := range D {
				s += float64(args[6][i*D+d]) * float64(args[1][j*D+d])
			}
			if s < 0 {
				negUpper++
			}
		}
	}
	if negUpper == 0 {
		t.Fatal("no negative q k^T above the diagonal: the case does not test the sign")
	}
	want, err := ref.EvalOpData(op, args, ref.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	ctx := lower.NewContext(tgt)
	ctx.Names = map[*ir.Value]string{op.Operands[0]: ctx.BufferName(op.Operands[1])}
	got, _ := gdnRunWith(t, tgt, ctx, op, args, t.TempDir(), map[string]cpp.Source{}, nil)
	const qk = 3
	for i := range L {
		for j := i + 1; j < L; j++ {
			w, g := math.Float32bits(want[qk].Data[i*L+j]), math.Float32bits(got[qk][i*L+j])
			if w != 0 || g != 0 {
				t.Errorf("qk[%d,%d]: reference %#08x, program %#08x; want +0 from both (%d negative products above the diagonal)", i, j, w, g, negUpper)
			}
		}
	}
	for r, name := range []string{"u", "wk", "qg", "qk"} {
		if diff := gdnBitDiff(want[r].Data, got[r]); diff > 0 {
			t.Errorf("%s: %d of %d elements differ from the reference; want bit for bit", name, diff, len(want[r].Data))
		}
	}
}
