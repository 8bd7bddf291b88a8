package lower

import (
	"cmp"
	"fmt"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower/blocks"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
)

// Layout family: to_memory, reshape, slice, concat, pad,
// repeat_interleave and transpose. They only move values, on the
// data-movement RISC-Vs (no compute kernel).
//
// to_memory, and a reshape that keeps every tile (same last dim, and the
// same second-to-last dim or both multiples of 32), copy pages: the reader
// reads each page of the operand (wherever it is placed) into a CB, the
// writer writes it to the same page of the result. Everything else is a
// relayout with blocks.Gather: the reader assembles each result tile from
// runs of elements of the operand tiles, the run length being the largest
// power of two <= 16 that keeps runs aligned in both tensors (SegFor). A
// transpose of the last two dims of a bf16 (or block-float) tensor runs
// transpose_wh_tile on the compute kernel instead; fp32 would lose its low
// mantissa bits in the FPU's source registers, so fp32 transposes are
// relayouts too. Result padding is filled with zeros (pad: with its value)
// wherever the result has padding.

func lowerToMemory(op *ir.Op, ctx *Context) (*kir.Program, error) {
	x, out := op.Operands[0], op.Result()
	if x.Type.Layout != out.Type.Layout || x.Type.DType != out.Type.DType || !x.Type.Shape.Equal(out.Type.Shape) {
		return nil, fmt.Errorf("rule to-memory: result %s must have the operand's shape, dtype and layout %s", out.Type, x.Type)
	}
	return pageCopyProgram(op, ctx, x, out)
}

// ReshapeIsView reports whether reshape(x) = out can share x's buffer (no
// program): both tile layout with the same dtype and placement (DRAM or L1
// interleaved) and every page kept (sameTiles), so each page of out is the
// same page of x, byte for byte.
func ReshapeIsView(x, out *ir.Value) bool {
	xt, ot := x.Type, out.Type
	return xt.Layout == ir.TileLayout && ot.Layout == ir.TileLayout && xt.DType == ot.DType &&
		xt.Mem == ot.Mem && !xt.Mem.Kind.IsSharded() && sameTiles(xt.Shape, ot.Shape)
}

// sameTiles reports whether a reshape from a to b keeps every page.
func sameTiles(a, b ir.Shape) bool {
	ia, ib := blocks.ImageOf(a), blocks.ImageOf(b)
	if ia.C != ib.C {
		return false
	}
	return ia.R == ib.R && ia.B == ib.B || ia.R%ir.TileSize == 0 && ib.R%ir.TileSize == 0
}

func lowerReshape(op *ir.Op, ctx *Context) (*kir.Program, error) {
	x, out := op.Operands[0], op.Result()
	if x.Type.DType != out.Type.DType {
		return nil, fmt.Errorf("rule layout-dtype: reshape only moves values; result dtype %s must be the operand's %s", out.Type.DType, x.Type.DType)
	}
	if x.Type.Shape.Numel() != out.Type.Shape.Numel() {
		return nil, fmt.Errorf("rule reshape-numel: %s and %s hold different element counts", x.Type.Shape, out.Type.Shape)
	}
	if users, pack, ok := userRowsReshape(x, out); ok {
		return lowerUserRows(op, ctx, users, pack)
	}
	if x.Type.Layout == ir.RowMajorLayout && out.Type.Layout == ir.RowMajorLayout {
		if x.Type.Shape.Cols2D() == out.Type.Shape.Cols2D() {
			return pageCopyProgram(op, ctx, x, out)
		}
		return nil, fmt.Errorf("rule reshape-row-major: a row-major reshape must keep the last dim (one page per row)")
	}
	if err := requireTiles(x, out); err != nil {
		return nil, err
	}
	if sameTiles(x.Type.Shape, out.Type.Shape) {
		return pageCopyProgram(op, ctx, x, out)
	}
	ci, co := blocks.ImageOf(x.Type.Shape).C, blocks.ImageOf(out.Type.Shape).C
	return relayoutProgram(op, ctx, []*ir.Value{x}, blocks.SegFor(ci, co), false, 0, func(b *kir.Builder, row, col kir.Var) []blocks.Run {
		f := b.Let("f", kir.Add(kir.Mul(row, kir.Ci(co)), col))
		return []blocks.Run{{Src: 0, Row: kir.Div(f, kir.Ci(ci)), Col: kir.Mod(f, kir.Ci(ci))}}
	})
}

// fullIndex splits output element (row, col) of a tensor of shape dims
// into one index per dim (the column last).
func fullIndex(row, col kir.Expr, dims ir.Shape) []kir.Expr {
	if dims.Rank() == 0 {
		return nil
	}
	return append(blocks.Unflatten(row, dims), col)
}

// rowOf is the flattened 2-D row of full index idx (one per dim) of a
// tensor of shape dims.
func rowOf(idx []kir.Expr, dims ir.Shape) kir.Expr {
	if len(idx) <= 1 {
		return kir.C(0)
	}
	return blocks.Flatten(idx[:len(idx)-1], dims)
}

func lowerSlice(op *ir.Op, ctx *Context) (*kir.Program, error) {
	x, out := op.Operands[0], op.Result()
	begin := op.Ints("begin")
	xs, os := x.Type.Shape, out.Type.Shape
	if len(begin) != xs.Rank() || xs.Rank() == 0 {
		return nil, fmt.Errorf("rule slice-rank: begin %v needs one entry per dim of %s", begin, xs)
	}
	return relayoutSteps(op, ctx, x, []ir.LayoutStep{{Op: ir.OpSlice, Attrs: op.Attrs}}, []ir.Shape{os})
}

// layoutOperands checks the tile layout and equal dtypes of a relayout.
func layoutOperands(vs ...*ir.Value) error {
	for _, v := range vs {
		if err := requireTile("value", v); err != nil {
			return err
		}
		if v.Type.DType != vs[0].Type.DType {
			return fmt.Errorf("rule layout-dtype: data movement does not convert; %s is %s, %s is %s", vs[0], vs[0].Type.DType, v, v.Type.DType)
		}
	}
	return nil
}

func lowerConcat(op *ir.Op, ctx *Context) (*kir.Program, error) {
	out := op.Result()
	os := out.Type.Shape
	ax, err := axisAttr(op, "axis", os.Rank())
	if err != nil {
		return nil, err
	}
	srcs := op.Operands
	if len(srcs) > maxConcatOperands {
		return nil, fmt.Errorf("rule concat-operands: %d operands, at most %d (one scratch CB each)", len(srcs), maxConcatOperands)
	}
	// lo[i] is where operand i starts along the axis.
	lo := make([]int, len(srcs)+1)
	for i, s := range srcs {
		lo[i+1] = lo[i] + s.Type.Shape[ax]
	}
	// runs maps index i along the axis to each operand's run, guarded by
	// lo[k] <= i < lo[k+1] (the first guard without the lower bound, the
	// last without the upper one).
	runs := func(i kir.Expr, at func(k int, j kir.Expr) blocks.Run) []blocks.Run {
		rs := make([]blocks.Run, len(srcs))
		for k := range srcs {
			var cond kir.Expr
			if k > 0 {
				cond = kir.Ge(i, kir.Ci(lo[k]))
			}
			if k < len(srcs)-1 {
				c := kir.Lt(i, kir.Ci(lo[k+1]))
				if cond == nil {
					cond = c
				} else {
					cond = kir.LAnd(cond, c)
				}
			}
			j := i
			if lo[k] > 0 {
				j = kir.Sub(i, kir.Ci(lo[k]))
			}
			rs[k] = at(k, j)
			rs[k].Cond = cond
		}
		return rs
	}
	if ax < os.Rank()-2 {
		return tileConcatProgram(op, ctx, ax, lo)
	}
	if concatHeadRows(op, ax) {
		return concatRows(op, ctx)
	}
	last := os.Rank() - 1
	if ax == last {
		widths := make([]int, len(srcs))
		for k, s := range srcs {
			widths[k] = s.Type.Shape[last]
		}
		return relayoutProgram(op, ctx, srcs, blocks.SegFor(widths...), false, 0, func(b *kir.Builder, row, col kir.Var) []blocks.Run {
			return runs(col, func(k int, j kir.Expr) blocks.Run { return blocks.Run{Src: k, Row: row, Col: j} })
		})
	}
	return relayoutProgram(op, ctx, srcs, blocks.SegFor(os[last]), false, 0, func(b *kir.Builder, row, col kir.Var) []blocks.Run {
		idx := fullIndex(row, col, os)
		i := b.Let("ia", idx[ax])
		return runs(i, func(k int, j kir.Expr) blocks.Run {
			ik := append([]kir.Expr(nil), idx...)
			ik[ax] = j
			return blocks.Run{Src: k, Row: rowOf(ik, srcs[k].Type.Shape), Col: col}
		})
	})
}

// tileConcatProgram is a concat along a leading dim ax (not one of the
// last two, so every result tile is one operand tile, lo[k] where operand
// k starts along ax): the reader reads each result page straight from its
// operand's page into the CB, the writer stores it, as a page copy does.
// The GDN prefill's chunk outputs [B,H,1,L,D] joined along the chunk dim
// move as whole tiles, with no per-row gather.
func tileConcatProgram(op *ir.Op, ctx *Context, ax int, lo []int) (*kir.Program, error) {
	out := op.Result()
	if err := layoutOperands(append(append([]*ir.Value(nil), op.Operands...), out)...); err != nil {
		return nil, err
	}
	os := out.Type.Shape
	oim := blocks.ImageOf(os)
	ps, _, err := PageLayout(out.Type)
	if err != nil {
		return nil, fmt.Errorf("value %s: %w", out, err)
	}
	// innerB is the product of the batch dims after ax.
	innerB := 1
	for _, d := range os[ax+1 : os.Rank()-2] {
		innerB *= d
	}
	t := ctx.Target
	sp := startProgram(op, ctx, planStream(oim.Pages, t.NumWorkers(), 2*ps, 1, EltwiseTileCycles))
	cb := sp.cbs.Pages(blocks.InputCB, "pages", out.Type.DType, target.AlignUp(ps, t.DRAMReadAlign), 2)
	sp.planned("tile concat")
	rd := sp.reader()
	accs := make([]*blocks.Access, len(op.Operands))
	for k, v := range op.Operands {
		accs[k] = sp.bind(rd, fmt.Sprintf("src%d_addr", k), v)
	}
	rstart, rcount := rd.RuntimeArg("start_page"), rd.RuntimeArg("num_pages")
	b := rd.Builder()
	tpm := oim.TilesPerMat
	b.For("i", kir.C(0), rcount, func(i kir.Var) {
		p := b.Let("page", kir.Add(rstart, i))
		tile := b.Let("tile", kir.Mod(p, kir.Ci(tpm)))
		bo := b.Let("bo", kir.Div(p, kir.Ci(tpm)))
		in := b.Let("in", kir.Mod(bo, kir.Ci(innerB)))
		q := b.Let("q", kir.Div(bo, kir.Ci(innerB)))
		at := b.Let("at", kir.Mod(q, kir.Ci(os[ax])))
		outer := b.Let("outer", kir.Div(q, kir.Ci(os[ax])))
		for k, v := range op.Operands {
			n := v.Type.Shape[ax]
			// operand k's page: ((outer*n + at - lo[k])*innerB + in)*tpm + tile
			j := kir.Expr(at)
			if lo[k] > 0 {
				j = kir.Sub(at, kir.Ci(lo[k]))
			}
			pg := kir.Add(kir.Mul(kir.Add(kir.Mul(kir.Add(kir.Mul(outer, kir.Ci(n)), j), kir.Ci(innerB)), in), kir.Ci(tpm)), tile)
			cond := kir.Lt(at, kir.Ci(lo[k+1]))
			if k > 0 {
				cond = kir.LAnd(kir.Ge(at, kir.Ci(lo[k])), cond)
			}
			b.If(cond, func() { blocks.ReadPage(b, accs[k], cb, pg) })
		}
	})
	wr, dAcc := sp.writerOf("dst_addr", out)
	wstart, wcount := wr.RuntimeArg("start_page"), wr.RuntimeArg("num_pages")
	blocks.WritePages(wr.Builder(), dAcc, cb, wstart, wcount)
	sp.plan.SetArgs(sp.cores, rd, nil, wr)
	return sp.done(sp.p)
}

// maxConcatOperands bounds a concat's operands: its program gives each one
// scratch CB, next to the output CB.
const maxConcatOperands = ir.MaxConcatOperands

// axisAttr reads an axis attribute (negative counts from the end).
func axisAttr(op *ir.Op, name string, rank int) (int, error) {
	v, ok := op.Attrs[name].(int)
	if !ok {
		return 0, fmt.Errorf("rule attr: %s needs an int attribute %q", op.Name(), name)
	}
	if v < 0 {
		v += rank
	}
	if v < 0 || v >= rank {
		return 0, fmt.Errorf("rule axis: %s = %d is outside a rank-%d tensor", name, op.Attrs[name], rank)
	}
	return v, nil
}

func lowerPad(op *ir.Op, ctx *Context) (*kir.Program, error) {
	x, out := op.Operands[0], op.Result()
	value, ok := op.Attrs["value"].(float64)
	if !ok {
		return nil, fmt.Errorf("rule attr: pad needs a float attribute \"value\"")
	}
	xs, os := x.Type.Shape, out.Type.Shape
	if xs.Rank() != os.Rank() || xs.Rank() == 0 {
		return nil, fmt.Errorf("rule pad-rank: %s and %s must have the same rank >= 1", xs, os)
	}
	last := os.Rank() - 1
	seg := blocks.SegFor(os[last], xs[last])
	return relayoutProgram(op, ctx, []*ir.Value{x}, seg, true, float32(value), func(b *kir.Builder, row, col kir.Var) []blocks.Run {
		idx := fullIndex(row, col, os)
		var cond kir.Expr
		for d, i := range idx {
			if xs[d] == os[d] {
				continue
			}
			c := kir.Lt(i, kir.Ci(xs[d]))
			if cond == nil {
				cond = c
			} else {
				cond = kir.LAnd(cond, c)
			}
		}
		return []blocks.Run{{Cond: cond, Src: 0, Row: rowOf(idx, xs), Col: idx[last]}}
	})
}

func lowerRepeatInterleave(op *ir.Op, ctx *Context) (*kir.Program, error) {
	x, out := op.Operands[0], op.Result()
	reps, ok := op.Attrs["repeats"].(int)
	if !ok || reps < 1 {
		return nil, fmt.Errorf("rule attr: repeat_interleave needs an int attribute \"repeats\" >= 1")
	}
	os := out.Type.Shape
	if _, err := axisAttr(op, "axis", os.Rank()); err != nil {
		return nil, err
	}
	return relayoutSteps(op, ctx, x, []ir.LayoutStep{{Op: ir.OpRepeatInterleave, Attrs: op.Attrs}}, []ir.Shape{os})
}

func lowerTranspose(op *ir.Op, ctx *Context) (*kir.Program, error) {
	x, out := op.Operands[0], op.Result()
	if err := layoutOperands(x, out); err != nil {
		return nil, err
	}
	os := out.Type.Shape
	r := os.Rank()
	d0, err0 := axisAttr(op, "dim0", r)
	d1, err1 := axisAttr(op, "dim1", r)
	if err := cmp.Or(err0, err1); err != nil {
		return nil, err
	}
	if d0 == d1 {
		return nil, fmt.Errorf("rule transpose-dims: dim0 and dim1 are both %d", d0)
	}
	lo, hi := min(d0, d1), max(d0, d1)
	if lo == r-2 && hi == r-1 && x.Type.DType != ir.FP32 {
		return transposeTiles(op, ctx)
	}
	return relayoutSteps(op, ctx, x, []ir.LayoutStep{{Op: ir.OpTranspose, Attrs: op.Attrs}}, []ir.Shape{os})
}

// transposeTiles transposes the last two dims: result tile (b, j, i) is
// operand tile (b, i, j) through transpose_wh_tile.
func transposeTiles(op *ir.Op, ctx *Context) (*kir.Program, error) {
	x, out := op.Operands[0], op.Result()
	xi, oi := blocks.ImageOf(x.Type.Shape), blocks.ImageOf(out.Type.Shape)
	page := func(p kir.Expr) kir.Expr {
		tc := kir.Mod(p, kir.Ci(oi.Ct))
		q := kir.Div(p, kir.Ci(oi.Ct))
		tr := kir.Mod(q, kir.Ci(oi.Rt))
		bb := kir.Div(q, kir.Ci(oi.Rt))
		return kir.Add(kir.Mul(kir.Add(kir.Mul(bb, kir.Ci(xi.Rt)), tc), kir.Ci(xi.Ct)), tr)
	}
	return eltwiseProgram(op, ctx, []eltInput{{v: x, page: page}}, false, EltwiseTileCycles, func(c *blocks.Compute, in []int, out int) {
		c.B.CBWaitFront(in[0], kir.C(1))
		c.Acquire()
		c.Transpose(in[0], kir.C(0), kir.C(0))
		c.B.CBPopFront(in[0], kir.C(1))
		c.PackOut(out, 1)
	})
}

// pageCopyProgram copies every page of src to the same page of dst
// (placements may differ; page sizes must match).
func pageCopyProgram(op *ir.Op, ctx *Context, src, dst *ir.Value) (*kir.Program, error) {
	t := ctx.Target
	// newProgram would fail on these first, with the same message.
	ps, pages, err := PageLayout(src.Type)
	if err != nil {
		return nil, fmt.Errorf("value %s: %w", src, err)
	}
	dps, dpages, err := PageLayout(dst.Type)
	if err != nil {
		return nil, fmt.Errorf("value %s: %w", dst, err)
	}
	if ps != dps || pages != dpages {
		return nil, fmt.Errorf("rule page-copy: %s has %d pages of %d bytes, %s %d of %d", src, pages, ps, dst, dpages, dps)
	}
	sp := startProgram(op, ctx, planStream(pages, t.NumWorkers(), 2*ps, 1, EltwiseTileCycles))
	// Pages 64 bytes apart at least, so each DRAM read lands at its
	// source's offset modulo 64 (small row-major pages: token ids).
	cb := sp.cbs.Pages(blocks.InputCB, "pages", src.Type.DType, target.AlignUp(ps, t.DRAMReadAlign), 2)
	sp.planned("page copy")
	rd := sp.reader()
	sAcc := sp.bind(rd, "src_addr", src)
	rstart, rcount := rd.RuntimeArg("start_page"), rd.RuntimeArg("num_pages")
	blocks.ReadPages(rd.Builder(), sAcc, cb, rstart, rcount)
	wr, dAcc := sp.writerOf("dst_addr", dst)
	wstart, wcount := wr.RuntimeArg("start_page"), wr.RuntimeArg("num_pages")
	blocks.WritePages(wr.Builder(), dAcc, cb, wstart, wcount)
	sp.plan.SetArgs(sp.cores, rd, nil, wr)
	return sp.done(sp.p)
}

// relayoutTileCycles is what assembling one result tile (image oim, runs
// of seg elements) costs a reader: a few cycles per run, one DRAM round
// trip for a source page at least and, with fill, the fill's stores and
// local copies (blocks.FillSteps: three round trips for an fp32 tile). A
// split by the runs alone put a [1,24,8,32] -> [1,24,8,1,32] reshape's
// 192 padded tiles on 8 cores (39 us predicted), the fills in series.
func relayoutTileCycles(oim blocks.Image, dt ir.DType, seg int, fill bool) int {
	c := min(oim.R, ir.TileSize)*((min(oim.C, ir.TileSize)+seg-1)/seg)*8 + DRAMReadLatencyCycles
	if fill {
		stores, copies := blocks.FillSteps(dt.TileBytes())
		c += stores*FillStoreCycles + copies*L1ReadLatencyCycles
	}
	return c
}

// relayoutProgram builds a data-movement program whose reader assembles
// the result's tiles from srcs with blocks.Gather (run length seg, map m;
// fill: fill each result tile with fillValue first) and whose writer stores
// them. The result's tiles are split over the grid. It checks srcs and
// the result with layoutOperands first.
//
// When the result's dtype differs from the sources' (a layout_chain with a
// dtype: bf16 to fp32), the reader assembles each tile in the sources'
// dtype into CB moved and a compute kernel copies it into fp32 DEST and
// packs it in the result's dtype (as lowerTypecast does), which keeps
// every value.
func relayoutProgram(op *ir.Op, ctx *Context, srcs []*ir.Value, seg int, fill bool, fillValue float32, m func(b *kir.Builder, row, col kir.Var) []blocks.Run) (*kir.Program, error) {
	out := op.Result()
	moved := out.Type.DType
	if len(srcs) > 0 {
		moved = srcs[0].Type.DType
	}
	convert := moved != out.Type.DType && op.Kind == ir.OpLayoutChain
	vs := append(append([]*ir.Value(nil), srcs...), out)
	if convert {
		vs = vs[:len(srcs)]
		if err := requireTile("value", out); err != nil {
			return nil, err
		}
	}
	if err := layoutOperands(vs...); err != nil {
		return nil, err
	}
	if convert && (moved != ir.BF16 || out.Type.DType != ir.FP32) {
		return nil, fmt.Errorf("rule layout-chain-dtype: %s moves %s values into a %s result; only bf16 to fp32 converts exactly", op.Name(), moved, out.Type.DType)
	}
	oim := blocks.ImageOf(out.Type.Shape)
	// Padding gets a defined value: zeros, or the pad value.
	if oim.R%ir.TileSize != 0 || oim.C%ir.TileSize != 0 {
		fill = true
	}
	cycles := relayoutTileCycles(oim, moved, seg, fill)
	if convert {
		cycles = max(cycles, UnpackTileCycles+PackTileCycles)
	}
	sp := startProgram(op, ctx, PlanSplit(oim.Pages, ctx.Target.NumWorkers(), cycles, 0, 0))
	slots := make([]int, len(srcs))
	for i, s := range srcs {
		slots[i] = sp.cbs.Scratch(fmt.Sprintf("src%d_tile", i), s.Type.DType, 1)
	}
	cbMoved := -1
	if convert {
		cbMoved = sp.cbs.Scratch("moved", moved, 2)
	}
	cbOut := sp.cbs.Output("out", out.Type.DType, 2)
	sp.planned("relayout")
	rd := sp.reader()
	g := &blocks.Gather{Out: oim, DType: moved, Seg: seg, Fill: fill, FillValue: fillValue, Map: m}
	for i, s := range srcs {
		g.Sources = append(g.Sources, blocks.GatherSource{Acc: sp.bind(rd, fmt.Sprintf("src%d_addr", i), s), Image: blocks.ImageOf(s.Type.Shape)})
	}
	sp.fail(g.Check())
	rstart, rcount := rd.RuntimeArg("start_tile"), rd.RuntimeArg("num_tiles")
	if !convert {
		g.Emit(rd.Builder(), cbOut, slots, rstart, rcount)
		return sp.finish(out, cbOut, rd, nil)
	}
	g.Emit(rd.Builder(), cbMoved, slots, rstart, rcount)
	cp, c, ccount := sp.rangeCompute("num_tiles")
	c.Startup(cbMoved, cbMoved, cbOut)
	c.For("i", kir.C(0), ccount, func(kir.Var) { c.Unary(cbMoved, cbOut, nil) })
	return sp.finish(out, cbOut, rd, cp)
}
