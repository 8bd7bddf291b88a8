package kexec_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/ir/numerics"
	"github.com/tcc-dev/tcc/sim/kexec"
)

// TestTransposeDest: transpose_wh_dest moves DEST element (r, c) to (c, r)
// and leaves the values as they were: in 16-bit DEST a bf16 value, in fp32
// DEST (is_32bit) all 32 bits, low mantissa bits included. The input's
// element (r, c) is (2r+1) * 2^(c-16) (times 1 + 2^-20 for fp32, bits only
// fp32 keeps), so every element is distinct and the expectation is written
// from the formula, not from the simulator's own transpose.
func TestTransposeDest(t *testing.T) {
	val := func(r, c int, fp32 bool) float32 {
		v := float64(2*r+1) * math.Ldexp(1, c-16)
		if fp32 {
			v *= 1 + 0x1p-20
		}
		return float32(v)
	}
	for _, tc := range []struct {
		name string
		dt   ir.DType
		fp32 bool
	}{
		{"16-bit DEST", ir.BF16, false},
		{"fp32 DEST", ir.FP32, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := make([]float32, numerics.TileElems)
			want := make([]float32, numerics.TileElems)
			for r := 0; r < numerics.TileDim; r++ {
				for c := 0; c < numerics.TileDim; c++ {
					in[numerics.FaceIndex(r, c)] = val(r, c, tc.fp32)
					want[numerics.FaceIndex(r, c)] = val(c, r, tc.fp32)
				}
			}
			cfg := kir.ComputeConfig{MathFidelity: ir.HiFi4, FP32DestAccEn: tc.fp32}
			p := pipeline(tc.dt, 1, false, cfg, func(b *kir.Builder) {
				b.CopyTileInit(0)
				b.CopyTile(0, kir.C(0), kir.C(0))
				b.TransposeDestInit(tc.fp32)
				b.TransposeDest(tc.fp32, kir.C(0))
			})
			d := setup(t, p, map[string][]float32{"a": in})
			runOK(t, d, p)
			if diff := cmp.Diff(want, readTiles(t, d, "out")); diff != "" {
				t.Errorf("out (-want +got):\n%s", diff)
			}
		})
	}
}

// TestTransposeDestRules: transpose_wh_dest needs its init, its init
// replaces the FPU op's (the next copy_tile needs its own init again), and
// is_32bit must match DEST's mode.
func TestTransposeDestRules(t *testing.T) {
	for _, tc := range []struct {
		name string
		fp32 bool
		body func(b *kir.Builder)
		msg  string
	}{
		{"no init", false, func(b *kir.Builder) {
			b.CopyTileInit(0)
			b.CopyTile(0, kir.C(0), kir.C(0))
			b.TransposeDest(false, kir.C(0))
		}, "transpose_wh_dest without its init"},
		{"copy after the transpose's init", false, func(b *kir.Builder) {
			b.CopyTileInit(0)
			b.TransposeDestInit(false)
			b.CopyTile(0, kir.C(0), kir.C(0))
		}, "copy_tile without its init"},
		{"16-bit moves on fp32 DEST", true, func(b *kir.Builder) {
			b.CopyTileInit(0)
			b.CopyTile(0, kir.C(0), kir.C(0))
			b.TransposeDestInit(false)
			b.TransposeDest(false, kir.C(0))
		}, "is_32bit must match DEST's mode"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dt := ir.BF16
			if tc.fp32 {
				dt = ir.FP32
			}
			p := pipeline(dt, 1, false, kir.ComputeConfig{MathFidelity: ir.HiFi4, FP32DestAccEn: tc.fp32}, tc.body)
			kir.Finish(p)
			d := setup(t, p, map[string][]float32{"a": randTiles(5, 1)})
			_, err := d.Run(p, kexec.RunOptions{})
			var re *kir.RuleError
			if !errors.As(err, &re) || re.Rule != kir.RuleInit || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("Run: err = %v, want rule init with %q", err, tc.msg)
			}
		})
	}
}
