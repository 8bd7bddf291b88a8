package lower

import (
	"fmt"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower/blocks"
	"github.com/tcc-dev/tcc/ir"
)

// Eltwise family: unary ops run on the SFPU, binary ops on the FPU, and
// typecast is a copy into DEST packed in the result's format. The tiles of
// the result are split over the grid (planEltwise); each core streams its
// range tile by tile through two-page CBs: the reader fetches the operand
// tiles (for a broadcast operand, the tile paired with each result tile),
// compute unpacks them, applies the op (blocks.Compute.Unary /
// BinaryTile) and packs, the writer stores the result tile.
//
// Binary ops broadcast numpy style. Leading dims of size 1 (or missing)
// are broadcast by addressing (the reader reads the same operand tile for
// several result tiles); a second-to-last dim of 1 broadcasts row 0 of the
// operand tile (bcast rows), a last dim of 1 its column 0 (bcast cols),
// both its element (0, 0) (bcast scalar). The FPU broadcasts only its
// second operand: when the first operand is the broadcast one, add and mul
// swap operands and sub computes b - a and negates it on the SFPU. When
// both broadcast inside tiles ([n,1] op [1,m]) the first is expanded first
// (0 + bcast(a) into an fp32 scratch tile) and the op then broadcasts the
// second. A second operand broadcasting its column over a result 2 to
// maxColsRowTiles tiles wide runs by result tile rows instead, its column
// tile read once per row (bcastColsProgram).

// sfpuOps maps the unary op kinds to their SFPU operation: every op the op
// table flags SFPU, to the kir.SFPUTable entry of the same name
// (TestSFPUOpsCovered checks that each has one).
var sfpuOps = func() map[ir.OpKind]kir.SFPUOp {
	m := map[ir.OpKind]kir.SFPUOp{}
	for _, k := range ir.ChainableOps() {
		if op, ok := kir.SFPUByName(k.String()); ok {
			m[k] = op
		}
	}
	return m
}()

// eltOps maps the binary op kinds to their FPU operation.
var eltOps = map[ir.OpKind]kir.EltwiseOp{
	ir.OpAdd: kir.EltAdd,
	ir.OpSub: kir.EltSub,
	ir.OpMul: kir.EltMul,
}

// eltInput is one operand stream of an eltwise program.
type eltInput struct {
	v *ir.Value
	// page gives the operand page read for result page p (nil: p).
	page func(p kir.Expr) kir.Expr
	// pageIn, when set, is page emitted into the reader's builder b (it
	// may name intermediate values there); it takes precedence over page.
	pageIn func(b *kir.Builder, p kir.Expr) kir.Expr
	// writeTrip counts the writer's DRAM round trip per result page in
	// the split (planStream) as one more read: a program that only moves
	// pages waits on its write barrier as long as on its read.
	writeTrip bool
	// zeroPad: zero the tile padding before compute sees it.
	zeroPad bool
}

func lowerUnary(op *ir.Op, ctx *Context) (*kir.Program, error) {
	sf, ok := sfpuOps[op.Kind]
	if !ok {
		return nil, fmt.Errorf("rule sfpu-op: %s has no SFPU operation", op.Name())
	}
	x, out := op.Operands[0], op.Result()
	if op.Kind == ir.OpAddScalar && !x.Type.DType.IsFloat() {
		return lowerAddScalarInt(op, ctx)
	}
	if err := requireTiles(x, out); err != nil {
		return nil, err
	}
	if !x.Type.Shape.Equal(out.Type.Shape) {
		return nil, fmt.Errorf("rule eltwise-shape: result %s must have the operand's shape %s", out.Type.Shape, x.Type.Shape)
	}
	if out.Type.DType == ir.BF16 {
		sf = sf.ForBF16Result() // as sim/ref's sfpuEvalTo
	}
	step := blocks.SFPUStep{Op: sf}
	if sf.HasParam() {
		v, ok := op.Attrs["value"].(float64)
		if !ok {
			return nil, fmt.Errorf("rule attr: %s needs a float attribute \"value\"", op.Name())
		}
		step.Param = float32(v)
	}
	return eltwiseProgram(op, ctx, []eltInput{{v: x}}, false, int(kir.SFPUTable[sf].Cycles), func(c *blocks.Compute, in []int, out int) {
		c.Unary(in[0], out, []blocks.SFPUStep{step})
	})
}

// lowerTypecast copies each tile into DEST and packs it in the result's
// dtype (round to nearest even; block floats share exponents per face row,
// so the operand's tile padding is zeroed first, as the reference
// quantizes zero-padded tiles).
func lowerTypecast(op *ir.Op, ctx *Context) (*kir.Program, error) {
	x, out := op.Operands[0], op.Result()
	if err := requireTiles(x, out); err != nil {
		return nil, err
	}
	for _, v := range []*ir.Value{x, out} {
		if !v.Type.DType.IsFloat() {
			return nil, fmt.Errorf("rule typecast-dtype: typecast converts between float dtypes (fp32, bf16, bfp8_b, bfp4_b); %s is %s", v, v.Type.DType)
		}
	}
	if !x.Type.Shape.Equal(out.Type.Shape) {
		return nil, fmt.Errorf("rule eltwise-shape: result %s must have the operand's shape %s", out.Type.Shape, x.Type.Shape)
	}
	in := eltInput{v: x, zeroPad: out.Type.DType.IsBlockFloat() && !x.Type.DType.IsBlockFloat()}
	return eltwiseProgram(op, ctx, []eltInput{in}, false, 0, func(c *blocks.Compute, in []int, out int) {
		c.Unary(in[0], out, nil)
	})
}

// bcastPlan says how operand shape in pairs with result shape out under
// numpy broadcasting: the operand page of each result page and the
// in-tile broadcast.
func bcastPlan(in, out ir.Shape) (func(p kir.Expr) kir.Expr, blocks.Bcast, error) {
	od, id := matDims(out), matDims(in)
	if len(id) > len(od) {
		return nil, 0, fmt.Errorf("operand %s has more dims than the result %s", in, out)
	}
	for len(id) < len(od) {
		id = append(ir.Shape{1}, id...)
	}
	r := len(od)
	for d := range od {
		if id[d] != od[d] && id[d] != 1 {
			return nil, 0, fmt.Errorf("operand %s does not broadcast to %s (dim %d)", in, out, d)
		}
	}
	rowB := id[r-2] == 1 && od[r-2] > 1
	colB := id[r-1] == 1 && od[r-1] > 1
	bc := blocks.BcastNone
	switch {
	case rowB && colB:
		bc = blocks.BcastScalar
	case rowB:
		bc = blocks.BcastRows
	case colB:
		bc = blocks.BcastCols
	}
	oi, ii := blocks.ImageOf(od), blocks.ImageOf(id)
	if bc == blocks.BcastNone && oi.Rt == ii.Rt && oi.Ct == ii.Ct && oi.B == ii.B {
		return nil, bc, nil // the same pages
	}
	// Strides of the operand's leading dims (0 where broadcast).
	strides := make([]int, r-2)
	st := 1
	for d := r - 3; d >= 0; d-- {
		if id[d] != 1 {
			strides[d] = st
		}
		st *= id[d]
	}
	page := func(p kir.Expr) kir.Expr {
		tc := kir.Mod(p, kir.Ci(oi.Ct))
		q := kir.Div(p, kir.Ci(oi.Ct))
		tr := kir.Mod(q, kir.Ci(oi.Rt))
		rest := kir.Div(q, kir.Ci(oi.Rt))
		batch := kir.C(0)
		for d := r - 3; d >= 0; d-- {
			idx := kir.Mod(rest, kir.Ci(od[d]))
			rest = kir.Div(rest, kir.Ci(od[d]))
			if strides[d] != 0 {
				batch = kir.Add(batch, kir.Mul(idx, kir.Ci(strides[d])))
			}
		}
		itr, itc := tr, tc
		if rowB {
			itr = kir.C(0)
		}
		if colB {
			itc = kir.C(0)
		}
		return kir.Add(kir.Mul(kir.Add(kir.Mul(batch, kir.Ci(ii.Rt)), itr), kir.Ci(ii.Ct)), itc)
	}
	return page, bc, nil
}

// pageFor is page(p), or p when page is nil (bcastPlan's "same pages").
func pageFor(page func(p kir.Expr) kir.Expr, p kir.Expr) kir.Expr {
	if page == nil {
		return p
	}
	return page(p)
}

// matDims is s with at least two dims (leading 1s added).
func matDims(s ir.Shape) ir.Shape {
	out := s.Clone()
	for len(out) < 2 {
		out = append(ir.Shape{1}, out...)
	}
	return out
}

func lowerBinary(op *ir.Op, ctx *Context) (*kir.Program, error) {
	eop := eltOps[op.Kind]
	a, bv, out := op.Operands[0], op.Operands[1], op.Result()
	if err := requireTiles(a, bv, out); err != nil {
		return nil, err
	}
	unsupported := func(why string) error {
		return fmt.Errorf("rule eltwise-broadcast: %s of %s and %s into %s: %s", op.Name(), a.Type.Shape, bv.Type.Shape, out.Type.Shape, why)
	}
	pa, ba, err := bcastPlan(a.Type.Shape, out.Type.Shape)
	if err != nil {
		return nil, unsupported(err.Error())
	}
	pb, bb, err := bcastPlan(bv.Type.Shape, out.Type.Shape)
	if err != nil {
		return nil, unsupported(err.Error())
	}
	in0, in1 := eltInput{v: a, page: pa}, eltInput{v: bv, page: pb}
	bc, negate := bb, false
	switch {
	case ba != blocks.BcastNone && bb != blocks.BcastNone:
		// Expand the first, as the family doc says. A subtract never
		// broadcasts rows (the pinned release has no such call): a -
		// rows(b) expands b and computes -(b' - bcast(a)).
		first, second, fb, sb, neg := in0, in1, ba, bb, false
		if eop == kir.EltSub && bb == blocks.BcastRows {
			if ba == blocks.BcastRows {
				return nil, unsupported("both operands broadcast along rows")
			}
			first, second, fb, sb, neg = in1, in0, bb, ba, true
		}
		return eltwiseProgram(op, ctx, []eltInput{first, second}, true, 2*EltwiseTileCycles+UnpackTileCycles, func(c *blocks.Compute, in []int, out int) {
			x, y, zero, tmp := in[0], in[1], in[2], in[3]
			c.BinaryTileKeepA(kir.EltAdd, fb, zero, x, tmp)
			c.BinaryTile(eop, sb, tmp, y, out, neg, nil)
		})
	case ba != blocks.BcastNone:
		// The FPU broadcasts its second operand only: swap.
		in0, in1, bc = in1, in0, ba
		negate = eop == kir.EltSub
	}
	if eop == kir.EltSub && bc == blocks.BcastRows {
		// The pinned tt-metal release has no row-broadcast subtract: expand
		// the row first (0 + bcast_rows(b), exact, into an fp32 scratch
		// tile), then subtract tile by tile. b passes through a source
		// register once either way, so the result is the same.
		return eltwiseProgram(op, ctx, []eltInput{in0, in1}, true, 2*EltwiseTileCycles+UnpackTileCycles, func(c *blocks.Compute, in []int, out int) {
			x, b, zero, tmp := in[0], in[1], in[2], in[3]
			c.BinaryTileKeepA(kir.EltAdd, blocks.BcastRows, zero, b, tmp)
			c.BinaryTile(kir.EltSub, blocks.BcastNone, x, tmp, out, negate, nil)
		})
	}
	if colsRows(bc, out, in1) {
		return bcastColsProgram(op, ctx, in0, in1, eop, negate)
	}
	return eltwiseProgram(op, ctx, []eltInput{in0, in1}, false, EltwiseTileCycles, func(c *blocks.Compute, in []int, out int) {
		c.BinaryTile(eop, bc, in[0], in[1], out, negate, nil)
	})
}

// eltwiseProgram builds the reader/compute/writer program of a one-tile-at
// -a-time eltwise op. step emits the compute of one result tile: it
// consumes one page of each input CB and produces one page of out. With
// zero the reader also pushes one fp32 zero tile once, which compute holds
// through its loop, and step gets its CB and an fp32 scratch CB after the
// inputs'. opCycles is step's math time per tile besides unpacking its
// inputs and packing its result (the split's cost: planStream).
func eltwiseProgram(op *ir.Op, ctx *Context, ins []eltInput, zero bool, opCycles int, step func(c *blocks.Compute, in []int, out int)) (*kir.Program, error) {
	return eltwiseProgramWith(op, ctx, ins, zero, opCycles, nil, step)
}

// eltwiseProgramScratch is eltwiseProgram (no zero tile) whose step also
// uses scratch CBs: scratch adds them to the plan after the result CB.
func eltwiseProgramScratch(op *ir.Op, ctx *Context, ins []eltInput, opCycles int, scratch func(*blocks.CBPlan), step func(c *blocks.Compute, in []int, out int)) (*kir.Program, error) {
	return eltwiseProgramWith(op, ctx, ins, false, opCycles, scratch, step)
}

// eltwiseProgramWith is eltwiseProgram with an optional scratch callback
// (see eltwiseProgramScratch).
func eltwiseProgramWith(op *ir.Op, ctx *Context, ins []eltInput, zero bool, opCycles int, scratch func(*blocks.CBPlan), step func(c *blocks.Compute, in []int, out int)) (*kir.Program, error) {
	out := op.Result()
	bytes := out.Type.DType.TileBytes()
	for _, in := range ins {
		bytes += in.v.Type.DType.TileBytes()
	}
	trips := len(ins)
	if ins[0].writeTrip {
		trips++
	}
	s := startProgram(op, ctx, planStream(out.Type.Shape.Tiles(), ctx.Target.NumWorkers(), bytes, trips, len(ins)*UnpackTileCycles+opCycles+PackTileCycles))
	inCB := make([]int, len(ins))
	for i, in := range ins {
		inCB[i] = s.cbs.Input(fmt.Sprintf("in%d", i), in.v.Type.DType, 2)
	}
	stepCBs, zeroCB := inCB, -1
	if zero {
		zeroCB = s.cbs.Input("zero", ir.FP32, 1)
	}
	outCB := s.cbs.Output("out", out.Type.DType, 2)
	if zero {
		stepCBs = append(append([]int(nil), inCB...), zeroCB, s.cbs.Scratch("bcast", ir.FP32, 1))
	}
	if scratch != nil {
		scratch(s.cbs)
	}
	s.planned("eltwise")

	// Reader: for result tiles [start, start+count), the paired tile of
	// every operand.
	rd := s.reader()
	acc := make([]*blocks.Access, len(ins))
	for i, in := range ins {
		acc[i] = s.bind(rd, fmt.Sprintf("in%d_addr", i), in.v)
	}
	rstart, rcount := rd.RuntimeArg("start_tile"), rd.RuntimeArg("num_tiles")
	b := rd.Builder()
	if zero {
		blocks.ConstTile(b, zeroCB, ir.FP32, 0)
	}
	b.For("i", kir.C(0), rcount, func(i kir.Var) {
		page := b.Let("page", kir.Add(rstart, i))
		for k, in := range ins {
			pg := pageFor(in.page, page)
			if in.pageIn != nil {
				pg = in.pageIn(b, page)
			}
			if !in.zeroPad {
				blocks.ReadPage(b, acc[k], inCB[k], pg)
				continue
			}
			im := blocks.ImageOf(in.v.Type.Shape)
			l1 := blocks.Reserve(b, inCB[k], kir.C(1), "l1")
			ipg := b.Let("ipg", pg)
			blocks.ReadPageTo(b, acc[k], ipg, l1)
			b.NoCAsyncReadBarrier()
			q := kir.Div(ipg, kir.Ci(im.Ct))
			blocks.ZeroImagePadding(b, l1, im, blocks.ElemBytes(in.v.Type.DType), kir.Mod(q, kir.Ci(im.Rt)), kir.Mod(ipg, kir.Ci(im.Ct)))
			b.CBPushBack(inCB[k], kir.C(1))
		}
	})

	// Every eltwise program has an fp32 DEST. A bf16 DEST adds roundings the
	// reference does not have even when every value is bf16: SFPSTORE
	// truncates SFPU results to bf16, and each fidelity phase of an ELWMUL
	// rounds its partial sum to bf16 (ir/numerics datapath). From an fp32
	// DEST the packer rounds each result once.
	cp, c, ccount := s.rangeCompute("num_tiles")
	c.Startup(inCB[0], inCB[min(1, len(inCB)-1)], outCB)
	if zero {
		c.B.CBWaitFront(zeroCB, kir.C(1))
	}
	c.For("i", kir.C(0), ccount, func(kir.Var) { step(c, stepCBs, outCB) })
	if zero {
		c.B.CBPopFront(zeroCB, kir.C(1))
	}
	return s.finish(out, outCB, rd, cp)
}
