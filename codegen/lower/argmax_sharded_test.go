package lower

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/sim/kexec"
	"github.com/tcc-dev/tcc/sim/ref"
)

// TestArgmaxShardedOnCluster runs argmax_sharded on two simulated cards,
// each holding 40 columns of every row (two tiles, so each card folds two
// cores' ranges before the exchange), on hand-made rows: equal maxima
// across the shard boundary (card 0's must win on both cards), NaN on
// either or both cards, -0 against +0 across the cards, all-negative and
// all -inf rows. Both cards must write the reference's index of the
// gathered row.
func TestArgmaxShardedOnCluster(t *testing.T) {
	const n = 40 // columns per card
	nan, inf, negZero := float32(math.NaN()), float32(math.Inf(1)), float32(math.Copysign(0, -1))
	type card struct {
		set  map[int]float32 // column (of the card's shard) -> value
		fill float32         // every other column
	}
	rows := []struct {
		name   string
		c0, c1 card
		want   float32 // index in the gathered row of 2n columns
	}{
		{"tie at the boundary", card{map[int]float32{39: 7}, -1}, card{map[int]float32{0: 7}, -1}, 39},
		{"tie across the cards", card{map[int]float32{5: 7}, -1}, card{map[int]float32{2: 7, 30: 7}, -1}, 5},
		{"maximum on card 1", card{map[int]float32{5: 7}, -1}, card{map[int]float32{3: 9}, -1}, n + 3},
		{"NaN on card 1 beats inf", card{map[int]float32{10: inf}, -1}, card{map[int]float32{1: nan}, -1}, n + 1},
		{"NaN on both cards", card{map[int]float32{30: nan}, -1}, card{map[int]float32{0: nan}, -1}, 30},
		{"-0 on card 0 ties +0 on card 1", card{map[int]float32{39: negZero}, -inf}, card{map[int]float32{0: 0}, -inf}, 39},
		{"+0 on card 0 ties -0 on card 1", card{map[int]float32{7: 0}, -1}, card{map[int]float32{2: negZero}, -1}, 7},
		{"all negative, card 0", card{map[int]float32{20: -2}, -5}, card{map[int]float32{0: -2.5}, -3}, 20},
		{"all negative, card 1", card{map[int]float32{20: -2}, -5}, card{map[int]float32{15: -1}, -3}, n + 15},
		{"all -inf", card{nil, -inf}, card{nil, -inf}, 0},
	}
	xs := [][]float32{make([]float32, len(rows)*n), make([]float32, len(rows)*n)}
	for r, row := range rows {
		for d, c := range []card{row.c0, row.c1} {
			for col := range n {
				v, ok := c.set[col]
				if !ok {
					v = c.fill
				}
				xs[d][r*n+col] = v
			}
		}
	}

	b := ir.NewBuilder("argmax_sharded")
	b.G.Mesh = ir.Mesh{Rows: 1, Cols: 2}
	xt := ir.T(ir.BF16, len(rows), 1, n)
	xt.Dist = ir.Dist{Axis: 2}
	x := b.Input("x", xt)
	b.Region("head", 0)
	b.Output(b.ArgmaxSharded(x, 2))
	g, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	op := g.Ops()[len(g.Ops())-1]
	tgt := target.Blackhole()
	ctx := NewContext(tgt)
	p, err := Lower(op, ctx)
	if err != nil {
		t.Fatal(err)
	}
	if cores := len(p.Cores()); cores < 2 {
		t.Fatalf("argmax_sharded over 2 tiles per card runs on %d cores, want 2 and the ethernet cores", cores)
	}
	envs := make([]map[*ir.Value]ref.Tensor, 2)
	for d := range envs {
		envs[d] = map[*ir.Value]ref.Tensor{x: {Shape: x.Type.Shape, Data: xs[d]}}
	}
	want, err := ref.EvalMesh(g, envs, ref.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	c, err := kexec.NewCluster(tgt, 2, kexec.RingLinks(2, tgt.Eth.RingEast, tgt.Eth.RingWest))
	if err != nil {
		t.Fatal(err)
	}
	for d, dev := range c.Devices {
		for _, buf := range p.Buffers {
			if _, err := dev.Alloc(buf); err != nil {
				t.Fatal(err)
			}
		}
		if err := upload(dev, ctx.BufferName(x), x, xs[d]); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.RunAll(p, kexec.RunOptions{}); err != nil {
		t.Fatal(err)
	}
	hand := make([]float32, len(rows))
	for r, row := range rows {
		hand[r] = row.want
	}
	if diff := cmp.Diff(hand, want[0][op.Result()].Data); diff != "" {
		t.Errorf("reference (-hand +ref):\n%s", diff)
	}
	for d, dev := range c.Devices {
		got, err := download(dev, ctx.BufferName(op.Result()), op.Result())
		if err != nil {
			t.Fatal(err)
		}
		for r, row := range rows {
			if got[r] != row.want {
				t.Errorf("card %d, row %d (%s): argmax %v, want %v", d, r, row.name, got[r], row.want)
			}
		}
	}
}
