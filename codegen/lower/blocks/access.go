package blocks

import (
	"fmt"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
)

// Access addresses the pages of one buffer from a data-movement kernel.
// It declares the buffer's base address as a common runtime argument of
// the kernel (and, for L1 buffers, the NoC coordinates of the grid's
// columns and rows, shared by every Access of the kernel) and builds NoC
// addresses of pages:
//
//   - DRAM interleaved: page i in bank i % banks at base + (i / banks) *
//     AlignUp(page size, DRAM read alignment), or where the buffer's
//     kir.BlockLayout puts it;
//   - L1 interleaved: page i on worker i % n (n = every worker core,
//     row-major) at base + (i / n) * AlignUp(page size, L1 alignment);
//   - L1 sharded (any sharded kind): page i on core i / per of the shard
//     grid (row-major, per = PagesPerCore) at base + (i % per) * stride.
//
// DRAM width-sharded buffers are not supported (NewAccess fails).
type Access struct {
	Buf    kir.Buffer
	t      *target.Target
	base   kir.ArgRef
	stride int
	// L1 placement.
	cores      []kir.Core
	gx0, gy0   int // top-left of the holder grid
	gw, gh     int // holder grid size (interleaved: the worker grid)
	per        int // pages per core (sharded)
	interleave bool
	xs, ys     []kir.ArgRef // NoC coordinates of the grid's columns / rows
}

// NewAccess declares buf's base address as the common runtime argument
// name of data-movement kernel k (the address of the buffer called buf.Name,
// resolved at load time) and returns its page addressing.
func NewAccess(k *kir.Kernel, t *target.Target, name string, buf kir.Buffer) (*Access, error) {
	a := &Access{Buf: buf, t: t}
	switch {
	case buf.Mem.Kind == ir.DRAMInterleaved:
		a.stride = t.DRAMPageSize(buf.PageSize)
	case buf.Mem.Kind.IsDRAM():
		return nil, fmt.Errorf("rule placement: buffer %q is %s; programs address DRAM-interleaved, L1-interleaved and L1-sharded buffers", buf.Name, buf.Mem)
	default:
		a.stride = target.AlignUp(buf.PageSize, t.L1Align)
		a.cores = buf.ShardCores(t.GridX, t.GridY)
		if len(a.cores) == 0 {
			return nil, fmt.Errorf("rule placement: buffer %q (%s) has no cores", buf.Name, buf.Mem)
		}
		if buf.Mem.Kind == ir.L1Interleaved {
			a.interleave = true
			a.gx0, a.gy0, a.gw, a.gh = 0, 0, t.GridX, t.GridY
		} else {
			g := buf.Mem.Shard.Grid
			a.gx0, a.gy0, a.gw, a.gh = g.X0, g.Y0, g.X1-g.X0+1, g.Y1-g.Y0+1
			a.per = buf.PagesPerCore(t.GridX, t.GridY)
		}
		for x := a.gx0; x < a.gx0+a.gw; x++ {
			a.xs = append(a.xs, nocArg(k, "noc_x_", x, kir.NoCX(kir.Core{X: x, Y: a.gy0})))
		}
		for y := a.gy0; y < a.gy0+a.gh; y++ {
			a.ys = append(a.ys, nocArg(k, "noc_y_", y, kir.NoCY(kir.Core{X: a.gx0, Y: y})))
		}
	}
	a.base = k.CommonArg(name, kir.BufferAddr(buf.Name, 0))
	return a, nil
}

// nocArg returns the kernel's common arg prefix<i>, declaring it with v
// when it does not exist yet.
func nocArg(k *kir.Kernel, prefix string, i int, v kir.ArgValue) kir.ArgRef {
	name := fmt.Sprintf("%s%d", prefix, i)
	if k.LookupArg(name) == nil {
		k.CommonArg(name, v)
	}
	return kir.ArgRef{Name: name}
}

// PageSize is the buffer's page size in bytes.
func (a *Access) PageSize() int { return a.Buf.PageSize }

// IsDRAM reports whether the buffer is in DRAM (reads must be 64-byte
// aligned, with the L1 destination at the same offset modulo 64).
func (a *Access) IsDRAM() bool { return a.Buf.Mem.Kind.IsDRAM() }

// Base is the argument holding the buffer's address.
func (a *Access) Base() kir.ArgRef { return a.base }

// PageAddr is the U64 NoC address of the first byte of page `page`.
func (a *Access) PageAddr(page kir.Expr) kir.Expr {
	if l := a.Buf.Blocks; l != nil && a.cores == nil {
		blk, at := l.SlotExpr(page) // the tile's block and place in it
		return l.BlockAddr(a.base, blk, kir.Mul(at, kir.Ci(a.stride)), a.stride, a.t.DRAMBanks)
	}
	if a.cores == nil {
		return kir.InterleavedPageAddr(a.base, page, a.stride)
	}
	var ci, slot kir.Expr
	if a.interleave {
		n := len(a.cores)
		ci, slot = kir.Mod(page, kir.Ci(n)), kir.Div(page, kir.Ci(n))
	} else {
		ci, slot = kir.Div(page, kir.Ci(a.per)), kir.Mod(page, kir.Ci(a.per))
	}
	var x, y kir.Expr
	if a.gw == 1 {
		x = a.xs[0]
	} else {
		x = selectArg(kir.Mod(ci, kir.Ci(a.gw)), a.xs)
	}
	if a.gh == 1 {
		y = a.ys[0]
	} else {
		y = selectArg(kir.Div(ci, kir.Ci(a.gw)), a.ys)
	}
	return kir.NoCAddr{X: x, Y: y, Addr: kir.Add(a.base, kir.Mul(slot, kir.Ci(a.stride)))}
}

// PageAddrAt is the U64 NoC address of byte off of page `page` (off a
// constant below the page size).
func (a *Access) PageAddrAt(page kir.Expr, off int) kir.Expr {
	if off == 0 {
		return a.PageAddr(page)
	}
	return a.PageAddrAtExpr(page, kir.Ci(off))
}

// PageAddrAtExpr is PageAddrAt for an offset computed at run time.
func (a *Access) PageAddrAtExpr(page, off kir.Expr) kir.Expr {
	switch ad := a.PageAddr(page).(type) {
	case kir.DRAMBankAddr:
		ad.Offset = kir.Add(ad.Offset, off)
		return ad
	case kir.NoCAddr:
		ad.Addr = kir.Add(ad.Addr, off)
		return ad
	default:
		panic(fmt.Sprintf("blocks: page address %T", ad))
	}
}

// selectArg is args[idx] as an expression: sum over i of (idx == i) * args[i].
func selectArg(idx kir.Expr, args []kir.ArgRef) kir.Expr {
	var e kir.Expr
	for i, a := range args {
		term := kir.Mul(kir.Eq(idx, kir.Ci(i)), a)
		if e == nil {
			e = term
		} else {
			e = kir.Add(e, term)
		}
	}
	return e
}

// LocalAddr is the U64 NoC address of L1 address addr on this core.
func LocalAddr(addr kir.Expr) kir.Expr {
	return kir.NoCAddr{X: kir.MyNoCX{}, Y: kir.MyNoCY{}, Addr: addr}
}
