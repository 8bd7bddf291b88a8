package blocks

import (
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/ir"
)

// Compute blocks for fused programs: packing one result into several CBs,
// operands held across a loop, peeled loops, and rounding points (a fused
// program reproduces the rounding points of the chain it replaces: a value
// the chain stores in some format is packed into a CB of that format
// before the next step reads it).

// PackOutTo ends a math section by packing DEST[0] into one new page of
// each of cbs: commit, reserve one page of each, wait, pack DEST[0] into
// each (reconfiguring the packer where formats differ), release, push.
// Produces one page of every cb in cbs (which must be distinct).
func (c *Compute) PackOutTo(cbs ...int) {
	c.Commit()
	for _, cb := range cbs {
		c.B.CBReserveBack(cb, kir.C(1))
	}
	c.Wait()
	for _, cb := range cbs {
		c.packTo(cb)
		c.B.PackTile(kir.C(0), cb)
	}
	c.Release()
	for _, cb := range cbs {
		c.B.CBPushBack(cb, kir.C(1))
	}
}

// BinaryTileTo is BinaryTile (no negation, no SFPU steps) packing the
// result into one new page of each of outs (PackOutTo). Consumes one page
// of a and of b, produces one page of every out.
func (c *Compute) BinaryTileTo(op kir.EltwiseOp, bc Bcast, a, b int, outs ...int) {
	c.binaryDest(op, bc, a, b, nil)
	c.PackOutTo(outs...)
}

// RoundThrough rounds DEST[0] to the format of cb: it ends the math
// section by packing DEST[0] into one page of cb, then opens a new one
// with DEST[0] unpacked from that page (exact for bf16; fp32 is exact
// with fp32 DEST). Only DEST[0] survives. cb is an intermediate CB of the
// kernel (one page suffices): it produces and consumes one page of it.
func (c *Compute) RoundThrough(cb int) {
	c.PackOut(cb, 1)
	c.B.CBWaitFront(cb, kir.C(1))
	c.Acquire()
	c.Copy(cb, kir.C(0), kir.C(0))
	c.B.CBPopFront(cb, kir.C(1))
}

// Rounds reports whether storing a DEST value (fp32 DEST) in format dt
// changes it, i.e. whether a rounding point in dt needs RoundThrough.
func Rounds(dt ir.DType) bool { return dt != ir.FP32 }

// BinaryTileKeepA is BinaryTile against the front page of a, which it
// neither waits for nor pops (a constant the caller holds): wait for one
// page of b, DEST[0] = a[0] op b[0] (b broadcast as bc says), pop b, pack
// to one page of out. Consumes one page of b, produces one page of out.
func (c *Compute) BinaryTileKeepA(op kir.EltwiseOp, bc Bcast, a, b, out int) {
	c.B.CBWaitFront(b, kir.C(1))
	c.Acquire()
	c.Binary(op, bc, a, b, kir.C(0), kir.C(0), kir.C(0))
	c.B.CBPopFront(b, kir.C(1))
	c.PackOut(out, 1)
}

// ForPeeled emits body(i) for i = 0 .. n-1 (n a constant): the first
// iteration inline, the others as a loop. The loop then starts in the
// configuration the body leaves, so (unlike For around the whole range)
// it re-initialises nothing at the end of each iteration, and the code
// holds two copies of the body however large n is.
func (c *Compute) ForPeeled(name string, n int, body func(i kir.Expr)) {
	if n <= 0 {
		return
	}
	body(kir.C(0))
	if n > 1 {
		c.For(name, kir.C(1), kir.Ci(n), func(i kir.Var) { body(i) })
	}
}
