package lower_test

import (
	"testing"

	"github.com/tcc-dev/tcc/codegen/lower"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/sim/timing"
)

// simulatePrefill27B is the timing model's prediction of the 27B's
// prefill attention (mesh 1x2 per device: 12 q heads, 2 kv heads of dim
// 256) of S tokens at position pos of a 4k cache.
func simulatePrefill27B(t *testing.T, S, pos int) timing.DeviceTime {
	t.Helper()
	tgt := target.Blackhole()
	op := sdpaGatedOp(t, ir.BF16, 1, S, 12, 2, 256, 4096, "HiFi4")
	p, err := lower.Lower(op, lower.NewContext(tgt))
	if err != nil {
		t.Fatal(err)
	}
	flashAtPos(t, p, pos)
	pt, err := timing.Simulate(p, tgt, timing.Default(), timing.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return pt.Devices[0]
}

// TestFlashPrefillGateRowReads: the gate tiles of a 256-token item come
// from 32 tokens' [H, D] pages, of which each result row needs one face
// row per face (32 bytes of bf16): the reader reads the 64-byte spans
// holding them, so the program's DRAM reads stay near what it needs (q,
// K and V of the visible tiles once per group, 2 x 64 bytes of gate per
// row and D tile: 6.0 MB at position 0) instead of a whole 2 KB page per
// token and D tile (54.4 MB before: 12 x 8 items x 8 D tiles x 32 pages).
func TestFlashPrefillGateRowReads(t *testing.T) {
	dev := simulatePrefill27B(t, 256, 0)
	const S, H, Dt, Hkv = 256, 12, 8, 2
	q := int64(H * S * 256 * 2)
	gate := int64(H*S*Dt) * 2 * 64
	kv := int64(0)
	for st := range S / 32 {
		kv += int64(Hkv) * int64(st+1) * 2 * Dt * 2048
	}
	need := q + gate + kv
	t.Logf("DRAM read %.2f MB; q %.2f, gate rows %.2f, K and V once per group %.2f MB", float64(dev.DRAMRead)/1e6, float64(q)/1e6, float64(gate)/1e6, float64(kv)/1e6)
	if dev.DRAMRead > 2*need {
		t.Errorf("DRAM read %d bytes, want at most twice the %d the program needs", dev.DRAMRead, need)
	}
}

// TestFlashPrefillKBlocksBalanced: the 27B's 1,024-token prefill attention
// from position 0 against itself without each of two changes (predicted):
//
//   - K blocks: K read kPair (4) cache tiles per block (one read barrier
//     and one handshake of the group for 64 KB, not 16 KB), so compute
//     waits less for K and the program takes less time;
//   - balanced: the groups of the causal triangle go to the cores largest
//     first, in alternating order per round (shareRank), so the cores that
//     get the last token tile rows do not also get the most work; at least
//     4% less time than with the groups in (kv head, st) order
//     (682.1 against 745.6 us; K blocks: 682.1 against 714.9 us, compute's K
//     waits 319.0 against 349.4 us).
func TestFlashPrefillKBlocksBalanced(t *testing.T) {
	const S = 1024
	on := simulatePrefill27B(t, S, 0)
	kWait := func(d timing.DeviceTime) float64 {
		for _, k := range d.Kernels {
			if k.Kernel == "compute" {
				return k.Waits["cb_wait_front c_1"]
			}
		}
		t.Fatal("no compute kernel")
		return 0
	}
	t.Run("k_blocks", func(t *testing.T) {
		var off timing.DeviceTime
		withKnob(lower.PrefillKBlocks, false, func() { off = simulatePrefill27B(t, S, 0) })
		t.Logf("K blocks of 4 cache tiles: %.1f us (compute waits %.1f for K); of one: %.1f us (%.1f)", on.US, kWait(on), off.US, kWait(off))
		if on.US > 0.97*off.US || kWait(on) >= kWait(off) {
			t.Errorf("%.1f us, K waits %.1f; want under 97%% of %.1f us and less than %.1f", on.US, kWait(on), off.US, kWait(off))
		}
	})
	t.Run("balanced", func(t *testing.T) {
		var off timing.DeviceTime
		withKnob(lower.PrefillBalanced, false, func() { off = simulatePrefill27B(t, S, 0) })
		t.Logf("balanced %.1f us, in (kv head, st) order %.1f us", on.US, off.US)
		if on.US > 0.96*off.US {
			t.Errorf("balanced %.1f us, want under 96%% of %.1f", on.US, off.US)
		}
	})
}

// withKnob runs f with *knob set to v, then restores it.
func withKnob(knob *bool, v bool, f func()) {
	old := *knob
	*knob = v
	defer func() { *knob = old }()
	f()
}
