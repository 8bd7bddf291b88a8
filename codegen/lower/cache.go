package lower

import (
	"fmt"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower/blocks"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
)

// update_cache: out = cache [B, Hc, L, D] with out[b, h, pos_b, :] =
// new[b, h, :] (new [B, Hn >= Hc, D]; pos_b = pos[0] for pos [1], pos[b]
// for pos [B]). A data-movement program. The reader reads pos's page; for
// every cache page it handles it reads the page into a CB and, when the
// page's tile row holds the position of the page's user, copies row h of
// new (from new's tile, cached) into the page's row pos_b % 32 with local
// face-row copies; the writer stores the page.
//
// When the result and the cache resolve to the same buffer name (the
// runtime updates the state in place) only the B*Hc*Dt tiles of tile row
// pos_b/32 of each user are read, patched and written (the writer reads
// pos too, to find them). Otherwise every cache page is copied, which
// makes the result a complete new cache.

func lowerUpdateCache(op *ir.Op, ctx *Context) (*kir.Program, error) {
	t := ctx.Target
	cache, nw, pos, out := op.Operands[0], op.Operands[1], op.Operands[2], op.Result()
	if err := checkCacheRows(op); err != nil {
		return nil, err
	}
	if err := layoutOperands(cache, nw, out); err != nil {
		return nil, err
	}
	if err := checkDecodePos(pos, cache.Type.Shape[0]); err != nil {
		return nil, err
	}
	cs, ns := cache.Type.Shape, nw.Type.Shape
	if cs.Rank() != 4 || ns.Rank() != 3 || ns[0] != cs[0] || ns[1] < cs[1] || ns[2] != cs[3] || !out.Type.Shape.Equal(cs) {
		return nil, fmt.Errorf("rule cache-shape: want cache [B,H,L,D], new [B,>=H,D] and a result shaped like the cache, got %s, %s, %s", cs, ns, out.Type.Shape)
	}
	B, Hc, L := cs[0], cs[1], cs[2]
	if L%ir.TileSize != 0 {
		return nil, fmt.Errorf("rule cache-length: cache length %d must be a multiple of %d", L, ir.TileSize)
	}
	eb := blocks.ElemBytes(cache.Type.DType)
	ci, ni := blocks.ImageOf(cs), blocks.ImageOf(ns)
	lt, dt := ci.Rt, ci.Ct
	inPlace := ctx.BufferName(out) == ctx.BufferName(cache)
	units := ci.Pages
	if inPlace {
		units = B * Hc * dt
	}
	sp, err := newSplitProgram(op, ctx, PlanSplit(units, t.NumWorkers(), 2*EltwiseTileCycles, 0, 0))
	if err != nil {
		return nil, err
	}
	cbPage := sp.cbs.Input("page", cache.Type.DType, 2)
	cbNew := sp.cbs.Scratch("new_tile", nw.Type.DType, 1)
	cbPos := sp.cbs.Pages(blocks.ScratchCB, "pos", ir.UInt32, posPageBytes(t, pos), 1)
	cbPosW := -1
	if inPlace {
		cbPosW = sp.cbs.Pages(blocks.ScratchCB, "pos_writer", ir.UInt32, posPageBytes(t, pos), 1)
	}
	sp.planned("update_cache")
	// userOf is the user of unit u (in place) or of cache page u.
	userOf := func(u kir.Expr) kir.Expr {
		if inPlace {
			return kir.Div(u, kir.Ci(Hc*dt))
		}
		return kir.Div(u, kir.Ci(Hc*lt*dt))
	}
	// pageOf is the cache page of unit u when in place.
	pageOf := func(u, posv kir.Expr) kir.Expr {
		bh := kir.Div(u, kir.Ci(dt))
		return kir.Add(kir.Mul(kir.Add(kir.Mul(bh, kir.Ci(lt)), kir.Div(posv, kir.Ci(ir.TileSize))), kir.Ci(dt)), kir.Mod(u, kir.Ci(dt)))
	}

	rd := sp.reader()
	cAcc, nAcc, pAcc := sp.bind(rd, "cache_addr", cache), sp.bind(rd, "new_addr", nw), sp.bind(rd, "pos_addr", pos)
	if sp.err != nil {
		return nil, sp.err
	}
	rstart, rcount := rd.RuntimeArg("start"), rd.RuntimeArg("count")
	b := rd.Builder()
	pp := readPosPage(b, pAcc, cbPos, pos)
	posv := pp.shared
	slot := blocks.Scratch(b, cbNew, "new_tile")
	cur := b.LetT("cur", kir.U32T, kir.C(0xFFFFFFFF))
	var ptr, prow kir.Var
	if !pp.perUser {
		ptr = b.Let("ptr", kir.Div(posv, kir.Ci(ir.TileSize)))
		prow = b.Let("prow", kir.Mod(posv, kir.Ci(ir.TileSize)))
	}
	b.For("i", kir.C(0), rcount, func(i kir.Var) {
		u := b.Let("u", kir.Add(rstart, i))
		if pp.perUser {
			b.Comment("the position of the unit's user")
			posv = pp.of(b, userOf(u), "upos")
			ptr = b.Let("ptr", kir.Div(posv, kir.Ci(ir.TileSize)))
			prow = b.Let("prow", kir.Mod(posv, kir.Ci(ir.TileSize)))
		}
		page := kir.Expr(u)
		if inPlace {
			page = pageOf(u, posv)
		}
		pg := b.Let("pg", page)
		l1 := blocks.Reserve(b, cbPage, kir.C(1), "l1")
		blocks.ReadPageTo(b, cAcc, pg, l1)
		b.NoCAsyncReadBarrier()
		patch := func() {
			d := b.Let("d", kir.Mod(pg, kir.Ci(dt)))
			bh := b.Let("bh", kir.Div(pg, kir.Ci(lt*dt)))
			h := b.Let("h", kir.Mod(bh, kir.Ci(Hc)))
			row := b.Let("nrow", kir.Add(kir.Mul(kir.Div(bh, kir.Ci(Hc)), kir.Ci(ns[1])), h))
			npg := b.Let("npg", ni.Page(row, kir.Mul(d, kir.Ci(ir.TileSize))))
			b.If(kir.Ne(npg, cur), func() {
				blocks.ReadPageTo(b, nAcc, npg, slot)
				b.NoCAsyncReadBarrier()
				b.Assign(cur, npg)
			})
			hr := b.Let("hr", kir.Mod(h, kir.Ci(ir.TileSize)))
			for c := 0; c < ir.TileSize; c += blocks.FaceDim {
				blocks.CopyRun(b, kir.Add(slot, blocks.FaceOffset(hr, kir.Ci(c), eb)), kir.Add(l1, blocks.FaceOffset(prow, kir.Ci(c), eb)), blocks.FaceDim, eb, blocks.FaceDim*eb)
			}
			b.NoCAsyncReadBarrier()
		}
		if inPlace {
			patch()
		} else {
			b.If(kir.Eq(kir.Mod(kir.Div(pg, kir.Ci(dt)), kir.Ci(lt)), ptr), patch)
		}
		b.CBPushBack(cbPage, kir.C(1))
	})
	blocks.ReleaseScratch(b, cbNew)
	blocks.ReleaseScratch(b, cbPos)

	wr, oAcc := sp.writerOf("out_addr", out)
	if sp.err != nil {
		return nil, sp.err
	}
	wstart, wcount := wr.RuntimeArg("start"), wr.RuntimeArg("count")
	b = wr.Builder()
	if !inPlace {
		blocks.WritePages(b, oAcc, cbPage, wstart, wcount)
	} else {
		wpAcc, err := accessOf(ctx, wr, "pos_addr", pos)
		if err != nil {
			return nil, err
		}
		wpp := readPosPage(b, wpAcc, cbPosW, pos)
		b.For("i", kir.C(0), wcount, func(i kir.Var) {
			if !wpp.perUser {
				blocks.WritePage(b, oAcc, cbPage, pageOf(kir.Add(wstart, i), wpp.shared))
				return
			}
			u := b.Let("u", kir.Add(wstart, i))
			blocks.WritePage(b, oAcc, cbPage, pageOf(u, wpp.of(b, userOf(u), "upos")))
		})
		blocks.ReleaseScratch(b, cbPosW)
	}
	sp.plan.SetArgs(sp.cores, rd, nil, wr)
	return sp.p, nil
}

// checkPos checks a position operand shared by every user: [1] uint32
// (or int32) row-major.
func checkPos(pos *ir.Value) error {
	if (pos.Type.DType != ir.UInt32 && pos.Type.DType != ir.Int32) || pos.Type.Layout != ir.RowMajorLayout || pos.Type.Shape.Numel() != 1 {
		return fmt.Errorf("rule decode-pos: pos must be a [1] uint32 row-major tensor, got %s", pos.Type)
	}
	return nil
}

// checkDecodePos checks a decode position operand of a batch of users:
// [1] (every user at pos[0]) or [users] (user b at pos[b]) uint32 (or
// int32) row-major, one page.
func checkDecodePos(pos *ir.Value, users int) error {
	t := pos.Type
	if (t.DType != ir.UInt32 && t.DType != ir.Int32) || t.Layout != ir.RowMajorLayout || t.Shape.Rank() != 1 || (t.Shape[0] != 1 && t.Shape[0] != users) {
		return fmt.Errorf("rule decode-pos: pos must be a [1] or [%d] (one position per user) uint32 row-major tensor, got %s", users, t)
	}
	return nil
}

// perUserPos reports whether pos holds a position per user (pos [B], B >
// 1): the kernels read word b of its page for user b. Otherwise pos is
// [1] and every user reads its one word.
func perUserPos(pos *ir.Value) bool { return pos.Type.Shape.Numel() > 1 }

// posPageBytes is the page size of the CB that receives pos's page: one
// word for pos [1], the whole DRAM page (every user's word) otherwise.
func posPageBytes(t *target.Target, pos *ir.Value) int {
	if !perUserPos(pos) {
		return pos.Type.DType.ElemBytes()
	}
	return t.DRAMPageSize(pos.Type.Shape.Numel() * pos.Type.DType.ElemBytes())
}

// readPos emits the read of the position page into scratch CB cb (kept
// until the caller releases it) and returns the variable holding pos
// (its first word: every user's position when pos is [1]).
func readPos(b *kir.Builder, acc *blocks.Access, cb int) kir.Var {
	l1 := blocks.Scratch(b, cb, "posp")
	blocks.ReadPageTo(b, acc, kir.C(0), l1)
	b.NoCAsyncReadBarrier()
	return b.Let("pos", kir.L1Read32{Addr: l1})
}

// posReader is the position page of a decode program in a kernel's L1.
type posReader struct {
	perUser bool
	l1      kir.Var // the page (perUser)
	shared  kir.Var // pos[0] (not perUser)
}

// readPosPage emits the read of pos's page into scratch CB cb (kept until
// the caller releases it). With pos [1] it emits exactly readPos.
func readPosPage(b *kir.Builder, acc *blocks.Access, cb int, pos *ir.Value) posReader {
	if !perUserPos(pos) {
		return posReader{shared: readPos(b, acc, cb)}
	}
	l1 := blocks.Scratch(b, cb, "posp")
	blocks.ReadPageTo(b, acc, kir.C(0), l1)
	b.NoCAsyncReadBarrier()
	return posReader{perUser: true, l1: l1}
}

// of emits user's position: the shared variable, or (perUser) a variable
// named name holding word user of the page.
func (p posReader) of(b *kir.Builder, user kir.Expr, name string) kir.Var {
	if !p.perUser {
		return p.shared
	}
	return b.Let(name, kir.L1Read32{Addr: kir.Add(p.l1, kir.Mul(user, kir.C(4)))})
}
