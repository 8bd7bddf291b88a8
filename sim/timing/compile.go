package timing

import (
	"fmt"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/sim/kexec"
)

func decode(a uint64) (mcast bool, x0, y0, x1, y1 int, addr uint64) { return kexec.DecodeNoCAddress(a) }

type compiler struct {
	m     *machine
	k     *kir.Kernel
	code  []instr
	slots map[string]int
	args  map[string]int
	// labels[i] names what code[i] does for the busy profile: the call's
	// tt-metal name, or "scalar" for control statements; label is the one
	// emit gives the next instructions.
	labels []string
	label  string
}

// compileKernel flattens k's body into instructions (loops and branches
// become jumps), as sim/kexec does, so the timed run follows exactly the
// statements the kernel prints.
func compileKernel(m *machine, k *kir.Kernel) ([]instr, []string, int, error) {
	cc := &compiler{m: m, k: k, slots: map[string]int{}, args: map[string]int{}, label: "scalar"}
	for i, a := range k.Args {
		cc.args[a.Name] = i
	}
	if err := cc.block(k.Body); err != nil {
		return nil, nil, 0, fmt.Errorf("program %q: kernel %s: %w", m.prog.Name, k.Name, err)
	}
	return cc.code, cc.labels, len(cc.slots), nil
}

func (cc *compiler) emit(i instr) int {
	cc.code = append(cc.code, i)
	cc.labels = append(cc.labels, cc.label)
	return len(cc.code) - 1
}

func (cc *compiler) block(body []kir.Stmt) error {
	for _, s := range body {
		if err := cc.stmt(s); err != nil {
			return err
		}
	}
	return nil
}

func (cc *compiler) slot(v kir.Var, declare bool) (int, error) {
	if s, ok := cc.slots[v.Name]; ok {
		return s, nil
	}
	if !declare {
		return 0, fmt.Errorf("variable %q is used before its declaration", v.Name)
	}
	cc.slots[v.Name] = len(cc.slots)
	return cc.slots[v.Name], nil
}

func maskOf(t kir.Type) uint64 {
	if t == kir.U32T {
		return 0xffffffff
	}
	return ^uint64(0)
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

func (cc *compiler) expr(e kir.Expr) (cexpr, error) {
	switch e := e.(type) {
	case kir.Const:
		v := uint64(e.V)
		return func(*thread) uint64 { return v }, nil
	case kir.Var:
		s, err := cc.slot(e, false)
		if err != nil {
			return nil, err
		}
		return func(th *thread) uint64 { return th.vars[s] }, nil
	case kir.ArgRef:
		i, ok := cc.args[e.Name]
		if !ok {
			return nil, fmt.Errorf("argument %q is not in the kernel's table", e.Name)
		}
		return func(th *thread) uint64 { return th.args[i] }, nil
	case kir.Bin:
		x, err := cc.expr(e.X)
		if err != nil {
			return nil, err
		}
		y, err := cc.expr(e.Y)
		if err != nil {
			return nil, err
		}
		mask := maskOf(kir.TypeOf(e))
		op := e.Op
		switch op { // the hot operators without the generic switch
		case kir.OpAdd:
			return func(th *thread) uint64 { return (x(th) + y(th)) & mask }, nil
		case kir.OpMul:
			return func(th *thread) uint64 { return (x(th) * y(th)) & mask }, nil
		case kir.OpLt:
			return func(th *thread) uint64 {
				if x(th) < y(th) {
					return 1
				}
				return 0
			}, nil
		}
		return func(th *thread) uint64 {
			v, ok := kexec.EvalBinOp(op, x(th), y(th))
			if !ok {
				th.m.failf(th, "division by zero")
			}
			return v & mask
		}, nil
	case kir.GetWritePtr:
		a := uint64(cbBase + cbStride*e.CB)
		return func(*thread) uint64 { return a }, nil
	case kir.GetReadPtr:
		a := uint64(cbBase + cbStride*e.CB)
		return func(*thread) uint64 { return a }, nil
	case kir.GetTileSize:
		idx := e.CB
		return func(th *thread) uint64 {
			q := th.cb(idx, "get_tile_size")
			if q == nil {
				return 0
			}
			return uint64(q.cfg.Format.TileBytes())
		}, nil
	case kir.GetSemaphore:
		id, err := cc.expr(e.ID)
		if err != nil {
			return nil, err
		}
		return func(th *thread) uint64 { return semBase + semStride*id(th) }, nil
	case kir.GetEthSemaphore:
		id, err := cc.expr(e.ID)
		if err != nil {
			return nil, err
		}
		return func(th *thread) uint64 { return semBase + semStride*id(th) }, nil
	case kir.NoCAddr:
		es, err := cc.exprs(e.X, e.Y, e.Addr)
		if err != nil {
			return nil, err
		}
		return func(th *thread) uint64 { return kexec.NoCAddress(es[0](th), es[1](th), es[2](th)) }, nil
	case kir.DRAMBankAddr:
		es, err := cc.exprs(e.Bank, e.Offset)
		if err != nil {
			return nil, err
		}
		return func(th *thread) uint64 {
			b := es[0](th)
			x, y, err := th.m.t.DRAMNoC(int(b))
			if err != nil || b >= uint64(th.m.t.DRAMBanks) {
				th.m.failf(th, "DRAM bank %d does not exist (%d banks)", b, th.m.t.DRAMBanks)
			}
			return kexec.NoCAddress(uint64(x), uint64(y), es[1](th))
		}, nil
	case kir.MulticastAddr:
		es, err := cc.exprs(e.X0, e.Y0, e.X1, e.Y1, e.Addr)
		if err != nil {
			return nil, err
		}
		return func(th *thread) uint64 {
			return kexec.MulticastAddress(es[0](th), es[1](th), es[2](th), es[3](th), es[4](th))
		}, nil
	case kir.L1Read32:
		addr, err := cc.expr(e.Addr)
		if err != nil {
			return nil, err
		}
		return func(th *thread) uint64 {
			if w, ok := th.core.mem[uint32(addr(th))]; ok {
				return uint64(w.v)
			}
			return 0
		}, nil
	case kir.MyNoCX:
		return func(th *thread) uint64 { return uint64(th.core.nx) }, nil
	case kir.MyNoCY:
		return func(th *thread) uint64 { return uint64(th.core.ny) }, nil
	case kir.NumDRAMBanks:
		n := uint64(cc.m.t.DRAMBanks)
		return func(*thread) uint64 { return n }, nil
	}
	return nil, fmt.Errorf("unknown expression %T", e)
}

// jump is an instruction whose target is patched after its block compiles.
type jump struct{ to int }

func (cc *compiler) stmt(s kir.Stmt) error {
	sc := cc.m.p.ScalarCycles
	switch s := s.(type) {
	case kir.Comment:
		return nil
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
		mask := maskOf(v.Type)
		cc.emit(func(th *thread) int {
			th.vars[slot] = val(th) & mask
			th.t += sc
			return th.pc + 1
		})
		return nil
	case kir.For:
		start, err := cc.expr(s.Start)
		if err != nil {
			return err
		}
		slot, err := cc.slot(s.Var, true)
		if err != nil {
			return err
		}
		end, err := cc.expr(s.End)
		if err != nil {
			return err
		}
		step := func(*thread) uint64 { return 1 }
		if s.Step != nil {
			if step, err = cc.expr(s.Step); err != nil {
				return err
			}
		}
		mask := maskOf(s.Var.Type)
		cc.emit(func(th *thread) int { th.vars[slot] = start(th) & mask; return th.pc + 1 })
		exit := &jump{}
		head := cc.emit(func(th *thread) int {
			th.t += sc
			if th.vars[slot] < end(th) {
				return th.pc + 1
			}
			return exit.to
		})
		if err := cc.block(s.Body); err != nil {
			return err
		}
		cc.emit(func(th *thread) int { th.vars[slot] = (th.vars[slot] + step(th)) & mask; return head })
		exit.to = len(cc.code)
		return nil
	case kir.If:
		cond, err := cc.expr(s.Cond)
		if err != nil {
			return err
		}
		elseAt, endAt := &jump{}, &jump{}
		cc.emit(func(th *thread) int {
			th.t += sc
			if cond(th) != 0 {
				return th.pc + 1
			}
			return elseAt.to
		})
		if err := cc.block(s.Then); err != nil {
			return err
		}
		cc.emit(func(th *thread) int { return endAt.to })
		elseAt.to = len(cc.code)
		if err := cc.block(s.Else); err != nil {
			return err
		}
		endAt.to = len(cc.code)
		return nil
	}
	in, err := cc.call(s)
	if err != nil {
		return err
	}
	cc.label = kir.APIName(s)
	if cc.label == "" {
		cc.label = "l1_store" // L1Write32, a volatile store
	}
	cc.emit(in)
	cc.label = "scalar"
	return nil
}
