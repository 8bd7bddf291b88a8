package runtime

import (
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/ir/numerics"
	"github.com/tcc-dev/tcc/sim/ref"
)

// A weight stored in transposed tiles (the host packer of the simulator's
// uploads) shares its bfp8_b exponents down a column: with column c of
// binade c-16, the first tile's first exponent bytes are columns 0, 1, 2
// (biased 111, 112, 113; today's layout: row 0's largest, 126), the
// matrix comes back exactly, and the values equal sim/ref's StoreAs.
func TestEncodeTransposedTiles(t *testing.T) {
	const rows, cols = 32, 64
	w := make([]float32, rows*cols)
	for r := range rows {
		for c := range cols {
			w[r*cols+c] = float32((1 + float64(r%16)/64) * math.Exp2(float64(c%32-16)))
		}
	}
	typ := ir.T(ir.BFP8B, rows, cols)
	typ.TilesTransposed = true
	for _, transposed := range []bool{true, false} {
		tt := Tensor{Buffer: kir.Buffer{Name: "w", Mem: ir.DRAM, DType: ir.BFP8B, Layout: ir.TileLayout, PageSize: ir.BFP8B.TileBytes(), Pages: 2},
			Shape: ir.Shape{rows, cols}, TilesTransposed: transposed}
		b, err := Encode(tt, w)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Decode(tt, b)
		if err != nil {
			t.Fatal(err)
		}
		if !transposed {
			if b[0] != 126 || cmp.Equal(w, got) {
				t.Errorf("tile layout: first exponent %d (want 126) and the values kept exactly: %v (want false)", b[0], cmp.Equal(w, got))
			}
			continue
		}
		if diff := cmp.Diff([]byte{111, 112, 113}, b[:3]); diff != "" {
			t.Errorf("transposed tiles: first exponents (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(w, got); diff != "" {
			t.Errorf("transposed tiles: Decode(Encode(w)) (-want +got):\n%s", diff)
		}
		st, err := ref.StoreAs(typ, ref.Tensor{Shape: ir.Shape{rows, cols}, Data: w})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(st.Data, got); diff != "" {
			t.Errorf("transposed tiles: the uploaded values differ from sim/ref's StoreAs (-ref +uploaded):\n%s", diff)
		}
		r := numerics.QuantizeMatrixTransposed(ir.BFP8B, w, rows, cols)
		if !cmp.Equal(r, got) {
			t.Error("transposed tiles: the uploaded values differ from numerics.QuantizeMatrixTransposed")
		}
	}
}

// Builds that share a weight (a model's prefill and decode) must agree on
// whether its tiles are stored transposed: the buffer is encoded once, so a
// build reading the other layout would multiply transposed tiles. Alloc
// shares an identical spec and refuses one that differs only in
// TilesTransposed, naming both layouts.
func TestAllocSharedWeightTransposedTiles(t *testing.T) {
	w := func(transposed bool) Tensor {
		return Tensor{Buffer: kir.Buffer{Name: "w", Mem: ir.DRAM, DType: ir.BFP8B, Layout: ir.TileLayout, PageSize: ir.BFP8B.TileBytes(), Pages: 2},
			Shape: ir.Shape{32, 64}, TilesTransposed: transposed}
	}
	for _, tc := range []struct {
		name         string
		first, again bool
		wantErr      string
	}{
		{name: "both transposed", first: true, again: true},
		{name: "both tile", first: false, again: false},
		{name: "transposed then tile", first: true, again: false, wantErr: "already allocated as [32,64] bfp8_b tile_t"},
		{name: "tile then transposed", first: false, again: true, wantErr: "cannot reallocate it as [32,64] bfp8_b tile_t"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Open("sim", ir.Mesh{Rows: 1, Cols: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			if err := m.Alloc(w(tc.first)); err != nil {
				t.Fatal(err)
			}
			err = m.Alloc(w(tc.again))
			if tc.wantErr == "" {
				if err != nil {
					t.Errorf("identical spec: %v, want it shared", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("Alloc = %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
}
