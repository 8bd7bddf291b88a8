package lower_test

import (
	"testing"

	"github.com/tcc-dev/tcc/codegen/lower"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/sim/timing"
)

// TestFlashPrefillSharesKV: the 27B prefill attention of 256 tokens at
// position 3,840 of a 4k cache (mesh 1x2 per device: 12 q heads, 2 kv
// heads of dim 256; 96 items of one head and token tile row) reads each
// kv head's K and V once per group of the 6 q heads that share them (per
// token tile row and run of NoC-contiguous columns) and multicasts them
// to the group, instead of once per core: the DRAM bytes the timing model
// counts (K, V, q and the gate rows: 121 MB) stay under a third of the K
// and V bytes alone when 96 cores read their own (each item sees up to
// 128 cache tiles of 8 K and 8 V pages of 2 KB: about 4 MB, 392 MB for
// the program, as the program read before).
func TestFlashPrefillSharesKV(t *testing.T) {
	tgt := target.Blackhole()
	op := sdpaGatedOp(t, ir.BF16, 1, 256, 12, 2, 256, 4096, "HiFi4")
	p, err := lower.Lower(op, lower.NewContext(tgt))
	if err != nil {
		t.Fatal(err)
	}
	flashAtPos(t, p, 3840)
	pt, err := timing.Simulate(p, tgt, timing.Default(), timing.Options{})
	if err != nil {
		t.Fatal(err)
	}
	own := int64(0) // the K and V bytes of every item read by its own core
	for st := range 8 {
		tiles := (3840+32*st+31)/32 + 1
		own += 12 * int64(tiles) * 2 * 8 * 2048
	}
	dev := pt.Devices[0]
	t.Logf("%.1f us, %d cores, DRAM read %.1f MB (every core its own K and V: %.1f MB)", pt.US(), dev.Cores, float64(dev.DRAMRead)/1e6, float64(own)/1e6)
	if 3*dev.DRAMRead > own {
		t.Errorf("DRAM read %d bytes, want under a third of %d", dev.DRAMRead, own)
	}
}
