package runtime

import (
	"math/rand"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/ir/numerics"
)

func tensor(name string, t ir.TensorType) Tensor {
	ps, n := t.DType.TileBytes(), t.Shape.Tiles()
	if t.Layout == ir.RowMajorLayout {
		ps, n = t.Shape.Cols2D()*t.DType.ElemBytes(), t.Shape.Rows2D()
	}
	return Tensor{Buffer: kir.Buffer{Name: name, Mem: t.Mem, DType: t.DType, Layout: t.Layout, PageSize: ps, Pages: n}, Shape: t.Shape}
}

// TestUploadDownloadRoundTrip checks that Download(Upload(x)) is x rounded
// through the dtype's storage, for every layout and format.
func TestUploadDownloadRoundTrip(t *testing.T) {
	m, err := Open("sim", ir.Mesh{Rows: 1, Cols: 2})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(1))
	cases := []struct {
		name string
		typ  ir.TensorType
		ints bool
	}{
		{"bf16 tile 3d", ir.T(ir.BF16, 2, 33, 70), false},
		{"bfp8 tile", ir.T(ir.BFP8B, 64, 96), false},
		{"bfp4 tile", ir.T(ir.BFP4B, 32, 64), false},
		{"fp32 tile vector", ir.T(ir.FP32, 100), false},
		{"bf16 row major", ir.TensorType{Shape: ir.Shape{5, 48}, DType: ir.BF16, Layout: ir.RowMajorLayout}, false},
		{"uint32 ids", ir.TensorType{Shape: ir.Shape{7}, DType: ir.UInt32, Layout: ir.RowMajorLayout}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tt := tensor(tc.name, tc.typ)
			if err := m.Alloc(tt); err != nil {
				t.Fatal(err)
			}
			data := make([]float32, tc.typ.Shape.Numel())
			for i := range data {
				if tc.ints {
					data[i] = float32(rng.Intn(1000))
				} else {
					data[i] = float32(rng.NormFloat64())
				}
			}
			for dev := 0; dev < 2; dev++ {
				if err := m.Upload(dev, tc.name, data); err != nil {
					t.Fatal(err)
				}
				got, err := m.Download(dev, tc.name)
				if err != nil {
					t.Fatal(err)
				}
				want := numerics.QuantizeShape(tc.typ.DType, data, tc.typ.Shape)
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("device %d (-want +got):\n%s", dev, diff)
				}
			}
		})
	}
}

func TestErrors(t *testing.T) {
	if _, err := Open("blackhole", ir.Mesh{Rows: 1, Cols: 1}); err == nil || !strings.Contains(err.Error(), "no /dev/tenstorrent device exists") || !strings.Contains(err.Error(), "tt-kmd") || strings.Contains(err.Error(), "\n") {
		t.Errorf("blackhole backend: %v", err)
	}
	if _, err := Open("tpu", ir.Mesh{Rows: 1, Cols: 1}); err == nil || !strings.Contains(err.Error(), "unknown backend") {
		t.Errorf("unknown backend: %v", err)
	}
	m, _ := Open("sim", ir.Mesh{Rows: 1, Cols: 1})
	bad := tensor("x", ir.T(ir.BF16, 32, 32))
	bad.Pages = 2
	if err := m.Alloc(bad); err == nil || !strings.Contains(err.Error(), "layout needs 1") {
		t.Errorf("page mismatch: %v", err)
	}
	ok := tensor("y", ir.T(ir.BF16, 32, 32))
	if err := m.Alloc(ok); err != nil {
		t.Fatal(err)
	}
	if err := m.Upload(0, "y", make([]float32, 3)); err == nil || !strings.Contains(err.Error(), "got 3 values") {
		t.Errorf("short upload: %v", err)
	}
	if err := m.Upload(1, "y", make([]float32, 1024)); err == nil || !strings.Contains(err.Error(), "out of range") {
		t.Errorf("bad device: %v", err)
	}
	ids := tensor("ids", ir.TensorType{Shape: ir.Shape{2}, DType: ir.UInt32, Layout: ir.RowMajorLayout})
	if err := m.Alloc(ids); err != nil {
		t.Fatal(err)
	}
	if err := m.Upload(0, "ids", []float32{1, -2}); err == nil || !strings.Contains(err.Error(), "not a valid uint32") {
		t.Errorf("negative id: %v", err)
	}
}
