package multicore

import (
	"encoding/binary"
	"math"
	"math/rand"
	"testing"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower/blocks"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/ir/numerics"
)

// combineTol bounds |got - want| / sum_i s_i |O_i| for an element of
// SplitCombine's result (s_i = exp(m_i - M) / L, so the denominator is at
// most max_i |O_i| / l_i). The FPU truncates its fp32 operands to tf32
// (SrcA keeps 9 mantissa bits, SrcB 10), so each product w_i * l_i and
// O_i * s_i is off by less than 2^-9 + 2^-10 relatively; w_i enters L
// and s_i = w_i / L through the same tf32 read, so L's error moves every
// s_i by the same relative amount, the O * s products add theirs: 3 *
// 2^-9 in all, plus a few fp32 roundings (exp, 1/L, the products and
// sums). 2^-7 covers it with a margin.
const combineTol = 1.0 / 128

// TestSplitCombineOnSim runs SplitCombine alone on made-up partials
// (random m, l >= 1 and O = l * v with |v| <= 2, one core per case with
// m 200 lower, whose weight underflows to 0 in fp32) and compares every
// leader's result with the formula in float64 over the cores that have a
// partial (the group's first `used`; the others' pages hold NaN and must
// not be read). The cases take odd group and subgroup sizes (a last
// subgroup smaller than the others), one level and two, and run-time
// counts that leave whole subgroups out or use one subgroup of a
// two-level tree; sums l in [1/2, 1) (flash decoding's maxima are
// rounded); the leader's compute consuming the merged tiles itself (then)
// or the writer storing them.
func TestSplitCombineOnSim(t *testing.T) {
	tg := target.Blackhole()
	for _, tc := range []struct {
		name                 string
		first, group, groups int
		sub, used            int
		rows, width, low     int // low: the core with the much smaller m
		lmin                 float64
		then                 bool
		live                 int // rows of a tile row with data (0: all)
	}{
		{"four cores, one level", 5, 4, 1, 4, 4, 1, 4, 2, 1, false, 0},
		{"two groups of two, two rows", 12, 2, 2, 2, 2, 2, 2, 0, 1, false, 0},
		{"three of five, the low one last", 40, 5, 1, 5, 3, 1, 1, 2, 1, true, 0},
		{"sums below one", 20, 3, 1, 3, 3, 1, 2, 1, 0.5, false, 0},
		{"seven in threes (3, 3, 1)", 30, 7, 1, 3, 7, 1, 3, 4, 1, true, 0},
		{"seven in threes, four used (two subgroups)", 50, 7, 1, 3, 4, 1, 2, 3, 1, true, 0},
		{"seven in threes, two used (one subgroup)", 60, 7, 1, 3, 2, 1, 2, 0, 1, true, 0},
		{"two groups of eleven in fours (4, 4, 3), nine used", 70, 11, 2, 4, 9, 1, 2, 8, 0.5, true, 0},
		{"six live rows, eleven in fours, all", 20, 11, 1, 4, 11, 1, 3, 5, 1, true, 6},
		{"eleven in fives, all, writer stores", 0, 11, 1, 5, 11, 1, 2, 10, 1, false, 0},
		// stacked slots: 32/live partials per slot, a partial's rows
		// across the faces' middle, a last slot part empty, rows past
		// the last partial's
		{"six live rows, thirteen in one level (slots of 5, 5, 3)", 10, 13, 1, 13, 13, 1, 3, 7, 1, true, 6},
		{"six live rows, two groups of sixteen in eights, twelve used", 30, 16, 2, 8, 12, 1, 2, 11, 0.5, false, 6},
		{"five live rows, nine in one level, seven used, two tile rows", 70, 9, 1, 9, 7, 2, 2, 6, 1, true, 5},
		{"sixteen live rows, five in one level (slots of 2)", 90, 5, 1, 5, 5, 1, 2, 4, 1, false, 16},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := tc.group * tc.groups
			cores := coresFrom(tg, tc.first, n)
			rs := rangesOf(cores)
			per, outTiles := tc.rows*(tc.width+2), tc.rows*tc.width
			p := kir.NewProgram("combine")
			part := dramBuffer(p, "partials", ir.FP32.TileBytes(), n*per)
			out := dramBuffer(p, "out", ir.FP32.TileBytes(), tc.groups*outTiles)
			cbs := blocks.NewCBPlan(p, tg, rs)
			res, zero := cbs.Output("result", ir.FP32, 2), cbs.Input("zero", ir.BF16, 1)
			live := tc.live
			if live == 0 {
				live = ir.TileSize
			}
			sc, err := NewSplitCombine(p, tg, cbs, cores, rs, tc.group, tc.sub, tc.rows, tc.width, live, ir.FP32, res, zero, 0)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := sc.Subs() > 1, tc.sub < tc.group; got != want {
				t.Fatalf("%d subgroups of %d for a group of %d", sc.Subs(), sc.Sub, tc.group)
			}
			in := cbs.Input("partial_in", ir.FP32, per)

			rd := blocks.NewReaderKernel(p, rs)
			inAcc := access(t, tg, rd, part)
			first, rslot := rd.RuntimeArg("first"), rd.RuntimeArg("slot")
			b := rd.Builder()
			zt := blocks.Reserve(b, zero, kir.C(1), "zero_tile")
			blocks.FillWords(b, zt, ir.BF16.TileBytes(), 0)
			b.CBPushBack(zero, kir.C(1))
			b.If(kir.Lt(rslot, kir.Ci(tc.used)), func() {
				b.CBReserveBack(in, kir.Ci(per))
				l1 := b.Let("l1", kir.GetWritePtr{CB: in})
				b.For("pg", kir.C(0), kir.Ci(per), func(pg kir.Var) {
					blocks.ReadPageTo(b, inAcc, kir.Add(first, pg), kir.Add(l1, kir.Mul(pg, kir.Ci(ir.FP32.TileBytes()))))
				})
				b.NoCAsyncReadBarrier()
				b.CBPushBack(in, kir.Ci(per))
			})

			cp := blocks.NewComputeKernel(p, rs, kir.ComputeConfig{FP32DestAccEn: true, MathFidelity: ir.HiFi4})
			slot, used := cp.RuntimeArg("slot"), cp.RuntimeArg("used")
			c := blocks.NewCompute(p, cp)
			c.Startup(sc.Gather, sc.Gather, res)
			c.B.CBWaitFront(zero, kir.C(1))
			c.If(kir.Lt(slot, used), func() {
				c.B.CBWaitFront(in, kir.Ci(per))
				c.For("pg", kir.C(0), kir.Ci(per), func(pg kir.Var) {
					c.Acquire()
					c.Copy(in, pg, kir.C(0))
					c.PackOut(sc.Partial, 1)
				})
				c.B.CBPopFront(in, kir.Ci(per))
			}, nil)
			result := res
			if tc.then {
				result = blocks.NewCBPlan(p, tg, rs).Output("copied", ir.FP32, 2)
				sc.MergeThen(c, slot, used, func(kir.Expr) {
					c.B.CBWaitFront(res, kir.C(1))
					c.Acquire()
					c.Copy(res, kir.C(0), kir.C(0))
					c.B.CBPopFront(res, kir.C(1))
					c.PackOut(result, 1)
				})
			} else {
				sc.MergeThen(c, slot, used, nil)
			}
			c.B.CBPopFront(zero, kir.C(1))

			wr := blocks.NewWriterKernel(p, rs)
			ca := sc.Declare(wr)
			page, wused := wr.RuntimeArg("page"), wr.RuntimeArg("used")
			oAcc := access(t, tg, wr, out)
			b = wr.Builder()
			sc.Emit(b, ca, wused)
			b.If(kir.Eq(ca.Slot, kir.C(0)), func() { blocks.WritePages(b, oAcc, result, page, kir.Ci(outTiles)) })

			for i, core := range cores {
				vals, err := sc.Values(i)
				if err != nil {
					t.Fatal(err)
				}
				u := kir.U32(uint32(tc.used))
				rd.SetRuntimeArgs(core, kir.U32(uint32(i*per)), vals[0])
				cp.SetRuntimeArgs(core, vals[0], u)
				wr.SetRuntimeArgs(core, append(vals, kir.U32(uint32(i/tc.group*outTiles)), u)...)
			}
			o, m, l := randomPartials(rand.New(rand.NewSource(int64(n))), n, tc.rows, tc.width, tc.low, tc.lmin)
			data := encodePartials(o, m, l, tc.width)
			nan := math.Float32bits(float32(math.NaN()))
			for i := range n {
				if i%tc.group < tc.used {
					continue
				}
				for w := i * per * ir.FP32.TileBytes() / 4; w < (i+1)*per*ir.FP32.TileBytes()/4; w++ {
					binary.LittleEndian.PutUint32(data[4*w:], nan)
				}
				m[i] = nil // no partial
			}
			// L1 as a previous program may leave it: NaN wherever the
			// combine reads what it did not write
			got := runSimL1(t, tg, p, map[string][]byte{"partials": data}, "out", &nan)
			checkCombine(t, got, o, m, l, tc.group, tc.rows, tc.width, live)
		})
	}
}

// randomPartials makes core i's partials of rows q tile rows: m[i][q]
// uniform in [-4, 4) (200 lower on core low), rounded to bf16, l[i][q] in [1, 40) (lmin
// 1) or [lmin, 1) and o[i][q][d] = l * v, v uniform in [-2, 2), d <
// width*32.
func randomPartials(r *rand.Rand, cores, rows, width, low int, lmin float64) (o [][][]float64, m, l [][]float64) {
	for i := 0; i < cores; i++ {
		o, m, l = append(o, nil), append(m, nil), append(l, nil)
		for q := 0; q < rows*ir.TileSize; q++ {
			mi, li := float64(numerics.RoundBF16(float32(r.Float64()*8-4))), 1+r.Float64()*39
			if lmin < 1 {
				li = lmin + r.Float64()*(1-lmin)
			}
			if i == low {
				mi = float64(numerics.RoundBF16(float32(mi - 200)))
			}
			row := make([]float64, width*ir.TileSize)
			for d := range row {
				row[d] = li * (r.Float64()*4 - 2)
			}
			o[i], m[i], l[i] = append(o[i], row), append(m[i], mi), append(l[i], li)
		}
	}
	return o, m, l
}

// encodePartials lays the partials out as SplitCombine reads them: per
// core, per tile row, the width O tiles, m's tile and l's tile (values in
// column 0, zeros elsewhere), fp32 tiles.
func encodePartials(o [][][]float64, m, l [][]float64, width int) []byte {
	var out []byte
	tb := ir.FP32.TileBytes()
	for i := range o {
		for q0 := 0; q0 < len(m[i]); q0 += ir.TileSize {
			tiles := make([]byte, (width+2)*tb)
			put := func(tile, r, c int, v float64) {
				binary.LittleEndian.PutUint32(tiles[tile*tb+4*numerics.FaceIndex(r, c):], math.Float32bits(float32(v)))
			}
			for r := 0; r < ir.TileSize; r++ {
				for d, v := range o[i][q0+r] {
					put(d/ir.TileSize, r, d%ir.TileSize, v)
				}
				put(width, r, 0, m[i][q0+r])
				put(width+1, r, 0, l[i][q0+r])
			}
			out = append(out, tiles...)
		}
	}
	return out
}

// checkCombine compares each group's result tiles in got (rows*width per
// group, row-major) with the combine formula in float64 over the fp32
// inputs of the partials i with m[i] != nil, within combineTol.
func checkCombine(t *testing.T, got []byte, o [][][]float64, m, l [][]float64, group, rows, width, live int) {
	t.Helper()
	f32 := func(v float64) float64 { return float64(float32(v)) }
	tb := ir.FP32.TileBytes()
	for g := 0; g < len(o)/group; g++ {
		for q := 0; q < rows*ir.TileSize; q++ {
			if q%ir.TileSize >= live {
				continue
			}
			mx := math.Inf(-1)
			for i := g * group; i < (g+1)*group; i++ {
				if m[i] != nil {
					mx = math.Max(mx, f32(m[i][q]))
				}
			}
			var sum float64
			for i := g * group; i < (g+1)*group; i++ {
				if m[i] != nil {
					sum += math.Exp(f32(m[i][q])-mx) * f32(l[i][q])
				}
			}
			for d := 0; d < width*ir.TileSize; d++ {
				var want, scale float64
				for i := g * group; i < (g+1)*group; i++ {
					if m[i] == nil {
						continue
					}
					s := math.Exp(f32(m[i][q])-mx) / sum
					want += s * f32(o[i][q][d])
					scale += s * math.Abs(f32(o[i][q][d]))
				}
				tile := g*rows*width + q/ir.TileSize*width + d/ir.TileSize
				at := tile*tb + 4*numerics.FaceIndex(q%ir.TileSize, d%ir.TileSize)
				v := float64(math.Float32frombits(binary.LittleEndian.Uint32(got[at:])))
				if math.Abs(v-want) > combineTol*scale || math.IsNaN(v) {
					t.Fatalf("group %d, q row %d, column %d: got %v, want %v (tolerance %v)", g, q, d, v, want, combineTol*scale)
				}
			}
		}
	}
}
