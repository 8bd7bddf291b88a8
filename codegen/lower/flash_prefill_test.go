package lower_test

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/ir/longtest"
)

// TestFlashPrefillOnSim: sdpa_prefill_gated over a 1024-long cache at
// positions 0 (one chunk, the diagonal tile-aligned), 33 (the diagonal
// across two tiles) and 500 (three chunks of 8 tiles, the last one shorter; the
// first item's rows at 500..511 see none of its last chunk, tile 16, so
// their new shift is min(+inf, nm)) with one and two tile
// rows of tokens, cache rows past the last visible position NaN
// (testSDPA), against the reference bit for bit (checkFlash: the
// reference follows the program's chunked online softmax; with the
// one-pass order of flash decoding's reference 1,308-3,931 elements of
// each case differ). At D = 64 the program multiplies q by the scale
// (1/8, q_scaled), at D = 96 every score tile (1/sqrt(96)).
func TestFlashPrefillOnSim(t *testing.T) {
	t.Parallel()
	for _, S := range []int{32, 64} {
		for _, pos := range []int{0, 33, 500} {
			t.Run(fmt.Sprintf("s%d_pos%d", S, pos), func(t *testing.T) {
				t.Parallel()
				if S == 64 && pos == 500 {
					longtest.Skip(t, "s32_pos500 and s64_pos33 cover this case's parts (~3 CPU-s)")
				}
				op := sdpaGatedOp(t, ir.BF16, 1, S, flashH, flashHkv, flashD, 1024, "HiFi4")
				testSDPA(t, target.Blackhole(), op, pos, uint64(pos+S))
			})
		}
	}
	t.Run("d128_s32_pos250", func(t *testing.T) {
		// Dt = 4: O's D tiles in two groups of 2 (chunkValuesGrouped),
		// rescaled in a later chunk
		t.Parallel()
		longtest.Skip(t, "s32_pos500 covers a group of 2 rescaled in later chunks (~1 CPU-s)")
		op := sdpaGatedOp(t, ir.BF16, 1, 32, flashH, flashHkv, 128, 1024, "HiFi4")
		testSDPA(t, target.Blackhole(), op, 250, 282)
	})
	t.Run("d96_s64_pos33", func(t *testing.T) {
		t.Parallel()
		longtest.Skip(t, "D = 96 (three D tiles) at 64 tokens (~1 CPU-s; s32_pos500 and s64_pos33 run by default)")
		op := sdpaGatedOp(t, ir.BF16, 1, 64, flashH, flashHkv, 96, 1024, "HiFi4")
		testSDPA(t, target.Blackhole(), op, 33, 97)
	})
}

// prefillCB is what a program's CBs take of a core's L1.
type prefillCB struct {
	Name         string
	Pages, Bytes int
}

// TestFlashPrefillL1IndependentOfCache: the 27B prefill attention (mesh
// 1x2 per device: 12 q heads, 2 kv heads of dim 256, 64 tokens) plans
// the same CBs for a 1024-long cache as for a 65536-long one.
func TestFlashPrefillL1IndependentOfCache(t *testing.T) {
	t.Parallel()
	tgt := target.Blackhole()
	cbs := map[int][]prefillCB{}
	for _, L := range []int{1024, 65536} {
		op := sdpaGatedOp(t, ir.BF16, 1, 64, 12, 2, 256, L, "HiFi4")
		p, err := lower.Lower(op, lower.NewContext(tgt))
		if err != nil {
			t.Fatalf("cache %d: %v", L, err)
		}
		if err := kir.Validate(p, tgt); err != nil {
			t.Fatalf("cache %d: %v", L, err)
		}
		for _, cb := range p.CBs {
			cbs[L] = append(cbs[L], prefillCB{cb.Name, cb.Pages, cb.Bytes()})
		}
	}
	if diff := cmp.Diff(cbs[1024], cbs[65536]); diff != "" {
		t.Errorf("CBs of a 65536-long cache differ from a 1024-long one's (-want +got):\n%s", diff)
	}
}

// TestFlashPrefillCostFollowsPosition: the timing model's time of the 27B
// prefill attention (64 tokens) grows with the position and not with the
// cache length. (The whole-cache program this replaces cost 1,480 us at a
// 4k cache at any position, and did not fit L1 at a 16k one.)
func TestFlashPrefillCostFollowsPosition(t *testing.T) {
	us := map[[2]int]float64{}
	for _, L := range []int{4096, 16384} {
		for _, pos := range []int{0, 4032} {
			op := sdpaGatedOp(t, ir.BF16, 1, 64, 12, 2, 256, L, "HiFi4")
			u, cores := simulateAt(t, op, pos)
			us[[2]int{L, pos}] = u
			t.Logf("cache %5d, position %4d: %3d cores, %8.2f us", L, pos, cores, u)
		}
	}
	for _, pos := range []int{0, 4032} {
		if a, b := us[[2]int{4096, pos}], us[[2]int{16384, pos}]; b > 1.1*a {
			t.Errorf("position %d: %.1f us with a 16k cache, %.1f with a 4k one; want within 10%%", pos, b, a)
		}
	}
	if t0, t1 := us[[2]int{4096, 0}], us[[2]int{4096, 4032}]; 3*t0 > t1 {
		t.Errorf("%.1f us at position 0, %.1f at 4032; want the first under a third of the second", t0, t1)
	}
}
