package lower

import (
	"fmt"
	"strconv"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower/blocks"
	"github.com/tcc-dev/tcc/ir"
)

// Matmul family: the decode matmul [M <= 32, K] x [K, N]. The N/32 output
// tile columns are split over the grid by PlanMatmul. Every core reads the
// activation's Kt tiles once into a resident CB, then, for each sub-block of
// at most DEST-capacity output tiles, streams the Kt x sub-block weight
// tiles; compute accumulates matmul_tiles over K in fp32 DEST and packs the
// sub-block; the writer stores the output tiles.

func lowerMatmul(op *ir.Op, ctx *Context) (*kir.Program, error) {
	t := ctx.Target
	a, w, out := op.Operands[0], op.Operands[1], op.Result()
	for _, v := range []*ir.Value{a, w, out} {
		if err := requireTile("value", v); err != nil {
			return nil, err
		}
	}
	ws := w.Type.Shape
	if ws.Rank() != 2 || a.Type.Shape.Rank() < 2 || a.Type.Shape.Cols2D() != ws[0] {
		return nil, fmt.Errorf("rule matmul-shape: want a [..., M, K] and w [K, N], got %s and %s", a.Type.Shape, ws)
	}
	k := ws[0]
	if k%ir.TileSize != 0 {
		return nil, fmt.Errorf("rule matmul-k: K = %d must be a multiple of %d (tile padding must not enter the sum)", k, ir.TileSize)
	}
	kt, nt := k/ir.TileSize, tilesWide(ws)
	if a.Type.Shape.Tiles() != kt {
		return nil, fmt.Errorf("rule matmul-decode-rows: the decode matmul needs a to be one tile row (M <= 32 rows, leading dims 1); a %s has %d tile rows", a.Type.Shape, a.Type.Shape.Tiles()/kt)
	}
	if out.Type.Shape.Tiles() != nt {
		return nil, fmt.Errorf("rule matmul-shape: result %s must be one row of %d tiles", out.Type.Shape, nt)
	}
	p, err := newProgram(op, ctx)
	if err != nil {
		return nil, err
	}
	dest := t.DestTiles(false, true)
	plan := PlanMatmul(kt, nt, t.NumWorkers(), w.Type.DType, a.Type.DType, ctx.Fidelity)
	cores, rs := firstCores(t, plan.Cores)

	p.AddCB(tileCB(cbIn0, a.Type.DType, kt, rs, "act"))
	p.AddCB(tileCB(cbIn1, w.Type.DType, 2*dest, rs, "weights"))
	p.AddCB(tileCB(cbOut, out.Type.DType, dest, rs, "out"))
	if err := checkL1(p, ctx, fmt.Sprintf("the decode matmul keeps the activation's %d tiles per core", kt)); err != nil {
		return nil, err
	}

	// Reader.
	rd := newReader(p, rs)
	aAcc, err := accessOf(ctx, rd, "a_addr", a)
	if err != nil {
		return nil, err
	}
	wAcc, err := accessOf(ctx, rd, "w_addr", w)
	if err != nil {
		return nil, err
	}
	rKt, rNt := rd.CompileArg("kt", uint32(kt)), rd.CompileArg("nt", uint32(nt))
	rstart, rcount := rd.RuntimeArg("start_tile"), rd.RuntimeArg("num_tiles")
	b := rd.Builder()
	b.For("k", kir.C(0), rKt, func(kk kir.Var) {
		blocks.ReadPage(b, aAcc, cbIn0, kk)
	})
	b.ForStep("nb", kir.C(0), rcount, kir.Ci(dest), func(nb kir.Var) {
		sb := subBlock(b, rcount, nb, dest)
		b.For("k", kir.C(0), rKt, func(kk kir.Var) {
			b.For("j", kir.C(0), sb, func(j kir.Var) {
				page := kir.Add(kir.Mul(kk, rNt), kir.Add(rstart, kir.Add(nb, j)))
				blocks.ReadPage(b, wAcc, cbIn1, page)
			})
		})
	})

	// Compute: fp32 DEST, sub-blocks of at most `dest` output tiles.
	cp := newCompute(p, rs, kir.ComputeConfig{MathFidelity: ctx.Fidelity, FP32DestAccEn: true})
	cKt := cp.CompileArg("kt", uint32(kt))
	ccount := cp.RuntimeArg("num_tiles")
	b = cp.Builder()
	b.MatmulHWStartup(cbIn0, cbIn1, cbOut)
	b.MatmulInit(cbIn0, cbIn1, false)
	b.CBWaitFront(cbIn0, cKt)
	b.ForStep("nb", kir.C(0), ccount, kir.Ci(dest), func(nb kir.Var) {
		sb := subBlock(b, ccount, nb, dest)
		b.TileRegsAcquire()
		b.For("k", kir.C(0), cKt, func(kk kir.Var) {
			b.For("j", kir.C(0), sb, func(j kir.Var) {
				b.CBWaitFront(cbIn1, kir.C(1))
				b.MatmulTiles(cbIn0, cbIn1, kk, kir.C(0), j)
				b.CBPopFront(cbIn1, kir.C(1))
			})
		})
		b.TileRegsCommit()
		b.TileRegsWait()
		b.For("j", kir.C(0), sb, func(j kir.Var) {
			b.CBReserveBack(cbOut, kir.C(1))
			b.PackTile(j, cbOut)
			b.CBPushBack(cbOut, kir.C(1))
		})
		b.TileRegsRelease()
	})
	b.CBPopFront(cbIn0, cKt)
	cp.Define("MM_CORES", strconv.Itoa(plan.Cores))
	cp.Define("MM_TILES_PER_CORE", strconv.Itoa(plan.PerCore))
	cp.Define("MM_SUBBLOCK", strconv.Itoa(dest))

	// Writer.
	if err := writeSplitPages(ctx, p, rs, out, cbOut, cores, plan, rd, cp); err != nil {
		return nil, err
	}
	return p, nil
}

// subBlock emits `sb = min(dest, count - nb)` into b and returns sb: the
// size of the output sub-block starting at tile nb of count.
func subBlock(b *kir.Builder, count kir.Expr, nb kir.Var, dest int) kir.Var {
	sb := b.LetT("sb", kir.U32T, kir.Sub(count, nb))
	b.If(kir.Gt(sb, kir.Ci(dest)), func() { b.Assign(sb, kir.Ci(dest)) })
	return sb
}
