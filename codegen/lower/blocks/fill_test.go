package blocks

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
)

func TestMaxCopyBytes(t *testing.T) {
	if got := target.Blackhole().MaxNoCPacket; got != maxCopyBytes {
		t.Errorf("maxCopyBytes %d, the target's NoC packet limit %d", maxCopyBytes, got)
	}
}

// fillRun runs a one-core program whose reader fills `pages` pages of a
// scratch CB with fill and copies them to the DRAM buffer dst; it returns
// dst's bytes. The program passes kir.Validate (no NoC transfer above
// the packet limit).
func fillRun(t *testing.T, pages int, fill func(b *kir.Builder, base kir.Var)) []byte {
	t.Helper()
	tgt := target.Blackhole()
	const pageSize = 2048
	scratch := kir.CB{Index: 0, PageSize: pageSize, Pages: pages, Format: ir.BF16}
	d, p := dmProgram(t, tgt, nil, ir.BF16, pageSize, pages, []kir.CB{scratch}, func(_ *kir.Kernel, b *kir.Builder) {
		base := ScratchPages(b, 0, pages, "base")
		fill(b, base)
		b.For("i", kir.C(0), kir.Ci(pages), func(i kir.Var) {
			b.CBReserveBack(16, kir.C(1))
			LocalCopy(b, kir.Add(base, kir.Mul(i, kir.Ci(pageSize))), kir.GetWritePtr{CB: 16}, pageSize)
			b.NoCAsyncReadBarrier()
			b.CBPushBack(16, kir.C(1))
		})
		ReleaseScratchPages(b, 0, pages)
	})
	run(t, d, p)
	out, err := d.ReadPages("dst", 0, pages)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestFillWords fills sizes below, at and far above the stored seed and
// the NoC packet limit and checks every word (and that the bytes past the
// fill keep the copies' zero pattern).
func TestFillWords(t *testing.T) {
	for _, bytes := range []int{64, 600, 2048, 40 << 10, 100 << 10} {
		t.Run(fmt.Sprint(bytes), func(t *testing.T) {
			pages := (bytes + 2047) / 2048
			const word = 0xDEADBEEF
			out := fillRun(t, pages, func(b *kir.Builder, base kir.Var) {
				FillWords(b, base, pages*2048, 0)
				FillWords(b, base, bytes, word)
			})
			for i := 0; i < len(out); i += 4 {
				want := uint32(0)
				if i < bytes {
					want = word
				}
				if got := binary.LittleEndian.Uint32(out[i:]); got != want {
					t.Fatalf("word at byte %d is %#x, want %#x", i, got, want)
				}
			}
		})
	}
}

// TestFillRowsFromRow0 checks every row of bf16 and fp32 tiles equals row
// 0 after the copies, and ZeroRowsFrom clears exactly the rows from
// `from` on (both sides of the face boundary).
func TestFillRowsFromRow0(t *testing.T) {
	for _, eb := range []int{2, 4} {
		for _, from := range []int{0, 5, 16, 21, 32} {
			t.Run(fmt.Sprintf("eb%d_from%d", eb, from), func(t *testing.T) {
				tb := TileDim * TileDim * eb
				pages := 2 * tb / 2048 // the tile, then a zero tile
				out := fillRun(t, pages, func(b *kir.Builder, base kir.Var) {
					FillWords(b, base, pages*2048, 0)
					b.For("c", kir.C(0), kir.Ci(TileDim), func(c kir.Var) {
						StoreElem(b, kir.Add(base, FaceOffset(kir.C(0), c, eb)), kir.Add(c, kir.C(1)), eb)
					})
					FillRowsFromRow0(b, base, eb)
					ZeroRowsFrom(b, base, kir.Add(base, kir.Ci(tb)), kir.Ci(from), eb)
					b.NoCAsyncReadBarrier()
				})
				for r := 0; r < TileDim; r++ {
					for c := 0; c < TileDim; c++ {
						off := faceOffset(r, c, eb)
						got := binary.LittleEndian.Uint32(out[off:])
						if eb == 2 {
							got = uint32(binary.LittleEndian.Uint16(out[off:]))
						}
						want := uint32(c + 1)
						if r >= from {
							want = 0
						}
						if got != want {
							t.Fatalf("element (%d,%d) is %d, want %d", r, c, got, want)
						}
					}
				}
			})
		}
	}
}

// faceOffset is FaceOffset for constants.
func faceOffset(r, c, eb int) int {
	face := (r/FaceDim)*2 + c/FaceDim
	return (face*FaceDim*FaceDim + (r%FaceDim)*FaceDim + c%FaceDim) * eb
}

// TestFillRowsFromRow0Tiles fills two fp32 tiles (the flash-decoding
// constants: a zero tile and a mask row) from their row 0s at once over
// L1 holding garbage, and checks every row of each equals its row 0.
func TestFillRowsFromRow0Tiles(t *testing.T) {
	const eb = 4
	tb := TileDim * TileDim * eb
	pages := 2 * tb / 2048
	row0 := func(tile, c int) uint32 {
		if tile == 0 {
			return 0
		}
		return uint32(c*7 + 1)
	}
	out := fillRun(t, pages, func(b *kir.Builder, base kir.Var) {
		FillWords(b, base, pages*2048, 0xDEADBEEF)
		second := b.Let("second", kir.Add(base, kir.Ci(tb)))
		b.For("c", kir.C(0), kir.Ci(TileDim), func(c kir.Var) {
			b.L1Write32(kir.Add(base, FaceOffset(kir.C(0), c, eb)), kir.C(0))
			b.L1Write32(kir.Add(second, FaceOffset(kir.C(0), c, eb)), kir.Add(kir.Mul(c, kir.C(7)), kir.C(1)))
		})
		FillRowsFromRow0Tiles(b, eb, base, second)
	})
	for tile := range 2 {
		for r := 0; r < TileDim; r++ {
			for c := 0; c < TileDim; c++ {
				off := tile*tb + faceOffset(r, c, eb)
				if got, want := binary.LittleEndian.Uint32(out[off:]), row0(tile, c); got != want {
					t.Fatalf("tile %d element (%d,%d) is %#x, want %#x", tile, r, c, got, want)
				}
			}
		}
	}
}

// TestFillSteps: FillSteps counts FillWords' stores and copies (the doc's
// 40 KB: 128 stores and 7 copies).
func TestFillSteps(t *testing.T) {
	for _, tc := range []struct{ bytes, stores, copies int }{
		{64, 16, 0},
		{600, 150, 0}, // not a multiple of 16: stored word by word
		{4096, 128, 3},
		{40 << 10, 128, 7},
	} {
		t.Run(fmt.Sprint(tc.bytes), func(t *testing.T) {
			if s, c := FillSteps(tc.bytes); s != tc.stores || c != tc.copies {
				t.Errorf("FillSteps(%d) = %d stores, %d copies; want %d, %d", tc.bytes, s, c, tc.stores, tc.copies)
			}
		})
	}
}
