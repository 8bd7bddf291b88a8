package kexec

import (
	"fmt"

	"github.com/tcc-dev/tcc/codegen/kir"
)

// instr executes one flat instruction and returns the next pc, or blocked
// when the kernel must wait (ks.blocked then says for what).
type instr func(ks *kstate) (int, error)

const blocked = -1

// cexpr evaluates a compiled expression.
type cexpr func(ks *kstate) (uint64, error)

// kcode is a kernel compiled once for all its cores.
type kcode struct {
	code  []instr
	slots int
}

type compiler struct {
	r *run
	k *kir.Kernel
	// defs holds the value each variable was last given by a Let or Assign,
	// for tracing a NoC address back to the buffer argument it is built on.
	defs  map[string]kir.Expr
	code  []instr
	slots map[string]int
	types map[string]kir.Type
	args  map[string]int // arg name -> row in k.Args
}

func compileKernel(r *run, k *kir.Kernel) (*kcode, error) {
	cc := &compiler{r: r, k: k, slots: map[string]int{}, types: map[string]kir.Type{}, args: map[string]int{}, defs: map[string]kir.Expr{}}
	for i, a := range k.Args {
		cc.args[a.Name] = i
	}
	if err := cc.block(k.Body); err != nil {
		return nil, err
	}
	return &kcode{code: cc.code, slots: len(cc.slots)}, nil
}

func (cc *compiler) errf(format string, args ...any) error {
	return cc.r.ruleErr(kir.RuleMalformed, cc.k.Name, nil, kir.NoCB, format, args...)
}

func (cc *compiler) emit(i instr) int {
	cc.code = append(cc.code, i)
	return len(cc.code) - 1
}

// next is an instruction that always continues.
func next(f func(ks *kstate) error) instr {
	return func(ks *kstate) (int, error) {
		if err := f(ks); err != nil {
			return 0, err
		}
		return ks.pc + 1, nil
	}
}

// maybeBlock continues unless f reports that it must wait.
func maybeBlock(f func(ks *kstate) (bool, error)) instr {
	return func(ks *kstate) (int, error) {
		wait, err := f(ks)
		if err != nil {
			return 0, err
		}
		if wait {
			return blocked, nil
		}
		return ks.pc + 1, nil
	}
}

func (cc *compiler) slot(v kir.Var, declare bool) (int, error) {
	if s, ok := cc.slots[v.Name]; ok {
		if cc.types[v.Name] != v.Type {
			return 0, cc.errf("variable %q used as %s, declared %s", v.Name, v.Type, cc.types[v.Name])
		}
		return s, nil
	}
	if !declare {
		return 0, cc.errf("variable %q is used before its declaration", v.Name)
	}
	cc.slots[v.Name] = len(cc.slots)
	cc.types[v.Name] = v.Type
	return cc.slots[v.Name], nil
}

func mask(t kir.Type, v uint64) uint64 {
	if t == kir.U32T {
		return v & 0xffffffff
	}
	return v
}

func (cc *compiler) block(body []kir.Stmt) error {
	for _, s := range body {
		if err := cc.stmt(s); err != nil {
			return err
		}
	}
	return nil
}

func (cc *compiler) exprs(es ...kir.Expr) ([]cexpr, error) {
	out := make([]cexpr, len(es))
	for i, e := range es {
		c, err := cc.expr(e)
		if err != nil {
			return nil, err
		}
		out[i] = c
	}
	return out, nil
}

func (cc *compiler) stmt(s kir.Stmt) error {
	switch s := s.(type) {
	case kir.Let, kir.Assign:
		var v kir.Var
		var e kir.Expr
		declare := false
		if l, ok := s.(kir.Let); ok {
			v, e, declare = l.Var, l.Value, true
		} else {
			a := s.(kir.Assign)
			v, e = a.Var, a.Value
		}
		val, err := cc.expr(e)
		if err != nil {
			return err
		}
		slot, err := cc.slot(v, declare)
		if err != nil {
			return err
		}
		if _, seen := cc.defs[v.Name]; seen && !declare {
			cc.defs[v.Name] = nil // reassigned: no single definition
		} else {
			cc.defs[v.Name] = e
		}
		t := v.Type
		cc.emit(next(func(ks *kstate) error {
			x, err := val(ks)
			ks.vars[slot] = mask(t, x)
			return err
		}))
	case kir.For:
		es, err := cc.exprs(s.Start)
		if err != nil {
			return err
		}
		start := es[0]
		slot, err := cc.slot(s.Var, true)
		if err != nil {
			return err
		}
		end, err := cc.expr(s.End)
		if err != nil {
			return err
		}
		step := func(*kstate) (uint64, error) { return 1, nil }
		if s.Step != nil {
			if step, err = cc.expr(s.Step); err != nil {
				return err
			}
		}
		cc.emit(next(func(ks *kstate) error {
			x, err := start(ks)
			ks.vars[slot] = mask(kir.U32T, x)
			return err
		}))
		var exit int
		head := cc.emit(func(ks *kstate) (int, error) {
			e, err := end(ks)
			if err != nil {
				return 0, err
			}
			if ks.vars[slot] < mask(kir.U32T, e) {
				return ks.pc + 1, nil
			}
			return exit, nil
		})
		if err := cc.block(s.Body); err != nil {
			return err
		}
		cc.emit(func(ks *kstate) (int, error) {
			st, err := step(ks)
			ks.vars[slot] = mask(kir.U32T, ks.vars[slot]+st)
			return head, err
		})
		exit = len(cc.code)
	case kir.If:
		cond, err := cc.expr(s.Cond)
		if err != nil {
			return err
		}
		var elseAt, endAt int
		cc.emit(func(ks *kstate) (int, error) {
			c, err := cond(ks)
			if c != 0 {
				return ks.pc + 1, err
			}
			return elseAt, err
		})
		if err := cc.block(s.Then); err != nil {
			return err
		}
		if len(s.Else) > 0 {
			cc.emit(func(ks *kstate) (int, error) { return endAt, nil })
		}
		elseAt = len(cc.code)
		if err := cc.block(s.Else); err != nil {
			return err
		}
		endAt = len(cc.code)
	case kir.Comment:
	default:
		if cc.k.Role == kir.RoleCompute {
			if kir.IsDataMovementOnly(s) {
				return cc.errf("%s is a data-movement call in a compute kernel", kir.APIName(s))
			}
		} else if kir.IsComputeOnly(s) {
			return cc.errf("%s is a compute call in a %s kernel", kir.APIName(s), cc.k.Role)
		}
		in, err := cc.call(s)
		if err != nil {
			return err
		}
		cc.emit(in)
	}
	return nil
}

func (cc *compiler) expr(e kir.Expr) (cexpr, error) {
	if e == nil {
		return nil, cc.errf("missing operand")
	}
	switch e := e.(type) {
	case kir.Const:
		v := uint64(e.V)
		return func(*kstate) (uint64, error) { return v, nil }, nil
	case kir.Var:
		slot, err := cc.slot(e, false)
		if err != nil {
			return nil, err
		}
		return func(ks *kstate) (uint64, error) { return ks.vars[slot], nil }, nil
	case kir.ArgRef:
		i, ok := cc.args[e.Name]
		if !ok {
			return nil, cc.errf("argument %q is not in the argument table", e.Name)
		}
		return func(ks *kstate) (uint64, error) { return ks.args[i], nil }, nil
	case kir.Bin:
		es, err := cc.exprs(e.X, e.Y)
		if err != nil {
			return nil, err
		}
		x, y, op, t := es[0], es[1], e.Op, kir.TypeOf(e)
		return func(ks *kstate) (uint64, error) {
			a, err := x(ks)
			if err != nil {
				return 0, err
			}
			b, err := y(ks)
			if err != nil {
				return 0, err
			}
			if t == kir.U32T {
				a, b = a&0xffffffff, b&0xffffffff
			}
			v, ok := binop(op, a, b)
			if !ok {
				return 0, ks.errf(kir.RuleMalformed, kir.NoCB, "division by zero in %v %s %v", a, op, b)
			}
			return mask(t, v), nil
		}, nil
	case kir.GetWritePtr:
		cb := e.CB
		return func(ks *kstate) (uint64, error) {
			c, err := ks.cb(cb, "get_write_ptr")
			if err != nil {
				return 0, err
			}
			return uint64(c.base) + uint64(c.wrPos*c.pageSize), nil
		}, nil
	case kir.GetReadPtr:
		cb := e.CB
		return func(ks *kstate) (uint64, error) {
			c, err := ks.cb(cb, "get_read_ptr")
			if err != nil {
				return 0, err
			}
			return uint64(c.base) + uint64(c.rdPos*c.pageSize), nil
		}, nil
	case kir.GetTileSize:
		cb := e.CB
		return func(ks *kstate) (uint64, error) {
			c, err := ks.cb(cb, "get_tile_size")
			if err != nil {
				return 0, err
			}
			return uint64(c.cfg.Format.TileBytes()), nil
		}, nil
	case kir.GetSemaphore:
		id, err := cc.expr(e.ID)
		if err != nil {
			return nil, err
		}
		return func(ks *kstate) (uint64, error) {
			v, err := id(ks)
			if err != nil {
				return 0, err
			}
			if ks.core.eth {
				// The address of Tensix semaphore v, for addressing a
				// worker through get_noc_addr.
				if v >= uint64(ks.r.t.MaxSemaphores) {
					return 0, ks.errf(kir.RuleSemaphore, kir.NoCB, "get_semaphore(%d): semaphore ids are 0..%d", v, ks.r.t.MaxSemaphores-1)
				}
				return uint64(ks.r.d.SemaphoreBase()) + v*SemaphoreStride, nil
			}
			if !ks.core.semIDs[int(v)] {
				return 0, ks.errf(kir.RuleSemaphore, kir.NoCB, "get_semaphore(%d): no semaphore %d is created on this core", v, v)
			}
			return uint64(ks.core.semBase) + v*SemaphoreStride, nil
		}, nil
	case kir.GetEthSemaphore:
		id, err := cc.expr(e.ID)
		if err != nil {
			return nil, err
		}
		return func(ks *kstate) (uint64, error) {
			v, err := id(ks)
			if err != nil {
				return 0, err
			}
			if v >= uint64(ks.r.t.MaxSemaphores) || ks.core.eth && !ks.core.semIDs[int(v)] {
				return 0, ks.errf(kir.RuleSemaphore, kir.NoCB, "get_semaphore<ProgrammableCoreType::ACTIVE_ETH>(%d): no semaphore %d is created on this ethernet core", v, v)
			}
			return uint64(ks.r.d.EthSemaphoreBase()) + v*SemaphoreStride, nil
		}, nil
	case kir.NoCAddr:
		es, err := cc.exprs(e.X, e.Y, e.Addr)
		if err != nil {
			return nil, err
		}
		return func(ks *kstate) (uint64, error) {
			v, err := evalAll(ks, es)
			if err != nil {
				return 0, err
			}
			return nocAddr(v[0], v[1], v[2]), nil
		}, nil
	case kir.DRAMBankAddr:
		es, err := cc.exprs(e.Bank, e.Offset)
		if err != nil {
			return nil, err
		}
		return func(ks *kstate) (uint64, error) {
			v, err := evalAll(ks, es)
			if err != nil {
				return 0, err
			}
			x, y, err := ks.r.t.DRAMNoC(int(v[0]))
			if err != nil || v[0] >= uint64(ks.r.t.DRAMBanks) {
				return 0, ks.errf(kir.RuleMemory, kir.NoCB, "get_noc_addr_from_bank_id(%d, %#x): bank %d does not exist (%d banks)", v[0], v[1], v[0], ks.r.t.DRAMBanks)
			}
			return nocAddr(uint64(x), uint64(y), v[1]), nil
		}, nil
	case kir.MulticastAddr:
		es, err := cc.exprs(e.X0, e.Y0, e.X1, e.Y1, e.Addr)
		if err != nil {
			return nil, err
		}
		return func(ks *kstate) (uint64, error) {
			v, err := evalAll(ks, es)
			if err != nil {
				return 0, err
			}
			return mcastAddr(v[0], v[1], v[2], v[3], v[4]), nil
		}, nil
	case kir.L1Read32:
		addr, err := cc.expr(e.Addr)
		if err != nil {
			return nil, err
		}
		return func(ks *kstate) (uint64, error) {
			a, err := addr(ks)
			if err != nil {
				return 0, err
			}
			if err := ks.checkL1(a, 4, "L1 load", false); err != nil {
				return 0, err
			}
			return uint64(ks.core.mem.read32(a)), nil
		}, nil
	case kir.MyNoCX:
		return func(ks *kstate) (uint64, error) { return uint64(ks.core.nx), nil }, nil
	case kir.MyNoCY:
		return func(ks *kstate) (uint64, error) { return uint64(ks.core.ny), nil }, nil
	case kir.NumDRAMBanks:
		n := uint64(cc.r.t.DRAMBanks)
		return func(*kstate) (uint64, error) { return n, nil }, nil
	}
	return nil, cc.errf("unknown expression %T", e)
}

func evalAll(ks *kstate, es []cexpr) ([]uint64, error) {
	out := make([]uint64, len(es))
	for i, e := range es {
		v, err := e(ks)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

func binop(op kir.BinOp, x, y uint64) (uint64, bool) {
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
	case kir.OpDiv:
		if y == 0 {
			return 0, false
		}
		return x / y, true
	case kir.OpMod:
		if y == 0 {
			return 0, false
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

// NoC address encoding used by the simulator: the local address in bits
// 0..35, the (end) x in 36..41, the (end) y in 42..47; a multicast address
// also has the start x in 48..53, the start y in 54..59 and bit 63 set.
const (
	nocLocalBits = 36
	nocLocalMask = 1<<nocLocalBits - 1
	nocMcastFlag = 1 << 63
)

func nocAddr(x, y, addr uint64) uint64 {
	return (y&63)<<42 | (x&63)<<36 | addr&nocLocalMask
}

func mcastAddr(x0, y0, x1, y1, addr uint64) uint64 {
	return nocMcastFlag | (y0&63)<<54 | (x0&63)<<48 | nocAddr(x1, y1, addr)
}

type nocTarget struct {
	mcast          bool
	x0, y0, x1, y1 int
	addr           uint64
}

func decodeNoC(a uint64) nocTarget {
	t := nocTarget{addr: a & nocLocalMask, x1: int(a >> 36 & 63), y1: int(a >> 42 & 63)}
	t.x0, t.y0 = t.x1, t.y1
	if a&nocMcastFlag != 0 {
		t.mcast = true
		t.x0, t.y0 = int(a>>48&63), int(a>>54&63)
	}
	return t
}

func (t nocTarget) String() string {
	if t.mcast {
		return fmt.Sprintf("multicast (%d,%d)-(%d,%d):%#x", t.x0, t.y0, t.x1, t.y1, t.addr)
	}
	return fmt.Sprintf("noc (%d,%d):%#x", t.x1, t.y1, t.addr)
}

// EvalBinOp evaluates x op y as the executor does (ok is false for a
// division or modulo by zero). Other interpreters of kernel IR (the timing
// model) use it so that expressions mean the same everywhere.
func EvalBinOp(op kir.BinOp, x, y uint64) (v uint64, ok bool) { return binop(op, x, y) }

// NoCAddress is the simulator's U64 NoC address of L1 (or DRAM bank) byte
// addr at NoC coordinates (x, y), as get_noc_addr returns it.
func NoCAddress(x, y, addr uint64) uint64 { return nocAddr(x, y, addr) }

// MulticastAddress is the simulator's U64 multicast address of addr on the
// NoC rectangle (x0, y0)-(x1, y1).
func MulticastAddress(x0, y0, x1, y1, addr uint64) uint64 { return mcastAddr(x0, y0, x1, y1, addr) }

// DecodeNoCAddress splits a simulator NoC address: for a unicast address
// x0 == x1 and y0 == y1.
func DecodeNoCAddress(a uint64) (mcast bool, x0, y0, x1, y1 int, addr uint64) {
	t := decodeNoC(a)
	return t.mcast, t.x0, t.y0, t.x1, t.y1, t.addr
}

// targetBuffer is the DRAM buffer a NoC address expression is built on:
// the one buffer-address argument its bank offset refers to (through
// variables with a single definition), or "" when that is not one buffer.
func (cc *compiler) targetBuffer(e kir.Expr) string {
	seen := map[string]bool{}
	var find func(e kir.Expr) kir.Expr
	find = func(e kir.Expr) kir.Expr { // the DRAMBankAddr behind e
		switch x := e.(type) {
		case kir.DRAMBankAddr:
			return x
		case kir.Var:
			if d := cc.defs[x.Name]; d != nil && !seen[x.Name] {
				seen[x.Name] = true
				return find(d)
			}
		case kir.Bin:
			if a := find(x.X); a != nil {
				return a
			}
			return find(x.Y)
		}
		return nil
	}
	da, ok := find(e).(kir.DRAMBankAddr)
	if !ok {
		return ""
	}
	names := map[string]bool{}
	var collect func(e kir.Expr)
	collect = func(e kir.Expr) {
		kir.InspectExpr(e, func(e kir.Expr) bool {
			switch x := e.(type) {
			case kir.ArgRef:
				if i, ok := cc.args[x.Name]; ok && cc.k.Args[i].Kind != kir.RuntimeArg && cc.k.Args[i].Value.Kind == kir.ValBufferAddr {
					names[cc.k.Args[i].Value.Buffer] = true
				}
			case kir.Var:
				if d := cc.defs[x.Name]; d != nil && !seen["o:"+x.Name] {
					seen["o:"+x.Name] = true
					collect(d)
				}
			}
			return true
		})
	}
	collect(da.Offset)
	if len(names) != 1 {
		return ""
	}
	for n := range names {
		return n
	}
	return ""
}
