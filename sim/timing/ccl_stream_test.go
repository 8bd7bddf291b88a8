package timing

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tcc-dev/tcc/codegen/lower"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/ir/longtest"
)

// predictPrefillAllReduce lowers the two-card all-reduce of qwen27b's
// prefill activation [1, rows, 5120] bf16 (with norm: the fused
// all_reduce_add_rmsnorm the step runs 127 times) and predicts it.
func predictPrefillAllReduce(t *testing.T, rows int, norm, oneWay bool) (us float64, slots string, linkFloorUS float64, dramRead int64) {
	t.Helper()
	tgt := target.Blackhole()
	b := ir.NewBuilder("ring")
	b.G.Mesh = ir.Mesh{Rows: 1, Cols: 2}
	xt := ir.T(ir.BF16, 1, rows, 5120)
	x, r := b.Input("x", xt), b.Input("residual", xt)
	b.Region("ccl", 0)
	if norm {
		b.Output(b.AllReduceAddRMSNorm(x, r, b.Weight("w", ir.T(ir.BF16, 5120)), 2, 1e-6, 1)...)
	} else {
		b.Output(b.AllReduce(x, 2))
	}
	g, err := b.Finish()
	require.NoError(t, err)
	ops := g.Ops()
	ctx := lower.NewContext(tgt)
	ctx.Ring.OneWay = oneWay
	p, err := lower.Lower(ops[len(ops)-1], ctx)
	require.NoError(t, err)
	pt, err := Simulate(p, tgt, Default(), Options{Devices: 2})
	require.NoError(t, err)
	es := p.Kernel("eth_sender")
	require.NotNil(t, es, "the two-card all-reduce has an ethernet sender")
	return pt.US(), es.Defines["CCL_STAGING_SLOTS"], pt.Devices[0].LinkFloorUS, pt.Devices[0].DRAMRead
}

// TestPrefillAllReduceStreams checks that the two-card all-reduce of a
// prefill activation streams (five receiving staging slots) over every
// link both ways, and predicts it against the link floor: the card's bytes over both
// directions of its ring links (each direction at the fitted link rate).
// One way (half the links' capacity; the ring before) it was predicted at
// 73.4 us (256 rows), 92.7 us (with the norm) and 1,236.6 us (4,096 rows
// with the norm); both ways 44.4, 64.7 and 796.2 us with one packet in
// flight a lane (a handshake round trip between packets); with two in
// flight (codegen/lower's streamTwoInFlight) 37.2, 59.8 and 752.1 us; with
// the norm tail's weight kept (codegen/lower's cachedWeight: read and
// offset once, not per row) 690.6 us at 4,096 rows: the ring's adders
// finish at 554 us (571 before) and the tail, one row's norm, ~135 us
// later (180 before); with each link's last three rows shared by groups
// of two tail cores (codegen/lower's rowSignal) 658.6 us: the rows that
// land last no longer take one core's norm (~125 us) after the ring;
// with three packets in flight a lane and five receiving slots
// (codegen/lower's BothWaysInFlight, BothWaysSlots) 643.9 us at 4,096 rows
// (1.49x -> 1.46x the floor; the ring's senders finish at 538 us, 556
// before, waiting for releases 41 us instead of 92); with the adders
// writing h into the row-streamed tail cores' h CBs as well as to DRAM
// (codegen/lower's rowSignal.kept: the rows a core's CB keeps beside the
// weight, two of its three at most; the rest read back as before) 620.0 us
// at 4,096 rows (1.40x), the card's DRAM reads 4.66 -> 3.72 tensors; with
// the kept-weight tail squaring and scaling four tiles per DEST section,
// writing its normed tiles a block per barrier and squaring a row read
// from DRAM block by block as it lands (codegen/lower's scaleBlock,
// rowBlockReads) 598.1 us (1.36x; 618.4 before): the last rows' norm after
// the ring's last packet ~98 -> ~85 us.
func TestPrefillAllReduceStreams(t *testing.T) {
	tgt, prm := target.Blackhole(), Default()
	links := 2 * len(tgt.Eth.RingEast)
	for _, tc := range []struct {
		name     string
		rows     int
		norm     bool
		maxRatio float64 // of the floor
		maxBoth  float64 // of the one-way prediction
		// maxDRAM bounds the DRAM bytes a card reads, in tensors of
		// [1, rows, 5120] bf16 (0: not checked).
		maxDRAM float64
	}{
		{"all_reduce", 256, false, 1.45, 0.7, 2},
		{"all_reduce_add_rmsnorm", 256, true, 2.3, 0.8, 0},
		{"all_reduce_add_rmsnorm 4096 rows", 4096, true, 1.37, 0.7, 3.8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bytes := tc.rows * 5120 * 2
			floor := prm.cyclesToUS(float64(bytes) / float64(links) / prm.EthBytesPerCycle)
			us, slots, linkFloor, dramRead := predictPrefillAllReduce(t, tc.rows, tc.norm, false)
			// The one-way ring at 4,096 rows (~1 CPU-s) is a long check
			// (TCC_LONG=1); the 256-row cases compare the ways by default.
			oneWay := tc.rows <= 256 || longtest.Enabled()
			one, oneFloor := math.Inf(1), 2*floor
			if oneWay {
				one, _, oneFloor, _ = predictPrefillAllReduce(t, tc.rows, tc.norm, true)
			}
			// The model's own link floor (the busiest link direction's
			// bytes, what --threads prints) is the card's bytes over
			// every direction both ways, and twice that one way.
			if math.Abs(linkFloor/floor-1) > 1e-9 || math.Abs(oneFloor/(2*floor)-1) > 1e-9 {
				t.Errorf("LinkFloorUS %.3f us both ways, %.3f us one way; want %.3f and %.3f", linkFloor, oneFloor, floor, 2*floor)
			}
			t.Logf("%s [1,%d,5120] bf16 on 1x2: %.2f us predicted (one way %.2f us), %.2fx the link floor %.1f us (%d B a card over %d link directions at %.1f B/cycle); %d B read from DRAM a card (%.2f tensors)",
				tc.name, tc.rows, us, one, us/floor, floor, bytes, links, prm.EthBytesPerCycle, dramRead, float64(dramRead)/float64(bytes))
			if slots != "5" {
				t.Errorf("CCL_STAGING_SLOTS = %q, want 5 (a streaming ring both ways: BothWaysSlots)", slots)
			}
			if us > tc.maxRatio*floor {
				t.Errorf("predicted %.2f us, %.2fx the link floor %.2f us: want at most %.2fx", us, us/floor, floor, tc.maxRatio)
			}
			if tc.maxDRAM > 0 && float64(dramRead) > tc.maxDRAM*float64(bytes) {
				t.Errorf("%d B read from DRAM a card, %.2f tensors: want at most %.2f", dramRead, float64(dramRead)/float64(bytes), tc.maxDRAM)
			}
			if us > tc.maxBoth*one {
				t.Errorf("both ways %.2f us, one way %.2f us: want at most %.2fx", us, one, tc.maxBoth)
			}
		})
	}
}
