package lower_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/ir/longtest"
	"github.com/tcc-dev/tcc/sim/ref"
)

// userPositions are three users of a 1024-long cache at different
// positions: the first row, a row in the second tile, the last tile.
var userPositions = []int{0, 33, 1000}

// posWords is the pos operand's data for users at ps.
func posWords(ps []int) []float32 {
	w := make([]float32, len(ps))
	for i, p := range ps {
		w[i] = float32(p)
	}
	return w
}

// TestAttnPrologueUserPositionsOnSim: the decode prologue with pos [B]
// writes each user's k and v rows at that user's position (in place and
// as a copy), bit for bit as the reference; a program that wrote every
// user at pos[0] would leave users 1 and 2's rows unwritten.
func TestAttnPrologueUserPositionsOnSim(t *testing.T) {
	t.Parallel()
	const B, H, Hkv, D, R, L = 3, 4, 2, 64, 64, 1024
	for _, inPlace := range []bool{true, false} {
		t.Run(fmt.Sprintf("inplace_%v", inPlace), func(t *testing.T) {
			t.Parallel()
			g, _, op := attnGraphPos(t, B, H, Hkv, D, R, L, B)
			var alias map[*ir.Value]*ir.Value
			if inPlace {
				alias = attnStateAlias(g)
			}
			rng := rand.New(rand.NewPCG(5, 17))
			data := make([][]float32, len(op.Operands))
			for i, v := range op.Operands {
				data[i] = attnData(rng, v, 0)
			}
			data[9] = posWords(userPositions)
			r := attnRun(t, target.Blackhole(), op, alias, data)
			want, err := ref.EvalOp(op, r.in, ref.DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			for i, name := range []string{"q", "gate", "k_cache", "v_cache"} {
				attnCheckExact(t, name, want[i].Data, r.got[i])
			}
			// the reference writes user b's rows at its own position
			for b, p := range userPositions {
				row := ((b*Hkv)*L + p) * D
				if want[2].Data[row] == data[7][row] && want[2].Data[row+1] == data[7][row+1] {
					t.Errorf("user %d: the reference left k_cache row %d unwritten", b, p)
				}
			}
		})
	}
}

// TestFlashSDPAUserPositionsOnSim: flash decoding with pos [B], users at
// 0, 33 and 1000 of a 1024-long cache (rows past each user's position
// NaN), in groups of one core (several items, of different users, per
// core) and of several (each item's user read once), within checkFlash's
// bounds of the reference.
func TestFlashSDPAUserPositionsOnSim(t *testing.T) {
	t.Parallel()
	const B, L = 3, 1024
	for _, tc := range []struct {
		name         string
		cores, group int
	}{
		{"g1", 2, 1},
		{"g4", 2 * B * 4, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if tc.group > 1 {
				longtest.Skip(t, "users' positions in groups of several cores (~1.5 CPU-s; g1 runs by default)")
			}
			op := sdpaGatedOpPos(t, ir.BF16, B, 0, flashH, flashHkv, flashD, L, "HiFi4", B)
			rng := rand.New(rand.NewPCG(7, 31))
			data := make([][]float32, len(op.Operands))
			for i, v := range op.Operands {
				data[i] = attnData(rng, v, 0)
			}
			data[3] = posWords(userPositions)
			for _, c := range []int{1, 2} {
				for i := range data[c] {
					user := i / (flashHkv * L * flashD)
					if (i/flashD)%L > userPositions[user] {
						data[c][i] = float32(math.NaN())
					}
				}
			}
			r := attnRun(t, flashGrid(tc.cores), op, nil, data)
			if items, n := B*flashHkv, len(r.prog.Cores()); tc.group > 1 && n != items*tc.group {
				t.Fatalf("%d cores for %d items, want groups of %d", n, items, tc.group)
			}
			checkFlash(t, op, r)
		})
	}
}
