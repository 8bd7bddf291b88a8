package runtime

import (
	"fmt"
	"math"

	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/ir/numerics"
	"github.com/tcc-dev/tcc/sim/kexec"
)

// describeDiff says how the chip's copy got of buffer b differs from the
// simulator's want (same length, not equal). For a tiled float buffer it
// counts the differing elements, gives the largest difference in units in
// the last place of the stored format and the first differing element with
// both values; otherwise it names the first differing byte.
func describeDiff(b *kexec.DeviceBuffer, got, want []byte) string {
	k := 0
	for k < len(got) && got[k] == want[k] {
		k++
	}
	byteMsg := fmt.Sprintf("byte %d (page %d) is %#02x on the chip, %#02x on the simulator", k, k/max(b.PageSize, 1), got[k], want[k])
	shift, ok := ulpShift[b.DType]
	ulp := int64(1) << shift
	if !ok || b.Layout != ir.TileLayout {
		return byteMsg
	}
	g, err1 := numerics.UnpackTiles(b.DType, got)
	w, err2 := numerics.UnpackTiles(b.DType, want)
	if err1 != nil || err2 != nil || len(g) != len(w) {
		return byteMsg
	}
	n, first := 0, -1
	var worst int64
	for i := range g {
		if math.Float32bits(g[i]) == math.Float32bits(w[i]) {
			continue
		}
		n++
		if first < 0 {
			first = i
		}
		d := ordered(g[i])/ulp - ordered(w[i])/ulp
		worst = max(worst, d, -d)
	}
	if first < 0 {
		return byteMsg // only bytes with no value (padding) differ
	}
	tile, in := first/numerics.TileElems, first%numerics.TileElems
	r, c := numerics.FacePos(in)
	return fmt.Sprintf("%d of %d %s values differ (at most %d ulp); first: tile %d (%d,%d) is %g (%#x) on the chip, %g (%#x) on the simulator",
		n, len(g), b.DType, worst, tile, r, c, g[first], math.Float32bits(g[first])>>shift, w[first], math.Float32bits(w[first])>>shift)
}

// ulpShift is how many low float32 bits a stored value of the format lacks;
// one unit in its last place is 1<<ulpShift on ordered().
var ulpShift = map[ir.DType]uint{ir.FP32: 0, ir.BF16: 16}

// ordered maps a float32 to an integer that increases with its value, so
// the distance between two values counts the float32 steps between them.
func ordered(x float32) int64 {
	b := int64(math.Float32bits(x))
	if b&0x80000000 != 0 {
		return -(b & 0x7FFFFFFF)
	}
	return b
}
