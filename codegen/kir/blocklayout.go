package kir

import "fmt"

// BlockLayout places the tile pages of a DRAM weight of Kt x Nt tiles
// (page k*Nt + n holds tile (k, n)) in blocks that a matmul reader moves
// as one contiguous run from one bank instead of one request per tile.
//
// The columns form groups the way the reader's sub-blocks fall: runs of
// Period columns (one reading core's), each cut into groups of Dest
// columns, the last group of a run (and of the weight) narrower. A block
// of a group w columns wide holds R(w) = KB*Full/w consecutive K rows of
// it, k-major (w tiles a row), Full = min(Dest, Period): block q of the
// group holds rows [q R, min((q+1) R, Kt)). Within a run its groups'
// blocks are numbered in order (q = 0, 1, ...); across runs the blocks are
// numbered q-major, j = q*Runs + run, so that cores streaming their runs in
// step read consecutive blocks, which sit in different banks (the last,
// shorter run leaves numbers unused). Block j sits in bank j % banks at
// offset (j / banks) * KB*Full * stride from the buffer's address (stride:
// the aligned tile size), its tiles back to back.
type BlockLayout struct {
	Kt, Nt       int // the weight in tiles
	Period, Dest int // columns per reading core; per sub-block
	KB           int // K rows of a block of a Full-wide group
}

// Check reports whether every size is positive.
func (l *BlockLayout) Check() error {
	if l.Kt <= 0 || l.Nt <= 0 || l.Period <= 0 || l.Dest <= 0 || l.KB <= 0 {
		return fmt.Errorf("kir: block layout of %dx%d tiles, runs of %d columns, groups of %d, %d rows a block: every size must be positive", l.Kt, l.Nt, l.Period, l.Dest, l.KB)
	}
	return nil
}

// Full is the width of a full group: min(Dest, Period).
func (l *BlockLayout) Full() int { return min(l.Dest, l.Period) }

// BlockTiles is a block's capacity in tiles (KB*Full).
func (l *BlockLayout) BlockTiles() int { return l.KB * l.Full() }

// Rows is R(w): the K rows of a block of a group w columns wide.
func (l *BlockLayout) Rows(w int) int { return l.KB * l.Full() / w }

// Runs is the number of runs of Period columns.
func (l *BlockLayout) Runs() int { return (l.Nt + l.Period - 1) / l.Period }

// groupBlocks is Q(w), the blocks of a group w columns wide.
func (l *BlockLayout) groupBlocks(w int) int { return (l.Kt + l.Rows(w) - 1) / l.Rows(w) }

// runBlocks is the blocks of a whole run of Period columns.
func (l *BlockLayout) runBlocks() int {
	groups := (l.Period + l.Dest - 1) / l.Dest
	return (groups-1)*l.groupBlocks(l.Full()) + l.groupBlocks(l.Period-(groups-1)*l.Dest)
}

// group is column n's group: its first column, its width, its run and the
// number within the run of its first block.
func (l *BlockLayout) group(n int) (first, w, run, q int) {
	run, s := n/l.Period, n%l.Period/l.Dest
	first = run*l.Period + s*l.Dest
	w = min(l.Dest, l.Period-s*l.Dest, l.Nt-first)
	return first, w, run, s * l.groupBlocks(l.Full())
}

// Blocks is the number of block numbers (some of the last run's unused).
func (l *BlockLayout) Blocks() int { return l.runBlocks() * l.Runs() }

// Slot is where tile page p lives: its block and its index in the block.
func (l *BlockLayout) Slot(p int) (block, index int) {
	k, n := p/l.Nt, p%l.Nt
	first, w, run, q := l.group(n)
	r := l.Rows(w)
	return (q+k/r)*l.Runs() + run, (k%r)*w + n - first
}

// BlockExpr is, in kernel expressions, block q of the group starting at
// column col (a group's first column) counting from the group's first.
func (l *BlockLayout) BlockExpr(col, q Expr) Expr {
	run, s := Div(col, Ci(l.Period)), Div(Mod(col, Ci(l.Period)), Ci(l.Dest))
	return Add(Mul(Add(Mul(s, Ci(l.groupBlocks(l.Full()))), q), Ci(l.Runs())), run)
}

// SlotExpr is Slot in kernel expressions: the block and index of tile
// page p (min taken with comparisons: min(a, b) = b + (a < b)(a - b) in
// wrapping uint32 arithmetic).
func (l *BlockLayout) SlotExpr(p Expr) (block, index Expr) {
	k, n := Div(p, Ci(l.Nt)), Mod(p, Ci(l.Nt))
	s := Div(Mod(n, Ci(l.Period)), Ci(l.Dest))
	first := Add(Mul(Div(n, Ci(l.Period)), Ci(l.Period)), Mul(s, Ci(l.Dest)))
	minE := func(a, b Expr) Expr { return Add(b, Mul(Lt(a, b), Sub(a, b))) }
	w := minE(minE(Ci(l.Dest), Sub(Ci(l.Period), Mul(s, Ci(l.Dest)))), Sub(Ci(l.Nt), first))
	r := Div(Ci(l.KB*l.Full()), w)
	return l.BlockExpr(n, Div(k, r)), Add(Mul(Mod(k, r), w), Sub(n, first))
}

// BlockAddr is, in kernel expressions, the NoC address of byte off (nil:
// 0) of block j of a buffer at base whose tiles are stride bytes apart:
// bank j % banks, offset base + (j / banks) * BlockTiles*stride + off (the
// placement DRAMPage describes on the host).
func (l *BlockLayout) BlockAddr(base, j, off Expr, stride, banks int) DRAMBankAddr {
	at := Expr(Mul(Div(j, Ci(banks)), Ci(l.BlockTiles()*stride)))
	if off != nil {
		at = Add(at, off)
	}
	return DRAMBankAddr{Bank: Mod(j, Ci(banks)), Offset: Add(base, at)}
}

// DRAMPage is where page i of buffer b lives in DRAM when its pages are
// stride bytes apart (the aligned page size): its bank and its byte offset
// from the buffer's address. Plain interleaved: bank i % banks, offset
// (i / banks) * stride; in Blocks: see BlockLayout.
func (b *Buffer) DRAMPage(i, banks, stride int) (bank, off int) {
	l := b.Blocks
	if l == nil {
		return i % banks, (i / banks) * stride
	}
	blk, at := l.Slot(i)
	return blk % banks, (blk/banks)*l.BlockTiles()*stride + at*stride
}

// DRAMBytesPerBank is what a DRAM buffer whose pages are stride bytes
// apart occupies in each bank.
func (b *Buffer) DRAMBytesPerBank(banks, stride int) int {
	if b.Blocks == nil {
		return (b.Pages + banks - 1) / banks * stride
	}
	return (b.Blocks.Blocks() + banks - 1) / banks * b.Blocks.BlockTiles() * stride
}

// Same reports whether b and o are the same buffer: equal fields, and
// equal block layouts (both nil or the same values).
func (b Buffer) Same(o Buffer) bool {
	bl, ol := b.Blocks, o.Blocks
	b.Blocks, o.Blocks = nil, nil
	return b == o && (bl == nil) == (ol == nil) && (bl == nil || *bl == *ol)
}
