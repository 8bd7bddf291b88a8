package lower

import (
	"fmt"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower/blocks"
	"github.com/tcc-dev/tcc/ir"
)

// Reduce family: argmax over the last dim of bf16 logits [rows <= 32, N]
// in tile layout, giving uint32 indices [rows, 1] in row-major layout.
//
// A single-core data-movement program: the reader streams the logits' tiles
// in column order into a CB; the writer scans each tile with integer
// arithmetic on the bf16 bit patterns and keeps, per row, the best key and
// its index in an L1 scratch page (16 bytes per row: index, key); at the end
// it writes each row's index to its 4-byte output page.
//
// The key of bf16 bits b with magnitude m = b & 0x7FFF is 0x8000 + m for a
// positive value and 0x8000 - m for a negative one, so keys order like the
// values and -0 and +0 share a key; a NaN (m > 0x7F80) gets 0x20000, above
// every number. A column replaces the row's best only when its key is
// strictly greater and columns are visited in increasing order, so the first
// maximum (or the first NaN) wins, as in the reference.

// argmaxSlot is the bytes of scratch per row: index at +0 (16-byte aligned
// for the output write), best key at +4.
const argmaxSlot = 16

func lowerArgmax(op *ir.Op, ctx *Context) (*kir.Program, error) {
	t := ctx.Target
	x, out := op.Operands[0], op.Result()
	if x.Type.DType != ir.BF16 || x.Type.Layout != ir.TileLayout {
		return nil, fmt.Errorf("rule argmax-input: the argmax scan reads bf16 tile-layout logits, got %s %s", x.Type.DType, x.Type.Layout)
	}
	xs := x.Type.Shape
	n := xs.Cols2D()
	nt := tilesWide(xs)
	rows := xs.Rows2D()
	if xs.Tiles() != nt {
		return nil, fmt.Errorf("rule argmax-rows: the argmax scan takes one tile row of logits (rows <= 32, leading dims 1); %s has %d tile rows", xs, xs.Tiles()/nt)
	}
	if out.Type.DType != ir.UInt32 || out.Type.Layout != ir.RowMajorLayout || out.Type.Shape.Rows2D() != rows || out.Type.Shape.Cols2D() != 1 {
		return nil, fmt.Errorf("rule argmax-output: result must be uint32 row-major [%d, 1], got %s", rows, out.Type)
	}
	p, err := newProgram(op, ctx)
	if err != nil {
		return nil, err
	}
	cores, rs := firstCores(t, 1)
	core := cores[0]
	const cbLogits, cbState = cbIn0, cbIm0
	p.AddCB(tileCB(cbLogits, ir.BF16, 2, rs, "logits"))
	p.AddCB(kir.CB{Index: cbState, PageSize: ir.TileSize * argmaxSlot, Pages: 1, Format: ir.UInt32, Cores: rs, Name: "best"})

	// Reader: the nt tiles in column order.
	rd := newReader(p, rs)
	xAcc, err := accessOf(ctx, rd, "x_addr", x)
	if err != nil {
		return nil, err
	}
	rNt := rd.CompileArg("nt", uint32(nt))
	b := rd.Builder()
	blocks.ReadPages(b, xAcc, cbLogits, kir.C(0), rNt)

	// Writer: scan and write.
	wr := newWriter(p, rs)
	oAcc, err := accessOf(ctx, wr, "out_addr", out)
	if err != nil {
		return nil, err
	}
	wNt := wr.CompileArg("nt", uint32(nt))
	wN := wr.CompileArg("n", uint32(n))
	wRows := wr.CompileArg("rows", uint32(rows))
	b = wr.Builder()
	b.CBReserveBack(cbState, kir.C(1))
	st := b.Let("st", kir.GetWritePtr{CB: cbState})
	b.For("r", kir.C(0), wRows, func(r kir.Var) {
		b.L1Write32(kir.Add(st, kir.Mul(r, kir.Ci(argmaxSlot))), kir.C(0))
		b.L1Write32(kir.Add(st, kir.Add(kir.Mul(r, kir.Ci(argmaxSlot)), kir.C(4))), kir.C(0))
	})
	b.CBPushBack(cbState, kir.C(1))
	b.CBWaitFront(cbState, kir.C(1))
	b.For("c", kir.C(0), wNt, func(c kir.Var) {
		b.CBWaitFront(cbLogits, kir.C(1))
		base := b.Let("base", kir.GetReadPtr{CB: cbLogits})
		b.For("r", kir.C(0), wRows, func(r kir.Var) {
			slot := b.Let("slot", kir.Add(st, kir.Mul(r, kir.Ci(argmaxSlot))))
			bidx := b.LetT("bidx", kir.U32T, kir.L1Read32{Addr: slot})
			bkey := b.LetT("bkey", kir.U32T, kir.L1Read32{Addr: kir.Add(slot, kir.C(4))})
			// Row r of a tile: face (r/16)*2 (+1 for columns 16..31), face row r%16.
			rowOff := b.Let("row_off", kir.Add(kir.Mul(kir.Div(r, kir.C(16)), kir.C(1024)), kir.Mul(kir.Mod(r, kir.C(16)), kir.C(32))))
			b.For("p", kir.C(0), kir.C(16), func(pp kir.Var) {
				// Columns 2p and 2p+1 share one word (2p in the low half).
				addr := kir.Add(base, kir.Add(rowOff, kir.Add(kir.Mul(kir.Div(pp, kir.C(8)), kir.C(512)), kir.Mul(kir.Mod(pp, kir.C(8)), kir.C(4)))))
				word := b.Let("word", kir.L1Read32{Addr: addr})
				for half := 0; half < 2; half++ {
					col := b.Let("col", kir.Add(kir.Mul(c, kir.C(32)), kir.Add(kir.Mul(pp, kir.C(2)), kir.Ci(half))))
					b.If(kir.Lt(col, wN), func() {
						bits := b.Let("bits", kir.And(kir.Shr(word, kir.Ci(16*half)), kir.C(0xFFFF)))
						mag := b.Let("mag", kir.And(bits, kir.C(0x7FFF)))
						neg := b.Let("neg", kir.Shr(bits, kir.C(15)))
						key := b.LetT("key", kir.U32T, kir.Sub(kir.Add(kir.C(0x8000), mag), kir.Mul(kir.Mul(kir.C(2), mag), neg)))
						b.If(kir.Gt(mag, kir.C(0x7F80)), func() { b.Assign(key, kir.C(0x20000)) })
						b.If(kir.Gt(key, bkey), func() {
							b.Assign(bkey, key)
							b.Assign(bidx, col)
						})
					})
				}
			})
			b.L1Write32(slot, bidx)
			b.L1Write32(kir.Add(slot, kir.C(4)), bkey)
		})
		b.CBPopFront(cbLogits, kir.C(1))
	})
	b.For("r", kir.C(0), wRows, func(r kir.Var) {
		b.NoCAsyncWrite(kir.Add(st, kir.Mul(r, kir.Ci(argmaxSlot))), oAcc.PageAddr(r), kir.C(4))
	})
	b.NoCAsyncWriteBarrier()
	b.CBPopFront(cbState, kir.C(1))

	rd.SetRuntimeArgs(core)
	wr.SetRuntimeArgs(core)
	return p, nil
}
