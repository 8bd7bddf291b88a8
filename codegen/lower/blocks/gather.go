package blocks

import (
	"fmt"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/ir"
)

// GatherSource is one tensor a Gather copies from: its page addressing and
// its tile view.
type GatherSource struct {
	Acc   *Access
	Image Image
}

// Run is one possible origin of an output run of Gather.Seg elements: when
// Cond holds (nil: always), the run is copied from source Src starting at
// element (Row, Col) of the source's flattened 2-D view. Col must be a
// multiple of Seg, and the Seg elements must lie in one source row.
type Run struct {
	Cond     kir.Expr
	Src      int
	Row, Col kir.Expr
}

// Gather assembles the tiles of an output tensor (tile view Out, element
// type DType, bf16 or fp32 or 32-bit integers) from the tiles of source
// tensors of the same element type, in a data-movement kernel. For every
// output page it reserves a page of the output CB, optionally fills it
// with FillValue (Fill; needed when some valid elements have no Run, and
// to give the padding a defined value), then for every valid output row
// (flattened 2-D row index) and every run of Seg columns asks Map where the
// run comes from, loads the source tile into a one-page cache slot of that
// source (a page is re-read only when the run needs another page than the
// previous one) and copies the run. Runs start at output columns that are
// multiples of Seg; Seg must be a power of two <= 16 dividing the output's
// columns (SegFor).
type Gather struct {
	Out       Image
	DType     ir.DType
	Seg       int
	Fill      bool
	FillValue float32
	Sources   []GatherSource
	// Map emits (into b, in the reader) whatever it needs and returns the
	// candidate origins of the run starting at output element (row, col).
	Map func(b *kir.Builder, row, col kir.Var) []Run
	// Prefetch, when positive, is the number of pages of each source's
	// cache (its slot CB must have that many): Page then issues the reads
	// of every source page the output page needs at once (one per change
	// of page along its runs, in order), waits once and copies the runs,
	// instead of waiting for each page as its first run needs it. It must
	// be at least PrefetchPages(candidates).
	Prefetch int
	// Groups, when positive (with Prefetch), keeps pages from one output
	// page to the next: the cache has Groups groups of Prefetch slots,
	// output page p uses group p % Groups, and each slot remembers the
	// page it holds (a tag in L1, after the slots: the slot CB must have
	// Groups*Prefetch pages and room for the tags, GroupTagPages), so a
	// page already in its slot is not read again. Output pages that need
	// the same source pages in the same order (the prefill gate's tokens
	// of one tile row: the same 12 source tiles for each) then read them
	// once.
	Groups int

	slots    []int
	slotAddr []kir.Var
	cur      []kir.Var
	next     []kir.Var // Prefetch: the slot the next page change takes
	tags     []kir.Var // Groups: the L1 address of the slots' tags
}

// CachePages is the pages of source i's slot CB: max(Prefetch, 1), times
// Groups plus GroupTagPages with groups.
func (g *Gather) CachePages() int {
	if g.Groups > 0 && g.Prefetch > 0 {
		return g.Groups*g.Prefetch + GroupTagPages(g.Groups*g.Prefetch, g.DType.TileBytes())
	}
	return max(g.Prefetch, 1)
}

// GroupTagPages is the pages of tileBytes that hold slots 32-bit tags.
func GroupTagPages(slots, tileBytes int) int { return (4*slots + tileBytes - 1) / tileBytes }

// Check reports a Gather that cannot work: element sizes and run length.
func (g *Gather) Check() error {
	eb := ElemBytes(g.DType)
	if eb != 2 && eb != 4 {
		return fmt.Errorf("rule relayout-dtype: data movement moves bf16, fp32 and 32-bit integer elements, not %s (block floats share exponents across elements)", g.DType)
	}
	if g.Seg < 1 || g.Seg > FaceDim || FaceDim%g.Seg != 0 || g.Out.C%g.Seg != 0 {
		return fmt.Errorf("rule relayout-run: run length %d must be a power of two <= 16 dividing the output's %d columns", g.Seg, g.Out.C)
	}
	return nil
}

// Emit emits the assembly of output pages first .. first+count-1, in
// order, into outCB (one page at a time): Begin, a loop of Page, End.
// Produces count pages of outCB.
func (g *Gather) Emit(b *kir.Builder, outCB int, slots []int, first, count kir.Expr) {
	g.Begin(b, slots)
	b.For("p", first, kir.Add(first, count), func(p kir.Var) { g.Page(b, outCB, p) })
	g.End(b)
}

// PrefetchPages bounds the page changes along the runs of one output page
// when Map returns at most candidates origins per run: a Prefetch cache of
// this many pages per source never overflows.
func (g *Gather) PrefetchPages(candidates int) int { return PrefetchPages(g.Out, g.Seg, candidates) }

// PrefetchPages is Gather.PrefetchPages of a gather into out with runs of
// seg elements, for sizing the cache CB before the Gather exists.
func PrefetchPages(out Image, seg, candidates int) int {
	return min(TileDim, out.R) * ((min(TileDim, out.C) + seg - 1) / seg) * candidates
}

// Begin takes the cache slots: slots[i] is a CB of source i's page size
// with one page (max(Prefetch, 1) pages), used as its tile cache
// (Scratch). Call before Page.
func (g *Gather) Begin(b *kir.Builder, slots []int) {
	g.slots = slots
	g.slotAddr = make([]kir.Var, len(g.Sources))
	g.cur = make([]kir.Var, len(g.Sources))
	g.next = make([]kir.Var, len(g.Sources))
	g.tags = make([]kir.Var, len(g.Sources))
	for i := range g.Sources {
		g.slotAddr[i] = ScratchPages(b, slots[i], g.CachePages(), fmt.Sprintf("slot%d", i))
		g.cur[i] = b.LetT(fmt.Sprintf("cur%d", i), kir.U32T, kir.C(0xFFFFFFFF))
		if g.Prefetch > 0 {
			g.next[i] = b.LetT(fmt.Sprintf("next%d", i), kir.U32T, kir.C(0))
		}
		if g.grouped() {
			n := g.Groups * g.Prefetch
			g.tags[i] = b.Let(fmt.Sprintf("tags%d", i), kir.Add(g.slotAddr[i], kir.Ci(n*g.DType.TileBytes())))
			b.Comment("no slot holds a page yet")
			FillWords(b, g.tags[i], 4*n, 0xFFFFFFFF)
		}
	}
}

// grouped reports whether the cache keeps pages across output pages.
func (g *Gather) grouped() bool { return g.Groups > 0 && g.Prefetch > 0 }

// End releases the cache slots taken by Begin.
func (g *Gather) End(b *kir.Builder) {
	for i := range g.Sources {
		ReleaseScratchPages(b, g.slots[i], g.CachePages())
	}
}

// Page emits the assembly of output page p (an expression) into one page
// of outCB. Produces one page of outCB.
func (g *Gather) Page(b *kir.Builder, outCB int, p kir.Expr) {
	eb := ElemBytes(g.DType)
	out := g.Out
	tc := b.Let("tc", kir.Mod(p, kir.Ci(out.Ct)))
	q := b.Let("q", kir.Div(p, kir.Ci(out.Ct)))
	tr := b.Let("tr", kir.Mod(q, kir.Ci(out.Rt)))
	bb := b.Let("bb", kir.Div(q, kir.Ci(out.Rt)))
	nr := b.LetT("nr", kir.U32T, kir.Sub(kir.Ci(out.R), kir.Mul(tr, kir.Ci(TileDim))))
	b.If(kir.Gt(nr, kir.Ci(TileDim)), func() { b.Assign(nr, kir.Ci(TileDim)) })
	nc := b.LetT("nc", kir.U32T, kir.Sub(kir.Ci(out.C), kir.Mul(tc, kir.Ci(TileDim))))
	b.If(kir.Gt(nc, kir.Ci(TileDim)), func() { b.Assign(nc, kir.Ci(TileDim)) })
	var group kir.Expr
	if g.grouped() {
		group = b.Let("group", kir.Mul(kir.Mod(p, kir.Ci(g.Groups)), kir.Ci(g.Prefetch)))
	}
	tp := Reserve(b, outCB, kir.C(1), "tp")
	if g.Fill {
		FillWords(b, tp, g.DType.TileBytes(), FillWord(g.DType, g.FillValue))
	}
	// runs emits body for every run of the page with its source, source
	// element and page, in order; at a change of the source's page it
	// first emits change (with the slot's L1 address for the new page) and
	// makes that page current.
	runs := func(change func(i int, si kir.Expr, src GatherSource, pg kir.Var, slot kir.Expr), body func(src GatherSource, sr, sc kir.Var, slot kir.Expr, dst kir.Var)) {
		b.For("r", kir.C(0), nr, func(r kir.Var) {
			row := b.Let("row", kir.Add(kir.Mul(bb, kir.Ci(out.R)), kir.Add(kir.Mul(tr, kir.Ci(TileDim)), r)))
			b.ForStep("c", kir.C(0), nc, kir.Ci(g.Seg), func(c kir.Var) {
				col := b.Let("col", kir.Add(kir.Mul(tc, kir.Ci(TileDim)), c))
				dst := b.Let("dst", kir.Add(tp, FaceOffset(r, c, eb)))
				for _, run := range g.Map(b, row, col) {
					emit := func() {
						i := run.Src
						src := g.Sources[i]
						sr := b.Let("sr", run.Row)
						sc := b.Let("sc", run.Col)
						pg := b.Let("pg", src.Image.Page(sr, sc))
						slot := kir.Expr(g.slotAddr[i])
						si := kir.Expr(kir.Sub(g.next[i], kir.C(1)))
						if group != nil {
							si = kir.Add(group, si)
						}
						if g.Prefetch > 0 {
							slot = kir.Add(g.slotAddr[i], kir.Mul(si, kir.Ci(g.DType.TileBytes())))
						}
						b.If(kir.Ne(pg, g.cur[i]), func() {
							if g.Prefetch > 0 {
								b.Assign(g.next[i], kir.Add(g.next[i], kir.C(1)))
							}
							change(i, si, src, pg, slot)
							b.Assign(g.cur[i], pg)
						})
						body(src, sr, sc, slot, dst)
					}
					if run.Cond == nil {
						emit()
					} else {
						b.If(run.Cond, emit)
					}
				}
			})
		})
	}
	reset := func() {
		for i := range g.Sources {
			b.Assign(g.cur[i], kir.C(0xFFFFFFFF))
			b.Assign(g.next[i], kir.C(0))
		}
	}
	if g.Prefetch > 0 {
		b.Comment("every source page this output page needs, all in flight")
		reset()
		runs(func(i int, si kir.Expr, src GatherSource, pg kir.Var, slot kir.Expr) {
			if !g.grouped() {
				ReadPageTo(b, src.Acc, pg, slot)
				return
			}
			tag := b.Let("tag", kir.Add(g.tags[i], kir.Mul(si, kir.C(4))))
			b.If(kir.Ne(kir.L1Read32{Addr: tag}, pg), func() {
				ReadPageTo(b, src.Acc, pg, slot)
				b.L1Write32(tag, pg)
			})
		}, func(GatherSource, kir.Var, kir.Var, kir.Expr, kir.Var) {})
		b.NoCAsyncReadBarrier()
		reset()
		runs(func(int, kir.Expr, GatherSource, kir.Var, kir.Expr) {}, func(src GatherSource, sr, sc kir.Var, slot kir.Expr, dst kir.Var) {
			CopyRun(b, kir.Add(slot, src.Image.InTile(sr, sc, eb)), dst, g.Seg, eb, g.Seg*eb)
		})
	} else {
		runs(func(_ int, _ kir.Expr, src GatherSource, pg kir.Var, slot kir.Expr) {
			ReadPageTo(b, src.Acc, pg, slot)
			b.NoCAsyncReadBarrier()
		}, func(src GatherSource, sr, sc kir.Var, slot kir.Expr, dst kir.Var) {
			CopyRun(b, kir.Add(slot, src.Image.InTile(sr, sc, eb)), dst, g.Seg, eb, g.Seg*eb)
		})
	}
	b.NoCAsyncReadBarrier()
	b.CBPushBack(outCB, kir.C(1))
}

// Index helpers: the multi-dimensional index of a flattened row.

// Unflatten splits the flattened 2-D row index `row` of a tensor of shape
// dims (rank >= 1) into the indices of its leading dims and of its
// second-to-last dim (rank-1 values; a rank-1 tensor has the single row 0
// and yields no indices).
func Unflatten(row kir.Expr, dims ir.Shape) []kir.Expr {
	n := dims.Rank() - 1
	idx := make([]kir.Expr, n)
	rest := row
	for d := n - 1; d >= 0; d-- {
		if d == 0 {
			idx[d] = rest
			break
		}
		idx[d] = kir.Mod(rest, kir.Ci(dims[d]))
		rest = kir.Div(rest, kir.Ci(dims[d]))
	}
	return idx
}

// Flatten is the flattened 2-D row of the leading-dim indices idx (rank-1
// values) of a tensor of shape dims.
func Flatten(idx []kir.Expr, dims ir.Shape) kir.Expr {
	if len(idx) == 0 {
		return kir.C(0)
	}
	e := idx[0]
	for d := 1; d < len(idx); d++ {
		e = kir.Add(kir.Mul(e, kir.Ci(dims[d])), idx[d])
	}
	return e
}

// Cache is source i's cache of a Begun Gather: the L1 address of its
// first slot and (Groups) of its slots' tags (the zero Var without groups), for a
// caller that emits a page of its own with the same slot assignment.
func (g *Gather) Cache(i int) (slots, tags kir.Var) { return g.slotAddr[i], g.tags[i] }
