package lower

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/ir/longtest"
	"github.com/tcc-dev/tcc/ir/numerics"
	"github.com/tcc-dev/tcc/sim/kexec"
)

// TestRowStreamKeptWeightSameBits runs the row-streamed norm tail with
// the weight kept (fused_collective_cached.go: the weight read and its
// offset added once, the squares summed in blocks through an fp32
// partial) and without (every row re-reads the weight and sums all its
// squares in one DEST section) on the simulated two-card ring, on the
// same random inputs, and checks that both h and normed are the same
// bits: the kept tail does the same arithmetic in the same order. The
// kept tail shares each link's last rows among groups of cores
// (rowSignal's last rows' groups: each core sums the whole row's squares,
// scales its part), which must not change a bit either, nor must the
// kept tail's rows that the adders write into its h CB (rowSignal.kept)
// instead of the tail reading them back from DRAM.
func TestRowStreamKeptWeightSameBits(t *testing.T) {
	longtest.Skip(t, "two simulated streaming rings (~10 CPU-s)")
	tc := fusedCCLCase{name: "row stream", n: 2, dt: ir.BF16, shape: []int{1, 512, 1024}, norm: true, offset: 1}
	run := func(keep bool) (hasPartial, grouped, keptRows bool, out [][][]float32) {
		old := keepRowWeight
		keepRowWeight = keep
		defer func() { keepRowWeight = old }()
		tgt, ctx := smallRing(false)
		tgt.GridY = 3 // ctx's target: with one adder a link, cores for two rows' groups
		ctx.Ring.WorkersPerLink = 1
		_, op := fusedCCLGraph(t, tc)
		p, err := Lower(op, ctx)
		require.NoError(t, err)
		require.NoError(t, kir.Validate(p, tgt))
		hasPartial = hasCB(p, "sum_squares_partial", p.Kernel("tail_compute").Cores)
		grouped = p.Kernel("writer").LookupArg("row_last1_1_x") != nil
		keptRows = p.Kernel("tail_reader").LookupArg("kept_rows") != nil
		links, err := kexec.TargetLinks(tgt, tc.n)
		require.NoError(t, err)
		c, err := kexec.NewCluster(tgt, tc.n, links)
		require.NoError(t, err)
		x, r, w := op.Operands[0], op.Operands[1], op.Operands[2]
		rng := rand.New(rand.NewPCG(7, 11))
		wv := randBF16(rng, w.Type.Shape.Numel(), 0, 0.5)
		bt, rows, cols := cclMatrix(x.Type.Shape)
		for d, dev := range c.Devices {
			for _, buf := range p.Buffers {
				_, err := dev.Alloc(buf)
				require.NoError(t, err)
			}
			writes := map[*ir.Value][]float32{
				x: randBF16(rng, x.Type.Shape.Numel(), float64(d)/4, 1),
				r: randBF16(rng, r.Type.Shape.Numel(), 0, 2),
				w: wv,
			}
			for _, v := range []*ir.Value{x, r, w} {
				vb, vr, vc := cclMatrix(v.Type.Shape)
				require.NoError(t, dev.WriteTiles(ctx.BufferName(v), numerics.TilizeBatch(writes[v], vb, vr, vc)))
			}
		}
		_, err = c.RunAll(p, kexec.RunOptions{})
		require.NoError(t, err)
		for _, dev := range c.Devices {
			var per [][]float32
			for _, res := range op.Results {
				tiles, err := dev.ReadTiles(ctx.BufferName(res))
				require.NoError(t, err)
				per = append(per, numerics.UntilizeBatch(tiles, bt, rows, cols))
			}
			out = append(out, per)
		}
		return hasPartial, grouped, keptRows, out
	}
	keptPartial, keptGroup, keptRows, kept := run(true)
	plainPartial, plainGroup, plainRows, plain := run(false)
	if !keptRows || plainRows {
		t.Fatalf("the adders write rows into the tail's h CB (kept_rows): kept %t (want true), plain %t (want false)", keptRows, plainRows)
	}
	if !keptPartial || plainPartial {
		t.Fatalf("sum_squares_partial CB on the tail: kept %t (want true), plain %t (want false)", keptPartial, plainPartial)
	}
	if !keptGroup || plainGroup {
		t.Fatalf("adders count the last two rows on groups of two (row_last1_1_x): kept %t (want true), plain %t (want false)", keptGroup, plainGroup)
	}
	bits := func(v [][][]float32) [][][]uint32 {
		var o [][][]uint32
		for _, d := range v {
			var dd [][]uint32
			for _, r := range d {
				rr := make([]uint32, len(r))
				for i, f := range r {
					rr[i] = math.Float32bits(f)
				}
				dd = append(dd, rr)
			}
			o = append(o, dd)
		}
		return o
	}
	if diff := cmp.Diff(bits(plain), bits(kept)); diff != "" {
		t.Errorf("h and normed bits, weight kept vs re-read per row (-plain +kept):\n%s", diff)
	}
}

// TestRowStreamGroupsCoverEveryTile checks rowSignal's split of a row
// stream's rows over its tail cores: every tile of every link's rows is
// scaled and written by exactly one core (an owner's whole rows, or its
// part of one of the last rows in a group), and a row's cores all read
// the whole row.
func TestRowStreamGroupsCoverEveryTile(t *testing.T) {
	for _, tc := range []struct {
		name             string
		links, per, g, k int
	}{
		{"owners only", 4, 18, 1, 0},
		{"last row in a group of four", 4, 14, 4, 1},
		{"last three rows in groups of two", 4, 12, 2, 3},
		{"one owner", 2, 1, 2, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const wt, rows = 8, 32
			n := tc.per + tc.k*tc.g
			rs := &rowSignal{wt: wt, m: 1, g: tc.g, k: tc.k, owners: make([][]kir.Core, tc.links)}
			for l := range tc.links {
				rs.owners[l] = make([]kir.Core, n)
			}
			got := make([]int, tc.links*rows*wt)
			for i := range tc.links * n {
				start, count, stride := rs.tailRange(i, rows*wt)
				c0, cn := rs.colRange(i)
				for r := range count {
					row := start + r*stride
					if row/rows != i/n {
						t.Fatalf("core %d (link %d) has row %d of link %d", i, i/n, row, row/rows)
					}
					for c := c0; c < c0+cn; c++ {
						got[row*wt+c]++
					}
				}
			}
			want := make([]int, len(got))
			for i := range want {
				want[i] = 1
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("times each tile is scaled (-want +got):\n%s", diff)
			}
		})
	}
}
