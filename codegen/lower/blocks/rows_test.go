package blocks

import (
	"fmt"
	"testing"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/ir/numerics"
)

// rowsCase is one tile edit of TestRowBlocks: the output tile starts as
// the source tile (fromSrc) or as all -1, then edit runs with the source
// tile at src, the output at dst and a zero tile at zeros.
type rowsCase struct {
	name    string
	fromSrc bool
	edit    func(b *kir.Builder, src, dst, zeros kir.Expr, eb int) error
	// want is the expected output element (r, c) given the source tile.
	want func(src []float32, r, c int) float32
}

func TestRowBlocks(t *testing.T) {
	var cases []rowsCase
	for _, from := range []int{0, 1, 3, 15, 16, 17, 31, 32} {
		cases = append(cases, rowsCase{
			name: fmt.Sprintf("clear_from_%d", from), fromSrc: true,
			edit: func(b *kir.Builder, _, dst, zeros kir.Expr, eb int) error {
				ClearRows(b, dst, zeros, from, eb)
				return nil
			},
			want: func(src []float32, r, c int) float32 {
				if r >= from {
					return 0
				}
				return src[r*TileDim+c]
			},
		})
	}
	for _, cp := range [][3]int{{1, 0, 3}, {0, 3, 1}, {10, 14, 10}, {0, 16, 16}, {20, 2, 12}, {0, 0, 32}} {
		sr, dr, n := cp[0], cp[1], cp[2]
		cases = append(cases, rowsCase{
			name: fmt.Sprintf("copy_%d_rows_%d_to_%d", n, sr, dr),
			edit: func(b *kir.Builder, src, dst, _ kir.Expr, eb int) error {
				return CopyRows(b, src, dst, sr, dr, n, eb)
			},
			want: func(src []float32, r, c int) float32 {
				if r >= dr && r < dr+n {
					return src[(r-dr+sr)*TileDim+c]
				}
				return -1
			},
		})
	}
	cases = append(cases, rowsCase{
		name: "move_elem_5_20_to_31_1", fromSrc: true,
		edit: func(b *kir.Builder, src, dst, _ kir.Expr, eb int) error {
			MoveElem(b, src, kir.C(5), kir.C(20), dst, kir.C(31), kir.C(1), eb)
			return nil
		},
		want: func(src []float32, r, c int) float32 {
			if r == 31 && c == 1 {
				return src[5*TileDim+20]
			}
			return src[r*TileDim+c]
		},
	})

	tgt := target.Blackhole()
	for _, dt := range []ir.DType{ir.BF16, ir.FP32} {
		for _, tc := range cases {
			t.Run(fmt.Sprintf("%s/%s", dt, tc.name), func(t *testing.T) {
				eb := ElemBytes(dt)
				tb := dt.TileBytes()
				srcBuf := kir.Buffer{Name: "src", Mem: ir.DRAM, DType: dt, Layout: ir.TileLayout, PageSize: tb, Pages: 1}
				extra := []kir.CB{{Index: 24, PageSize: tb, Pages: 1, Format: dt}, {Index: 25, PageSize: tb, Pages: 1, Format: dt}}
				var editErr error
				d, p := dmProgram(t, tgt, []kir.Buffer{srcBuf}, dt, tb, 1, extra, func(k *kir.Kernel, b *kir.Builder) {
					acc, err := NewAccess(k, tgt, "src_addr", srcBuf)
					if err != nil {
						t.Fatal(err)
					}
					zeros := Scratch(b, 24, "zeros")
					FillWords(b, zeros, tb, 0)
					src := Scratch(b, 25, "src")
					ReadPageTo(b, acc, kir.C(0), src)
					b.CBReserveBack(16, kir.C(1))
					out := b.Let("out", kir.GetWritePtr{CB: 16})
					if tc.fromSrc {
						ReadPageTo(b, acc, kir.C(0), out)
					} else {
						FillWords(b, out, tb, FillWord(dt, -1))
					}
					b.NoCAsyncReadBarrier()
					editErr = tc.edit(b, src, out, zeros, eb)
					b.NoCAsyncReadBarrier()
					b.CBPushBack(16, kir.C(1))
					ReleaseScratch(b, 25)
					ReleaseScratch(b, 24)
				})
				if editErr != nil {
					t.Fatal(editErr)
				}
				vals := make([]float32, TileDim*TileDim)
				for i := range vals {
					vals[i] = float32(i%251) + 1
				}
				if err := d.WritePages("src", 0, tileBytesOf(t, dt, vals)); err != nil {
					t.Fatal(err)
				}
				run(t, d, p)
				raw, err := d.ReadPages("dst", 0, 1)
				if err != nil {
					t.Fatal(err)
				}
				tile, err := numerics.UnpackTile(dt, raw)
				if err != nil {
					t.Fatal(err)
				}
				got := numerics.Untilize(tile, TileDim, TileDim)
				for r := range TileDim {
					for c := range TileDim {
						if w := tc.want(vals, r, c); got[r*TileDim+c] != w {
							t.Fatalf("element (%d, %d) = %v, want %v", r, c, got[r*TileDim+c], w)
						}
					}
				}
			})
		}
	}
	if err := CopyRows(kir.NewProgram("x").AddKernel(&kir.Kernel{Name: "k"}).Builder(), kir.C(0), kir.C(0), 30, 0, 3, 2); err == nil {
		t.Error("CopyRows accepted rows 30..32 of a 32-row tile")
	}
}
