package lower

import (
	"fmt"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower/blocks"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
)

// A layout_chain whose steps only re-index whole tiles (the GDN prefill's
// head split [B,S,C] -> slice -> [B,S,H,D] -> repeat_interleave ->
// transpose -> [B,H,S,D] with D and S multiples of 32, and its merge back)
// moves every result tile as one source tile, each element at the same
// place inside it. Its reader then reads each result tile's source page
// straight into the CB, where the general gather (relayoutProgram) copied
// 64 runs of 16 elements a tile inside L1.

// chainMovesTiles is ir.ChainMovesTiles: whether the chain from xs
// through steps (steps[i] giving shapes[i]) maps every result tile onto
// one whole source tile with the same in-tile offsets.
func chainMovesTiles(xs ir.Shape, steps []ir.LayoutStep, shapes []ir.Shape) bool {
	return ir.ChainMovesTiles(xs, steps, shapes)
}

// tileRelayoutProgram is a layout_chain that moves whole tiles
// (chainMovesTiles): result page p is x's page page(b, p). Its reader
// reads that page into the CB; the writer stores it as result page p. A
// bf16 to fp32 chain converts each tile through an fp32 DEST (as
// lowerTypecast does: every value kept), other chains copy the page. The
// split counts two DRAM round trips a page (the read's and the write's,
// one page in flight each): counted as one, the DRAM floor stopped the
// GDN prefill's head split at 28 cores (229 us predicted; 56 cores: 151).
func tileRelayoutProgram(op *ir.Op, ctx *Context, x *ir.Value, page func(b *kir.Builder, p kir.Expr) kir.Expr) (*kir.Program, error) {
	out := op.Result()
	if err := layoutOperands(x); err != nil {
		return nil, err
	}
	if err := requireTile("value", out); err != nil {
		return nil, err
	}
	if x.Type.DType != out.Type.DType {
		if x.Type.DType != ir.BF16 || out.Type.DType != ir.FP32 {
			return nil, fmt.Errorf("rule layout-chain-dtype: %s moves %s values into a %s result; only bf16 to fp32 converts exactly", op.Name(), x.Type.DType, out.Type.DType)
		}
		named := func(b *kir.Builder, p kir.Expr) kir.Expr { return b.Let("src_page", page(b, p)) }
		return eltwiseProgram(op, ctx, []eltInput{{v: x, pageIn: named, writeTrip: true}}, false, 0, func(c *blocks.Compute, in []int, out int) {
			c.Unary(in[0], out, nil)
		})
	}
	if err := layoutOperands(out); err != nil {
		return nil, err
	}
	ps, pages, err := PageLayout(out.Type)
	if err != nil {
		return nil, fmt.Errorf("value %s: %w", out, err)
	}
	t := ctx.Target
	sp := startProgram(op, ctx, planStream(pages, t.NumWorkers(), 2*ps, 2, EltwiseTileCycles))
	cb := sp.cbs.Pages(blocks.InputCB, "pages", out.Type.DType, target.AlignUp(ps, t.DRAMReadAlign), 2)
	sp.planned("tile relayout")
	rd := sp.reader()
	acc := sp.bind(rd, "src_addr", x)
	rstart, rcount := rd.RuntimeArg("start_page"), rd.RuntimeArg("num_pages")
	b := rd.Builder()
	b.For("i", kir.C(0), rcount, func(i kir.Var) {
		p := b.Let("page", kir.Add(rstart, i))
		blocks.ReadPage(b, acc, cb, b.Let("src_page", page(b, p)))
	})
	wr, dAcc := sp.writerOf("dst_addr", out)
	wstart, wcount := wr.RuntimeArg("start_page"), wr.RuntimeArg("num_pages")
	blocks.WritePages(wr.Builder(), dAcc, cb, wstart, wcount)
	sp.plan.SetArgs(sp.cores, rd, nil, wr)
	return sp.done(sp.p)
}
