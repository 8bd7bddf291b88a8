package lower_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/tcc-dev/tcc/codegen/lower"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/ir/longtest"
	"github.com/tcc-dev/tcc/sim/timing"
)

// simulatePrefill27B is the timing model's prediction of the 27B's
// prefill attention (mesh 1x2 per device: 12 q heads, 2 kv heads of dim
// 256) of S tokens at position pos of a 4k cache; with every knob at its
// default, simulated once per (S, pos) and kept for the other tests.
func simulatePrefill27B(t *testing.T, S, pos int) timing.DeviceTime {
	t.Helper()
	key := [2]int{S, pos}
	def := *lower.PrefillKBlocks && *lower.PrefillBalanced && *lower.PrefillQScaled && *lower.PrefillChunk == defaultPrefillChunk && *lower.PrefillKVBuffers == defaultPrefillKVBuffers && *lower.PrefillGateAfterQ && *lower.PrefillOutPages == 8 && *lower.PrefillKRowWait && *lower.PrefillOGroup
	prefillSims.Lock()
	defer prefillSims.Unlock()
	if d, ok := prefillSims.m[key]; ok && def {
		return d
	}
	d := simulatePrefill27BOnce(t, S, pos)
	if def {
		prefillSims.m[key] = d
	}
	return d
}

// defaultPrefillChunk is lower.PrefillChunk before any test sets it.
var defaultPrefillChunk = *lower.PrefillChunk

// defaultPrefillKVBuffers is lower.PrefillKVBuffers before any test sets it.
var defaultPrefillKVBuffers = *lower.PrefillKVBuffers

// prefillSims are simulatePrefill27B's kept predictions.
var prefillSims = struct {
	sync.Mutex
	m map[[2]int]timing.DeviceTime
}{m: map[[2]int]timing.DeviceTime{}}

func simulatePrefill27BOnce(t *testing.T, S, pos int) timing.DeviceTime {
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
// row per face (32 bytes of bf16): the writer reads, per row and D tile,
// the one aligned span from the face-0 row through the face-1 row (576
// bytes), so the program's DRAM reads stay near what it reads by design
// (q, K and V of the visible tiles once per group, one span per row and D
// tile: 18.1 MB at position 0) instead of a whole 2 KB page per token and
// D tile (54.4 MB of gate alone: 12 x 8 items x 8 D tiles x 32 pages).
func TestFlashPrefillGateRowReads(t *testing.T) {
	dev := simulatePrefill27B(t, 256, 0)
	const S, H, Dt, Hkv = 256, 12, 8, 2
	q := int64(H * S * 256 * 2)
	gate := int64(H*S*Dt) * (256*2 + 64)
	kv := int64(0)
	for st := range S / 32 {
		kv += int64(Hkv) * int64(st+1) * 2 * Dt * 2048
	}
	need := q + gate + kv
	t.Logf("DRAM read %.2f MB; q %.2f, gate spans %.2f, K and V once per group %.2f MB", float64(dev.DRAMRead)/1e6, float64(q)/1e6, float64(gate)/1e6, float64(kv)/1e6)
	if dev.DRAMRead > need*3/2 {
		t.Errorf("DRAM read %d bytes, want at most 1.5 times the %d the program reads by design", dev.DRAMRead, need)
	}
}

// TestFlashPrefillGateOnWriter: the prefill attention's writer, not its
// reader, reads the gate (the reader's kernel binds no gate buffer), in
// one span per row and D tile, and the 27B's 1,024-token program from
// position 0 takes 430.6 us predicted (487.5 before q_scaled and the K
// and V CBs of two chunks, TestFlashPrefillKVBuffers), against 655.1 us with
// the reader reading the gate's two 64-byte face-row spans per row and D
// tile after each item's first chunk (every core of a K/V group waited for
// the slowest one's gate reads before the next block).
func TestFlashPrefillGateOnWriter(t *testing.T) {
	op := sdpaGatedOp(t, ir.BF16, 1, 1024, 12, 2, 256, 4096, "HiFi4")
	p, err := lower.Lower(op, lower.NewContext(target.Blackhole()))
	require.NoError(t, err)
	gateArgs := map[string]bool{}
	for _, k := range p.Kernels {
		for _, a := range k.Args {
			if strings.HasPrefix(a.Name, "gate_addr") {
				gateArgs[k.Name] = true
			}
		}
	}
	if diff := cmp.Diff(map[string]bool{"writer": true}, gateArgs); diff != "" {
		t.Errorf("kernels binding the gate (-want +got):\n%s", diff)
	}
	dev := simulatePrefill27B(t, 1024, 0)
	t.Logf("%.1f us", dev.US)
	if dev.US > 560 {
		t.Errorf("%.1f us, want under 560 us (655.1 with the gate read by the reader)", dev.US)
	}
}

// TestFlashPrefillKBlocksBalanced: the 27B's prefill attention from
// position 0 against itself without each of two changes (predicted):
//
//   - K blocks (1,024 tokens): K read kPair (4) cache tiles per block (one
//     read barrier and one handshake of the group for 64 KB, not 16 KB), so
//     compute waits less for K and the program takes less time (430.6
//     against 444.6 us, compute's K waits 4.8 against 8.2 us; 480.5
//     against 513.9 and 92.5 against 117.9 before q_scaled and the K and
//     V CBs of two chunks, TestFlashPrefillKVBuffers);
//   - balanced (4,096 tokens, TCC_LONG: ~25 CPU-s): the groups of the
//     causal triangle go to the cores largest first, in alternating order
//     per round (shareRank), so the cores that get the last token tile rows
//     do not also get the most work; at least 0.5% less time than with the
//     groups in (kv head, st) order (2,786.7 against 2,813.7 us since the
//     softmax's cheaper exp, min shift and exp groups left the program
//     bound by its reader; 1.5% was asked before them: 3,699.0 against
//     3,786.6 us). Between the gate's move to the writer and the cheaper
//     exp the program was bound by compute, and the order's gain depends
//     on how the rounds fall (with chunks of 8: 6.5%
//     at 4,096 tokens, 3.5% at 3,072, none at 2,048, and at 1,536 it was
//     3.7% slower, 843.0 against 813.2 us).
func TestFlashPrefillKBlocksBalanced(t *testing.T) {
	kWait := func(d timing.DeviceTime) float64 { return computeWait(t, d, "cb_wait_front c_1") }
	t.Run("k_blocks", func(t *testing.T) {
		const S = 1024
		on := simulatePrefill27B(t, S, 0)
		var off timing.DeviceTime
		withKnob(lower.PrefillKBlocks, false, func() { off = simulatePrefill27B(t, S, 0) })
		t.Logf("K blocks of 4 cache tiles: %.1f us (compute waits %.1f for K); of one: %.1f us (%.1f)", on.US, kWait(on), off.US, kWait(off))
		if on.US > 0.97*off.US || kWait(on) >= kWait(off) {
			t.Errorf("%.1f us, K waits %.1f; want under 97%% of %.1f us and less than %.1f", on.US, kWait(on), off.US, kWait(off))
		}
	})
	t.Run("balanced", func(t *testing.T) {
		longtest.Skip(t, "the 27B's 4,096-token prefill attention simulated twice (~25 CPU-s)")
		const S = 4096
		on := simulatePrefill27B(t, S, 0)
		var off timing.DeviceTime
		withKnob(lower.PrefillBalanced, false, func() { off = simulatePrefill27B(t, S, 0) })
		t.Logf("balanced %.1f us, in (kv head, st) order %.1f us", on.US, off.US)
		if on.US > 0.995*off.US {
			t.Errorf("balanced %.1f us, want under 99.5%% of %.1f", on.US, off.US)
		}
	})
}

// TestFlashPrefillChunk: the prefill attention streams its cache tiles in
// chunks of prefillChunk, 8 (its scores CB holds one), as flash decoding
// does, and (TCC_LONG: ~16 CPU-s) the 27B's 4,096-token program from
// position 0 would take at least 4% less time in chunks of 16 (3,408.5
// against 3,711.4 us predicted: the rescale of O and l and the rescale
// factor's exp once per 16 cache tiles, not 8; before q_scaled and the
// two-chunk K/V buffers, at 1,024 tokens 480.5
// against 487.5, at 2,048 1,237.2 against 1,233.2), the lever left unused
// because of its rounding (prefillChunk).
func TestFlashPrefillChunk(t *testing.T) {
	scores := func(op *ir.Op) int {
		t.Helper()
		p, err := lower.Lower(op, lower.NewContext(target.Blackhole()))
		require.NoError(t, err)
		for _, cb := range p.CBs {
			if cb.Name == "scores" {
				return cb.Pages
			}
		}
		t.Fatalf("%s: no scores CB", op.Name())
		return 0
	}
	got := map[string]int{
		"prefill": scores(sdpaGatedOp(t, ir.BF16, 1, 256, 12, 2, 256, 4096, "HiFi4")),
		"decode":  scores(sdpaGatedOp(t, ir.BF16, 1, 0, 12, 2, 256, 4096, "HiFi4")),
	}
	if diff := cmp.Diff(map[string]int{"prefill": 8, "decode": 8}, got); diff != "" {
		t.Errorf("scores CB pages (-want +got):\n%s", diff)
	}
	t.Run("time", func(t *testing.T) {
		longtest.Skip(t, "the 27B's 4,096-token prefill attention simulated twice (~16 CPU-s)")
		on := simulatePrefill27B(t, 4096, 0)
		var wide timing.DeviceTime
		c := 16
		withInt(lower.PrefillChunk, c, func() { wide = simulatePrefill27B(t, 4096, 0) })
		t.Logf("chunks of 8: %.1f us; of %d: %.1f us", on.US, c, wide.US)
		// Chunks of 16 are the faster program (the lever stays measured),
		// but not the default: see prefillChunk.
		if wide.US > 0.96*on.US {
			t.Errorf("chunks of %d: %.1f us, want under 96%% of %.1f", c, wide.US, on.US)
		}
	})
}

// withInt runs f with *knob set to v, then restores it.
func withInt(knob *int, v int, f func()) {
	old := *knob
	*knob = v
	defer func() { *knob = old }()
	f()
}

// withKnob runs f with *knob set to v, then restores it.
func withKnob(knob *bool, v bool, f func()) {
	old := *knob
	*knob = v
	defer func() { *knob = old }()
	f()
}

// computeWait is the predicted microseconds d's compute kernel waited in
// wait (a call and its CB, as "cb_wait_front c_1").
func computeWait(t *testing.T, d timing.DeviceTime, wait string) float64 {
	t.Helper()
	for _, k := range d.Kernels {
		if k.Kernel == "compute" {
			return k.Waits[wait]
		}
	}
	t.Fatal("no compute kernel")
	return 0
}
