package numerics

import (
	"math"
	"math/rand"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tcc-dev/tcc/ir"
)

// TestHostPackGroups checks hand-computed groups (face row 0 of a tile)
// under the exactly rounded packer (PackTiles) and tt-metal's host packer
// (PackTilesHost).
func TestHostPackGroups(t *testing.T) {
	// x8 = (2^23 + 2^17 + 1) * 2^-23: under shared exponent 128 (from 2.0)
	// its significand shifts right by 1 (dropping a 1 bit) leaving exactly
	// a tie on 17 bits: tt-metal rounds to even (32), exact rounding sees
	// 32.5000038 and rounds up (33).
	x8 := float32(math.Ldexp(float64(1<<23|1<<17|1), -23))
	// x4 likewise for bfp4_b (21 round bits): 2.5000002 -> 2 vs 3.
	x4 := float32(math.Ldexp(float64(1<<23|1<<21|1), -23))
	sub := float32(math.Ldexp(1, -130)) // subnormal
	for _, tt := range []struct {
		name        string
		dt          ir.DType
		vals        []float32
		exact, host []byte // exponent byte, then the group's mantissa bytes
	}{
		{"bfp8 tie after truncation", ir.BFP8B, []float32{2, x8}, []byte{128, 64, 33}, []byte{128, 64, 32}},
		{"bfp8 negative", ir.BFP8B, []float32{-1.5, 0.75}, []byte{127, 0x80 | 96, 48}, []byte{127, 0x80 | 96, 48}},
		{"bfp8 subnormal only", ir.BFP8B, []float32{sub}, []byte{1, 4, 0}, []byte{0, 0, 0}},
		{"bfp8 huge gap", ir.BFP8B, []float32{float32(math.Ldexp(1, 100)), 1}, []byte{227, 64, 0}, []byte{227, 64, 0}},
		{"bfp8 saturates", ir.BFP8B, []float32{float32(math.Ldexp(255, -7))}, []byte{127, 127, 0}, []byte{127, 127, 0}},
		{"bfp4 tie after truncation", ir.BFP4B, []float32{2, x4}, []byte{128, 3<<4 | 4}, []byte{128, 2<<4 | 4}},
		{"bfp4 negative", ir.BFP4B, []float32{-1, 0.5}, []byte{127, 2<<4 | 8 | 4}, []byte{127, 2<<4 | 8 | 4}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tile := make([]float32, TileElems)
			copy(tile, tt.vals)
			for _, v := range []struct {
				name string
				pack func(ir.DType, []float32) ([]byte, error)
				want []byte
			}{{"exact", PackTiles, tt.exact}, {"host", PackTilesHost, tt.host}} {
				b, err := v.pack(tt.dt, tile)
				if err != nil {
					t.Fatal(err)
				}
				got := append([]byte{b[0]}, b[GroupsPerTile:GroupsPerTile+len(v.want)-1]...)
				if diff := cmp.Diff(v.want, got); diff != "" {
					t.Errorf("%s packer (-want +got):\n%s", v.name, diff)
				}
			}
		})
	}
}

// TestHostPackMostlyAgrees: on normally distributed values the two
// packers agree except on a few codes in a million, and PackTilesHost's
// output decodes as a block-float tile.
func TestHostPackMostlyAgrees(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	vals := make([]float32, 1024*TileElems)
	for i := range vals {
		vals[i] = float32(rng.NormFloat64())
	}
	for _, dt := range []ir.DType{ir.BFP8B, ir.BFP4B} {
		a, _ := PackTiles(dt, vals)
		b, err := PackTilesHost(dt, vals)
		if err != nil {
			t.Fatal(err)
		}
		da, _ := UnpackTiles(dt, a)
		db, _ := UnpackTiles(dt, b)
		diff := 0
		for i := range da {
			if da[i] != db[i] {
				diff++
			}
		}
		t.Logf("%s: %d of %d values differ", dt, diff, len(vals))
		if diff > len(vals)/10000 {
			t.Errorf("%s: %d of %d values differ between the packers, want a few per million", dt, diff, len(vals))
		}
		if PCC(da, db) < 0.99999 {
			t.Errorf("%s: packers disagree beyond the last bit", dt)
		}
	}
}

// TestHostPackedValuesAreFixedPoints: values decoded from tt-metal-packed
// tiles re-pack to the same bytes with the simulator's packer, so the
// simulator's view of converted weights (Quantize of the decoded values,
// as the references round stored weights) is exactly the cache's bytes.
func TestHostPackedValuesAreFixedPoints(t *testing.T) {
	rng := rand.New(rand.NewSource(9))
	vals := make([]float32, 256*TileElems)
	for i := range vals {
		vals[i] = float32(rng.NormFloat64() * math.Pow(2, float64(rng.Intn(20)-10)))
	}
	for _, dt := range []ir.DType{ir.BFP8B, ir.BFP4B} {
		host, _ := PackTilesHost(dt, vals)
		dec, _ := UnpackTiles(dt, host)
		again, _ := PackTiles(dt, dec)
		if !cmp.Equal(host, again) {
			n := 0
			for i := range host {
				if host[i] != again[i] {
					n++
				}
			}
			t.Errorf("%s: %d of %d bytes change when decoded host-packed values are re-packed", dt, n, len(host))
		}
	}
}
