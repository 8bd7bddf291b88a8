package checkpoint_test

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/tcc-dev/tcc/codegen"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/ir/numerics"
	"github.com/tcc-dev/tcc/models/checkpoint"
)

// transpose is the row-major [cols, rows] transpose of m [rows, cols].
func transpose(m []float32, rows, cols int) []float32 {
	out := make([]float32, len(m))
	for r := 0; r < rows; r++ {
		for c := 0; c < cols; c++ {
			out[c*rows+r] = m[r*cols+c]
		}
	}
	return out
}

// A weight buffer in layout tile_t (programs.json: every tile stored
// transposed) converts to tiles whose values are
// transpose(host-quantize(transpose(W))) of the device's share W: the
// block-float exponents shared along the share's rows' dimension. Two
// weights of the small config are re-declared tile_t: a block float read
// from a transposed source (the converter's column path; its values
// differ from the same weight in tile layout) and a tile weight read as
// it is (the row path; the small config has no such block float).
func TestConvertTransposedTiles(t *testing.T) {
	f := setup(t)
	bufs := map[string]codegen.BufferEntry{}
	for _, b := range f.pf.Buffers {
		bufs[b.Name] = b
	}
	var picked []codegen.WeightEntry
	for _, byCol := range []bool{true, false} {
		for _, w := range f.pf.Weights {
			b := bufs[w.Buffer]
			blockFloat := b.DType == "bfp8_b" || b.DType == "bfp4_b"
			if w.Source != nil && w.Source.Computed == "" && w.Source.Transposed == byCol && len(b.Shape) == 2 && (blockFloat || !byCol) && b.Layout == "tile" {
				picked = append(picked, w)
				break
			}
		}
	}
	if len(picked) != 2 {
		t.Fatalf("picked %d weights (want a block float with a transposed source and a tile weight without)", len(picked))
	}
	t.Logf("tile_t: %s, %s", picked[0].Buffer, picked[1].Buffer)
	man := *f.pf.Manifest
	man.Weights = picked
	man.Buffers = slices.Clone(man.Buffers)
	for i, b := range man.Buffers {
		if b.Name == picked[0].Buffer || b.Name == picked[1].Buffer {
			man.Buffers[i].Layout = ir.TransposedTileLayoutText
		}
	}
	pf := *f.pf
	pf.Manifest = &man
	src, err := checkpoint.Open(write(t, f, checkpoint.FormBF16))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	cache := filepath.Join(t.TempDir(), "cache")
	if _, _, err := checkpoint.ConvertCache(src, &pf, cache, nil); err != nil {
		t.Fatal(err)
	}
	c, err := checkpoint.LoadCache(cache)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range picked {
		for d := 0; d < pf.Devices; d++ {
			b, ok := c.Buffer(d, w.Buffer)
			if !ok {
				t.Fatalf("no %q on device %d", w.Buffer, d)
			}
			cut, dt, rows, cols := cutOf(t, src, &pf, w, d)
			wb, err := numerics.PackTilesHost(dt, numerics.Tilize(transpose(cut, rows, cols), cols, rows))
			if err != nil {
				t.Fatal(err)
			}
			wt, _ := numerics.UnpackTiles(dt, wb)
			want := transpose(numerics.Untilize(wt, cols, rows), cols, rows)
			u, err := numerics.UnpackTiles(dt, b)
			if err != nil {
				t.Fatal(err)
			}
			got := numerics.UntilizeTransposed(u, rows, cols)
			if !slices.Equal(want, got) {
				t.Errorf("%s (source transposed %v) device %d: the tile_t values are not transpose(quantize(transpose(W)))", w.Buffer, w.Source.Transposed, d)
			}
			if dt.IsBlockFloat() && slices.Equal(got, expected(t, src, &pf, w, d)) {
				t.Errorf("%s device %d: tile_t gives tile layout's values", w.Buffer, d)
			}
		}
	}
}
