package blocks

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/ir/numerics"
	"github.com/tcc-dev/tcc/sim/kexec"
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

// TestReadRowsTo reads the first rows of a tile into a tile of -1s on the
// simulator: rows [0, rows) must be the source's and every band past the
// rows' untouched; and it counts the DRAM requests: one per band whose rows
// fill less than a face (a bf16 row is one 576-byte read, not two of 64:
// the request is what a DRAM bank charges for), else one per face.
func TestReadRowsTo(t *testing.T) {
	tgt := target.Blackhole()
	tests := []struct {
		dt    ir.DType
		rows  int
		sizes []int
	}{
		{ir.BF16, 1, []int{576}},
		{ir.BF16, 8, []int{768}},
		{ir.BF16, 16, []int{512, 512}},
		{ir.BF16, 17, []int{512, 512, 576}},
		{ir.FP32, 1, []int{1088}},
		{ir.FP32, 31, []int{1024, 1024, 1984}},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%s/rows_%d", tc.dt, tc.rows), func(t *testing.T) {
			eb, tb := ElemBytes(tc.dt), tc.dt.TileBytes()
			srcBuf := kir.Buffer{Name: "src", Mem: ir.DRAM, DType: tc.dt, Layout: ir.TileLayout, PageSize: tb, Pages: 1}
			var sizes []int
			d, p := dmProgram(t, tgt, []kir.Buffer{srcBuf}, tc.dt, tb, 1, nil, func(k *kir.Kernel, b *kir.Builder) {
				acc, err := NewAccess(k, tgt, "src_addr", srcBuf)
				if err != nil {
					t.Fatal(err)
				}
				b.CBReserveBack(16, kir.C(1))
				out := b.Let("out", kir.GetWritePtr{CB: 16})
				FillWords(b, out, tb, FillWord(tc.dt, -1))
				rb := kir.NewProgram("count").AddKernel(&kir.Kernel{Name: "k"}).Builder()
				ReadRowsTo(rb, acc, kir.C(0), out, tc.rows, eb)
				kir.Inspect(rb.Kernel().Body, func(s kir.Stmt) bool {
					if r, ok := s.(kir.NoCAsyncRead); ok {
						n, _ := r.Size.(kir.Const)
						sizes = append(sizes, int(n.V))
					}
					return true
				})
				ReadRowsTo(b, acc, kir.C(0), out, tc.rows, eb)
				b.NoCAsyncReadBarrier()
				b.CBPushBack(16, kir.C(1))
			})
			if diff := cmp.Diff(tc.sizes, sizes); diff != "" {
				t.Errorf("read sizes (-want +got):\n%s", diff)
			}
			vals := make([]float32, TileDim*TileDim)
			for i := range vals {
				vals[i] = float32(i%251) + 1
			}
			if err := d.WritePages("src", 0, tileBytesOf(t, tc.dt, vals)); err != nil {
				t.Fatal(err)
			}
			run(t, d, p)
			raw, err := d.ReadPages("dst", 0, 1)
			if err != nil {
				t.Fatal(err)
			}
			tile, err := numerics.UnpackTile(tc.dt, raw)
			if err != nil {
				t.Fatal(err)
			}
			got := numerics.Untilize(tile, TileDim, TileDim)
			bands := (tc.rows + FaceDim - 1) / FaceDim
			for r := range TileDim {
				for c := range TileDim {
					want, g := float32(-1), got[r*TileDim+c]
					if r < tc.rows {
						want = vals[r*TileDim+c]
					}
					if r < tc.rows || r >= bands*FaceDim {
						if g != want {
							t.Fatalf("element (%d, %d) = %v, want %v", r, c, g, want)
						}
					} else if g != want && g != vals[r*TileDim+c] {
						t.Fatalf("element (%d, %d) = %v: neither untouched nor the page's own", r, c, g)
					}
				}
			}
		})
	}
}

// TestWriteTilesLive runs WriteTilesLive on the simulator: three source
// pages of a CB written to a result pre-filled with -1 must carry the
// source's rows [0, rows) (and, in the bands the writes touch, the other
// rows either untouched or the source's own), every band past them
// untouched; and it counts the DRAM writes per page: one per band whose
// rows fill less than a face (a bf16 live row: one 576-byte write, not a
// 2,048-byte page), else one per face, and the whole page at 32 rows.
func TestWriteTilesLive(t *testing.T) {
	tgt := target.Blackhole()
	const pages = 3
	tests := []struct {
		dt    ir.DType
		rows  int
		sizes []int // the writes of one page
	}{
		{ir.BF16, 1, []int{576}},
		{ir.BF16, 8, []int{768}},
		{ir.BF16, 17, []int{512, 512, 576}},
		{ir.BF16, 32, []int{2048}},
		{ir.FP32, 1, []int{1088}},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%s/rows_%d", tc.dt, tc.rows), func(t *testing.T) {
			eb, tb := ElemBytes(tc.dt), tc.dt.TileBytes()
			p := kir.NewProgram("live")
			rs := []ir.CoreRange{{}}
			src := kir.Buffer{Name: "src", Mem: ir.DRAM, DType: tc.dt, Layout: ir.TileLayout, PageSize: tb, Pages: pages}
			dst := kir.Buffer{Name: "dst", Mem: ir.DRAM, DType: tc.dt, Layout: ir.TileLayout, PageSize: tb, Pages: pages}
			p.AddBuffer(src)
			p.AddBuffer(dst)
			p.AddCB(kir.CB{Index: 16, PageSize: tb, Pages: 2, Format: tc.dt, Cores: rs})
			rd := NewReaderKernel(p, rs)
			rAcc, err := NewAccess(rd, tgt, "src_addr", src)
			if err != nil {
				t.Fatal(err)
			}
			ReadPages(rd.Builder(), rAcc, 16, kir.C(0), kir.Ci(pages))
			rd.SetRuntimeArgs(kir.Core{})
			wr := NewWriterKernel(p, rs)
			wAcc, err := NewAccess(wr, tgt, "dst_addr", dst)
			if err != nil {
				t.Fatal(err)
			}
			wb := wr.Builder()
			WriteTilesLive(wb, wAcc, 16, kir.C(0), kir.Ci(pages), tc.rows, eb, 2, wb.LetT("pos", kir.U32T, kir.C(0)))
			wr.SetRuntimeArgs(kir.Core{})
			if err := kir.Validate(p, tgt); err != nil {
				t.Fatal(err)
			}
			var sizes []int
			kir.Inspect(wr.Body, func(s kir.Stmt) bool {
				if w, ok := s.(kir.NoCAsyncWrite); ok {
					n, _ := w.Size.(kir.Const)
					sizes = append(sizes, int(n.V))
				}
				return true
			})
			if diff := cmp.Diff(tc.sizes, sizes); diff != "" {
				t.Errorf("write sizes per page (-want +got):\n%s", diff)
			}
			d := kexec.NewDevice(tgt)
			for _, b := range p.Buffers {
				if _, err := d.Alloc(b); err != nil {
					t.Fatal(err)
				}
			}
			vals := make([][]float32, pages)
			minus := make([]float32, TileDim*TileDim)
			for i := range minus {
				minus[i] = -1
			}
			for pg := range vals {
				vals[pg] = make([]float32, TileDim*TileDim)
				for i := range vals[pg] {
					vals[pg][i] = float32((i+97*pg)%251) + 1
				}
				if err := d.WritePages("src", pg, tileBytesOf(t, tc.dt, vals[pg])); err != nil {
					t.Fatal(err)
				}
				if err := d.WritePages("dst", pg, tileBytesOf(t, tc.dt, minus)); err != nil {
					t.Fatal(err)
				}
			}
			run(t, d, p)
			bands := (tc.rows + FaceDim - 1) / FaceDim
			for pg := range pages {
				raw, err := d.ReadPages("dst", pg, 1)
				if err != nil {
					t.Fatal(err)
				}
				tile, err := numerics.UnpackTile(tc.dt, raw)
				if err != nil {
					t.Fatal(err)
				}
				got := numerics.Untilize(tile, TileDim, TileDim)
				for r := range TileDim {
					for c := range TileDim {
						own, g := vals[pg][r*TileDim+c], got[r*TileDim+c]
						switch {
						case r < tc.rows:
							if g != own {
								t.Fatalf("page %d element (%d, %d) = %v, want the source's %v", pg, r, c, g, own)
							}
						case r >= bands*FaceDim:
							if g != -1 {
								t.Fatalf("page %d element (%d, %d) = %v: a band past the rows was written", pg, r, c, g)
							}
						case g != -1 && g != own:
							t.Fatalf("page %d element (%d, %d) = %v: neither untouched nor the source's own", pg, r, c, g)
						}
					}
				}
			}
		})
	}
}
