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
// leader's result with the formula in float64. The last three cases take
// the extensions flash decoding needs: sums l in [1/2, 1) (its maxima are
// rounded), the leader's compute consuming the merged tiles itself
// (MergeThen: it copies each to another CB, which the writer stores), and
// a run-time first partial (the ones before it hold NaN: they must not be
// read).
func TestSplitCombineOnSim(t *testing.T) {
	tg := target.Blackhole()
	for _, tc := range []struct {
		name                 string
		first, group, groups int
		rows, width, low     int // low: the core with the much smaller m
		lmin                 float64
		then                 bool
		skip                 int // the first partial merged
	}{
		{"four cores", 5, 4, 1, 1, 4, 2, 1, false, 0},
		{"two groups of two", 12, 2, 2, 2, 2, 0, 1, false, 0},
		{"three cores, the low one last", 40, 3, 1, 1, 1, 2, 1, false, 0},
		{"sums below one", 20, 3, 1, 1, 2, 1, 0.5, false, 0},
		{"compute consumes the result", 30, 5, 1, 1, 3, 4, 1, true, 0},
		{"the last three of five", 50, 5, 1, 1, 2, 3, 1, true, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := tc.group * tc.groups
			cores := coresFrom(tg, tc.first, n)
			rs := rangesOf(cores)
			per, outTiles := tc.rows*(tc.width+2), tc.rows*tc.width
			p := kir.NewProgram("combine")
			part := dramBuffer(p, "partials", ir.FP32.TileBytes(), n*per)
			out := dramBuffer(p, "out", ir.FP32.TileBytes(), tc.groups*outTiles)
			sc := NewSplitCombine(p, tg, blocks.NewCBPlan(p, tg, rs), cores, rs, tc.group, tc.rows, tc.width, ir.FP32, 0)

			rd := blocks.NewReaderKernel(p, rs)
			in := access(t, tg, rd, part)
			first := rd.RuntimeArg("first")
			b := rd.Builder()
			b.CBReserveBack(sc.X.Partial, kir.Ci(per))
			l1 := b.Let("l1", kir.GetWritePtr{CB: sc.X.Partial})
			b.For("pg", kir.C(0), kir.Ci(per), func(pg kir.Var) {
				blocks.ReadPageTo(b, in, kir.Add(first, pg), kir.Add(l1, kir.Mul(pg, kir.Ci(ir.FP32.TileBytes()))))
			})
			b.NoCAsyncReadBarrier()
			b.CBPushBack(sc.X.Partial, kir.Ci(per))

			cp := blocks.NewComputeKernel(p, rs, kir.ComputeConfig{FP32DestAccEn: true, MathFidelity: ir.HiFi4})
			leader, skip := cp.RuntimeArg("leader"), cp.RuntimeArg("first")
			c := blocks.NewCompute(p, cp)
			c.Startup(sc.X.Gather, sc.X.Gather, sc.Out)
			result := sc.Out
			if tc.then {
				result = blocks.NewCBPlan(p, tg, rs).Output("copied", ir.FP32, 2)
				sc.MergeThen(c, leader, skip, func() {
					c.B.CBWaitFront(sc.Out, kir.C(1))
					c.Acquire()
					c.Copy(sc.Out, kir.C(0), kir.C(0))
					c.B.CBPopFront(sc.Out, kir.C(1))
					c.PackOut(result, 1)
				})
			} else {
				sc.Merge(c, leader)
			}

			wr := blocks.NewWriterKernel(p, rs)
			ea := sc.X.Declare(wr)
			page := wr.RuntimeArg("page")
			oAcc := access(t, tg, wr, out)
			b = wr.Builder()
			sc.X.Emit(b, ea)
			b.If(kir.Ne(ea.Leader, kir.C(0)), func() { blocks.WritePages(b, oAcc, result, page, kir.Ci(outTiles)) })

			for i, core := range cores {
				ex, err := sc.X.Values(i, wr.NoC)
				if err != nil {
					t.Fatal(err)
				}
				rd.SetRuntimeArgs(core, kir.U32(uint32(i*per)))
				cp.SetRuntimeArgs(core, ex[0], kir.U32(uint32(tc.skip)))
				wr.SetRuntimeArgs(core, append(ex, kir.U32(uint32(i/tc.group*outTiles)))...)
			}
			o, m, l := randomPartials(rand.New(rand.NewSource(int64(n))), n, tc.rows, tc.width, tc.low, tc.lmin)
			data := encodePartials(o, m, l, tc.width)
			nan := math.Float32bits(float32(math.NaN()))
			for g := 0; g < tc.groups; g++ {
				for i := g * tc.group; i < g*tc.group+tc.skip; i++ {
					for w := i * per * ir.FP32.TileBytes() / 4; w < (i+1)*per*ir.FP32.TileBytes()/4; w++ {
						binary.LittleEndian.PutUint32(data[4*w:], nan)
					}
					m[i] = nil // skipped
				}
			}
			got := runSim(t, tg, p, map[string][]byte{"partials": data}, "out")
			checkCombine(t, got, o, m, l, tc.group, tc.rows, tc.width)
		})
	}
}

// randomPartials makes core i's partials of rows q tile rows: m[i][q]
// uniform in [-4, 4) (200 lower on core low), l[i][q] in [1, 40) (lmin
// 1) or [lmin, 1) and o[i][q][d] = l * v, v uniform in [-2, 2), d <
// width*32.
func randomPartials(r *rand.Rand, cores, rows, width, low int, lmin float64) (o [][][]float64, m, l [][]float64) {
	for i := 0; i < cores; i++ {
		o, m, l = append(o, nil), append(m, nil), append(l, nil)
		for q := 0; q < rows*ir.TileSize; q++ {
			mi, li := r.Float64()*8-4, 1+r.Float64()*39
			if lmin < 1 {
				li = lmin + r.Float64()*(1-lmin)
			}
			if i == low {
				mi -= 200
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
func checkCombine(t *testing.T, got []byte, o [][][]float64, m, l [][]float64, group, rows, width int) {
	t.Helper()
	f32 := func(v float64) float64 { return float64(float32(v)) }
	tb := ir.FP32.TileBytes()
	for g := 0; g < len(o)/group; g++ {
		for q := 0; q < rows*ir.TileSize; q++ {
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
