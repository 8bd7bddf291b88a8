package interp

import "github.com/tcc-dev/tcc/codegen/kir"

// Expr is a compiled expression. It records a fault with Thread.Fail
// (and returns 0) when it cannot be evaluated.
type Expr[S any] func(t *Thread[S]) uint64

func maskOf(t kir.Type) uint64 {
	if t == kir.U32T {
		return 0xffffffff
	}
	return ^uint64(0)
}

func (c *Compiler[S]) exprs(es ...kir.Expr) ([]Expr[S], error) {
	out := make([]Expr[S], len(es))
	for i, e := range es {
		x, err := c.expr(e)
		if err != nil {
			return nil, err
		}
		out[i] = x
	}
	return out, nil
}

func (c *Compiler[S]) expr(e kir.Expr) (Expr[S], error) {
	switch e := e.(type) {
	case nil:
		return nil, malformed("missing operand")
	case kir.Const:
		v := uint64(e.V)
		return func(*Thread[S]) uint64 { return v }, nil
	case kir.Var:
		slot, err := c.slot(e, false)
		if err != nil {
			return nil, err
		}
		return func(t *Thread[S]) uint64 { return t.Vars[slot] }, nil
	case kir.ArgRef:
		i, ok := c.args[e.Name]
		if !ok {
			return nil, malformed("argument %q is not in the argument table", e.Name)
		}
		return func(t *Thread[S]) uint64 { return t.Args[i] }, nil
	case kir.Bin:
		return c.bin(e)
	case kir.GetWritePtr, kir.GetReadPtr, kir.GetTileSize:
		return cbExpr[S](e), nil
	case kir.GetSemaphore, kir.GetEthSemaphore:
		return c.semExpr(e)
	case kir.NoCAddr, kir.DRAMBankAddr, kir.MulticastAddr:
		return c.nocExpr(e)
	case kir.L1Read32:
		addr, err := c.expr(e.Addr)
		if err != nil {
			return nil, err
		}
		m := c.m
		return func(t *Thread[S]) uint64 { return m.ReadL1(t, addr(t), "L1 load") }, nil
	case kir.ReadTileValue:
		return c.tileValue(e)
	case kir.MyNoCX:
		return func(t *Thread[S]) uint64 { return uint64(t.Core.NX) }, nil
	case kir.MyNoCY:
		return func(t *Thread[S]) uint64 { return uint64(t.Core.NY) }, nil
	case kir.NumDRAMBanks:
		n := uint64(c.cfg.Target.DRAMBanks)
		return func(*Thread[S]) uint64 { return n }, nil
	}
	return nil, malformed("unknown expression %T", e)
}

// bin compiles x op y: unsigned arithmetic wrapped to the expression's
// type, comparisons 0 or 1, division and modulo by zero a fault.
func (c *Compiler[S]) bin(e kir.Bin) (Expr[S], error) {
	es, err := c.exprs(e.X, e.Y)
	if err != nil {
		return nil, err
	}
	x, y, op, mask := es[0], es[1], e.Op, maskOf(kir.TypeOf(e))
	switch op { // the frequent operators without the generic switch
	case kir.OpAdd:
		return func(t *Thread[S]) uint64 { return (x(t) + y(t)) & mask }, nil
	case kir.OpMul:
		return func(t *Thread[S]) uint64 { return (x(t) * y(t)) & mask }, nil
	case kir.OpLt:
		return func(t *Thread[S]) uint64 {
			if x(t) < y(t) {
				return 1
			}
			return 0
		}, nil
	}
	return func(t *Thread[S]) uint64 {
		a, b := x(t), y(t)
		v, ok := EvalBinOp(op, a, b)
		if !ok {
			t.Faultf(kir.RuleMalformed, kir.NoCB, "division by zero in %v %s %v", a, op, b)
		}
		return v & mask
	}, nil
}

// EvalBinOp evaluates x op y on unsigned 64-bit values (ok is false for a
// division or modulo by zero); comparisons give 0 or 1.
func EvalBinOp(op kir.BinOp, x, y uint64) (v uint64, ok bool) {
	b := func(c bool) uint64 {
		if c {
			return 1
		}
		return 0
	}
	switch op {
	case kir.OpAdd:
		return x + y, true
	case kir.OpSub:
		return x - y, true
	case kir.OpMul:
		return x * y, true
	case kir.OpDiv, kir.OpMod:
		if y == 0 {
			return 0, false
		}
		if op == kir.OpDiv {
			return x / y, true
		}
		return x % y, true
	case kir.OpShl:
		return x << (y & 63), true
	case kir.OpShr:
		return x >> (y & 63), true
	case kir.OpAnd:
		return x & y, true
	case kir.OpOr:
		return x | y, true
	case kir.OpXor:
		return x ^ y, true
	case kir.OpLt:
		return b(x < y), true
	case kir.OpLe:
		return b(x <= y), true
	case kir.OpGt:
		return b(x > y), true
	case kir.OpGe:
		return b(x >= y), true
	case kir.OpEq:
		return b(x == y), true
	case kir.OpNe:
		return b(x != y), true
	case kir.OpLAnd:
		return b(x != 0 && y != 0), true
	case kir.OpLOr:
		return b(x != 0 || y != 0), true
	}
	return 0, false
}

// cbExpr compiles get_write_ptr, get_read_ptr and get_tile_size of a CB
// of the thread's core.
func cbExpr[S any](e kir.Expr) Expr[S] {
	var idx int
	var call string
	var f func(*CB) uint64
	switch e := e.(type) {
	case kir.GetWritePtr:
		idx, call, f = e.CB, "get_write_ptr", (*CB).WritePtr
	case kir.GetReadPtr:
		idx, call, f = e.CB, "get_read_ptr", (*CB).ReadPtr
	case kir.GetTileSize:
		idx, call, f = e.CB, "get_tile_size", func(c *CB) uint64 { return uint64(c.Config.Format.TileBytes()) }
	}
	return func(t *Thread[S]) uint64 {
		cb := t.Core.CB(idx)
		if cb == nil {
			t.Fail(MissingCB(idx, call))
			return 0
		}
		return f(cb)
	}
}

// semExpr compiles get_semaphore(id) and its ACTIVE_ETH form. On a worker
// get_semaphore needs the semaphore created on the core; on an ethernet
// core it is the address of a worker's semaphore id (for get_noc_addr).
// The ACTIVE_ETH form is an ethernet core's semaphore, which must exist
// when it runs on one.
func (c *Compiler[S]) semExpr(e kir.Expr) (Expr[S], error) {
	var idExpr kir.Expr
	eth := false
	switch e := e.(type) {
	case kir.GetSemaphore:
		idExpr = e.ID
	case kir.GetEthSemaphore:
		idExpr, eth = e.ID, true
	}
	id, err := c.expr(idExpr)
	if err != nil {
		return nil, err
	}
	cfg := c.cfg
	ids := uint64(cfg.Target.MaxSemaphores)
	if eth {
		return func(t *Thread[S]) uint64 {
			v := id(t)
			if v >= ids || t.Core.Eth && !t.Core.HasSemaphore(v) {
				t.Faultf(kir.RuleSemaphore, kir.NoCB, "get_semaphore<ProgrammableCoreType::ACTIVE_ETH>(%d): no semaphore %d is created on this ethernet core", v, v)
				return 0
			}
			return cfg.EthSemaphoreBase + v*SemaphoreStride
		}, nil
	}
	return func(t *Thread[S]) uint64 {
		v := id(t)
		if t.Core.Eth {
			if v >= ids {
				t.Faultf(kir.RuleSemaphore, kir.NoCB, "get_semaphore(%d): semaphore ids are 0..%d", v, ids-1)
				return 0
			}
		} else if !t.Core.HasSemaphore(v) {
			t.Faultf(kir.RuleSemaphore, kir.NoCB, "get_semaphore(%d): no semaphore %d is created on this core", v, v)
			return 0
		}
		return cfg.SemaphoreBase + v*SemaphoreStride
	}, nil
}

// nocExpr compiles get_noc_addr, get_noc_addr_from_bank_id and
// get_noc_multicast_addr.
func (c *Compiler[S]) nocExpr(e kir.Expr) (Expr[S], error) {
	es, err := c.exprs(kir.SubExprs(e)...)
	if err != nil {
		return nil, err
	}
	switch e.(type) {
	case kir.NoCAddr:
		return func(t *Thread[S]) uint64 { return NoCAddress(es[0](t), es[1](t), es[2](t)) }, nil
	case kir.MulticastAddr:
		return func(t *Thread[S]) uint64 {
			return MulticastAddress(es[0](t), es[1](t), es[2](t), es[3](t), es[4](t))
		}, nil
	}
	tg := c.cfg.Target
	return func(t *Thread[S]) uint64 {
		bank, off := es[0](t), es[1](t)
		x, y, err := tg.DRAMNoC(int(bank))
		if err != nil || bank >= uint64(tg.DRAMBanks) {
			t.Faultf(kir.RuleMemory, kir.NoCB, "get_noc_addr_from_bank_id(%d, %#x): bank %d does not exist (%d banks)", bank, off, bank, tg.DRAMBanks)
			return 0
		}
		return NoCAddress(uint64(x), uint64(y), off)
	}, nil
}

// tileValue compiles read_tile_value(cb, tile, offset): the word at the
// CB's read pointer + tile*page + 4*offset, read through the machine's
// ReadL1. The page must be waited for (below the pages cb_wait_front
// claimed and not popped) and the word inside it.
func (c *Compiler[S]) tileValue(e kir.ReadTileValue) (Expr[S], error) {
	es, err := c.exprs(e.Tile, e.Offset)
	if err != nil {
		return nil, err
	}
	tile, off, idx, m := es[0], es[1], e.CB, c.m
	const call = "read_tile_value"
	return func(t *Thread[S]) uint64 {
		cb := t.Core.CB(idx)
		if cb == nil {
			t.Fail(MissingCB(idx, call))
			return 0
		}
		i, w := tile(t), off(t)
		if i >= uint64(cb.Waited) {
			t.Faultf(kir.RuleCBFlow, idx, "%s(c_%d, %d, %d) reads page %d, but only %d pages were waited for (cb_wait_front)", call, idx, i, w, i, cb.Waited)
			return 0
		}
		if 4*(w+1) > uint64(cb.PageSize) {
			t.Faultf(kir.RuleCBFlow, idx, "%s(c_%d, %d, %d) reads word %d of a %d-byte page", call, idx, i, w, w, cb.PageSize)
			return 0
		}
		return m.ReadL1(t, cb.ReadPtr()+i*uint64(cb.PageSize)+4*w, call)
	}, nil
}
