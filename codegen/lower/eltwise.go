package lower

import (
	"fmt"
	"strconv"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/ir"
)

// Eltwise family: unary ops run on the SFPU, binary ops on the FPU. The
// tiles of the result are split over the grid (planEltwise); each core
// streams its range tile by tile through two-page CBs: the reader fetches
// the operand tiles, compute unpacks them to DEST[0], applies the op and
// packs, the writer stores the result tile.

// sfpuOps maps the unary op kinds to their SFPU operation.
var sfpuOps = map[ir.OpKind]kir.SFPUOp{
	ir.OpSiLU:      kir.SFPUSiLU,
	ir.OpSigmoid:   kir.SFPUSigmoid,
	ir.OpExp:       kir.SFPUExp,
	ir.OpRsqrt:     kir.SFPURsqrt,
	ir.OpSquare:    kir.SFPUSquare,
	ir.OpAddScalar: kir.SFPUAddScalar,
	ir.OpMulScalar: kir.SFPUMulScalar,
}

// eltOps maps the binary op kinds to their FPU operation.
var eltOps = map[ir.OpKind]kir.EltwiseOp{
	ir.OpAdd: kir.EltAdd,
	ir.OpSub: kir.EltSub,
	ir.OpMul: kir.EltMul,
}

// needFP32Dest reports whether eltwise DEST must be fp32: when any value is
// not bf16, a bf16 DEST would add a rounding the reference does not have.
func needFP32Dest(vs ...*ir.Value) bool {
	for _, v := range vs {
		if v.Type.DType != ir.BF16 {
			return true
		}
	}
	return false
}

// eltInput is one operand stream of an eltwise program.
type eltInput struct {
	v  *ir.Value
	cb int
	// bcastRows: the operand is a row vector; tile i of the result reads
	// its tile i % wt.
	bcastRows bool
}

func lowerUnary(op *ir.Op, ctx *Context) (*kir.Program, error) {
	sf, ok := sfpuOps[op.Kind]
	if !ok {
		return nil, fmt.Errorf("rule sfpu-op: %s has no SFPU operation", op.Name())
	}
	x, out := op.Operands[0], op.Result()
	if err := requireTile("operand", x); err != nil {
		return nil, err
	}
	if err := requireTile("result", out); err != nil {
		return nil, err
	}
	if !x.Type.Shape.Equal(out.Type.Shape) {
		return nil, fmt.Errorf("rule eltwise-shape: result %s must have the operand's shape %s", out.Type.Shape, x.Type.Shape)
	}
	var param float32
	hasParam := sf.HasParam()
	if hasParam {
		v, ok := op.Attrs["value"].(float64)
		if !ok {
			return nil, fmt.Errorf("rule attr: %s needs a float attribute \"value\"", op.Name())
		}
		param = float32(v)
	}
	return eltwiseProgram(op, ctx, []eltInput{{v: x, cb: cbIn0}}, func(b *kir.Builder) {
		b.HWStartup(cbIn0, cbIn0, cbOut)
		b.CopyTileInit(cbIn0)
		b.SFPUInit(sf)
	}, func(b *kir.Builder) {
		b.CBWaitFront(cbIn0, kir.C(1))
		b.TileRegsAcquire()
		b.CopyTile(cbIn0, kir.C(0), kir.C(0))
		if hasParam {
			b.SFPUScalar(sf, kir.C(0), param)
		} else {
			b.SFPU(sf, kir.C(0))
		}
		b.TileRegsCommit()
		b.CBPopFront(cbIn0, kir.C(1))
	})
}

func lowerBinary(op *ir.Op, ctx *Context) (*kir.Program, error) {
	eop := eltOps[op.Kind]
	a, bv, out := op.Operands[0], op.Operands[1], op.Result()
	for _, v := range []*ir.Value{a, bv, out} {
		if err := requireTile("value", v); err != nil {
			return nil, err
		}
	}
	isRow := func(v *ir.Value) bool {
		s := v.Type.Shape
		return s.Rank() >= 1 && s.Rows2D() == 1 && s.Numel() == out.Type.Shape.Cols2D()
	}
	in0 := eltInput{v: a, cb: cbIn0}
	in1 := eltInput{v: bv, cb: cbIn1}
	switch {
	case a.Type.Shape.Equal(out.Type.Shape) && bv.Type.Shape.Equal(out.Type.Shape):
	case a.Type.Shape.Equal(out.Type.Shape) && isRow(bv):
		in1.bcastRows = true
	case bv.Type.Shape.Equal(out.Type.Shape) && isRow(a) && eop != kir.EltSub:
		// a op b == b op a for add and mul: stream b whole, broadcast a.
		in0, in1 = eltInput{v: bv, cb: cbIn0}, eltInput{v: a, cb: cbIn1, bcastRows: true}
	default:
		return nil, fmt.Errorf("rule eltwise-broadcast: %s supports operands of equal shape, or a full operand and a row vector [%d] broadcast over its rows (the row vector second for sub); got %s and %s",
			op.Name(), out.Type.Shape.Cols2D(), a.Type.Shape, bv.Type.Shape)
	}
	bcast := in1.bcastRows
	return eltwiseProgram(op, ctx, []eltInput{in0, in1}, func(b *kir.Builder) {
		b.HWStartup(cbIn0, cbIn1, cbOut)
		if bcast {
			b.BcastInit(eop, kir.BcastRows, cbIn0, cbIn1)
		} else {
			b.BinaryInit(eop, cbIn0, cbIn1)
		}
	}, func(b *kir.Builder) {
		b.CBWaitFront(cbIn0, kir.C(1))
		b.CBWaitFront(cbIn1, kir.C(1))
		b.TileRegsAcquire()
		if bcast {
			b.BcastTiles(eop, kir.BcastRows, cbIn0, cbIn1, kir.C(0), kir.C(0), kir.C(0))
		} else {
			b.BinaryTiles(eop, cbIn0, cbIn1, kir.C(0), kir.C(0), kir.C(0))
		}
		b.TileRegsCommit()
		b.CBPopFront(cbIn0, kir.C(1))
		b.CBPopFront(cbIn1, kir.C(1))
	})
}

// eltwiseProgram builds the reader/compute/writer program of a one-tile-at
// -a-time eltwise op. init emits the compute kernel's start-up; step emits,
// per tile, everything up to and including tile_regs_commit with the result
// in DEST[0] (the packing is added here).
func eltwiseProgram(op *ir.Op, ctx *Context, ins []eltInput, init, step func(b *kir.Builder)) (*kir.Program, error) {
	t := ctx.Target
	out := op.Result()
	p, err := newProgram(op, ctx)
	if err != nil {
		return nil, err
	}
	tiles := out.Type.Shape.Tiles()
	wt := tilesWide(out.Type.Shape)
	bytes := out.Type.DType.TileBytes()
	vals := []*ir.Value{out}
	for _, in := range ins {
		bytes += in.v.Type.DType.TileBytes()
		vals = append(vals, in.v)
	}
	plan := planEltwise(tiles, t.NumWorkers(), bytes)
	cores, rs := firstCores(t, plan.Cores)

	for _, in := range ins {
		p.AddCB(tileCB(in.cb, in.v.Type.DType, 2, rs, "in"+strconv.Itoa(in.cb)))
	}
	p.AddCB(tileCB(cbOut, out.Type.DType, 2, rs, "out"))

	// Reader: tiles [start, start+count) of every operand.
	rd := newReader(p, rs)
	addrs := make([]kir.ArgRef, len(ins))
	for i, in := range ins {
		addrs[i] = rd.CommonArg(fmt.Sprintf("in%d_addr", i), kir.BufferAddr(ctx.BufferName(in.v), 0))
	}
	rstart, rcount := rd.RuntimeArg("start_tile"), rd.RuntimeArg("num_tiles")
	var wtArg kir.ArgRef
	if ins[len(ins)-1].bcastRows {
		wtArg = rd.CompileArg("wt", uint32(wt))
	}
	b := rd.Builder()
	b.For("i", kir.C(0), rcount, func(i kir.Var) {
		page := b.Let("page", kir.Add(rstart, i))
		for k, in := range ins {
			pg := kir.Expr(page)
			if in.bcastRows {
				pg = kir.Mod(page, wtArg)
			}
			readPage(b, t, in.cb, addrs[k], pg, in.v.Type.DType.TileBytes())
		}
	})

	// Compute.
	cp := newCompute(p, rs, kir.ComputeConfig{MathFidelity: ctx.Fidelity, FP32DestAccEn: needFP32Dest(vals...)})
	ccount := cp.RuntimeArg("num_tiles")
	b = cp.Builder()
	init(b)
	b.For("i", kir.C(0), ccount, func(kir.Var) {
		step(b)
		b.CBReserveBack(cbOut, kir.C(1))
		b.TileRegsWait()
		b.PackTile(kir.C(0), cbOut)
		b.TileRegsRelease()
		b.CBPushBack(cbOut, kir.C(1))
	})

	// Writer.
	wr := newWriter(p, rs)
	oaddr := wr.CommonArg("out_addr", kir.BufferAddr(ctx.BufferName(out), 0))
	wstart, wcount := wr.RuntimeArg("start_tile"), wr.RuntimeArg("num_tiles")
	b = wr.Builder()
	b.For("i", kir.C(0), wcount, func(i kir.Var) {
		writePage(b, t, cbOut, oaddr, kir.Add(wstart, i), out.Type.DType.TileBytes())
	})

	for i, c := range cores {
		s, n := plan.Range(i)
		rd.SetRuntimeArgs(c, kir.U32(uint32(s)), kir.U32(uint32(n)))
		cp.SetRuntimeArgs(c, kir.U32(uint32(n)))
		wr.SetRuntimeArgs(c, kir.U32(uint32(s)), kir.U32(uint32(n)))
	}
	return p, nil
}
