package kir

import "math/bits"

// staticEnv evaluates expressions of one kernel without running it: exact
// values where every input is known, and the residue modulo a power of two
// (at most 64) where only alignment is known. Buffer addresses are unknown
// but 64-byte aligned (the allocator's contract); CB and semaphore
// addresses are 16-byte aligned; loop variables and reassigned variables
// are unknown.
type staticEnv struct {
	k        *Kernel
	lets     map[string]Expr // variables with one Let and no Assign
	argExact map[string]uint64
	argRes   map[string]residue
	memoRes  map[string]residue
	busy     map[string]bool
}

// residue says v ≡ r (mod m); m is a power of two in 1..64 (m == 1: nothing known).
type residue struct{ r, m uint64 }

const maxMod = 64

var unknownRes = residue{0, 1}

func exactRes(v uint64) residue { return residue{v % maxMod, maxMod} }

func meetRes(a, b residue) residue {
	m := min(a.m, b.m)
	for m > 1 && a.r%m != b.r%m {
		m /= 2
	}
	return residue{a.r % m, m}
}

func newStaticEnv(k *Kernel) *staticEnv {
	env := &staticEnv{k: k, lets: map[string]Expr{}, argExact: make(map[string]uint64, len(k.Args)), argRes: make(map[string]residue, len(k.Args)),
		memoRes: map[string]residue{}, busy: map[string]bool{}}
	lets := map[string]int{}
	assigned := map[string]bool{}
	letVal := map[string]Expr{}
	Inspect(k.Body, func(s Stmt) bool {
		switch s := s.(type) {
		case Let:
			lets[s.Var.Name]++
			letVal[s.Var.Name] = s.Value
		case Assign:
			assigned[s.Var.Name] = true
		case For:
			assigned[s.Var.Name] = true
		}
		return true
	})
	for n, c := range lets {
		if c == 1 && !assigned[n] {
			env.lets[n] = letVal[n]
		}
	}
	for _, a := range k.Args {
		var acc argAcc
		if a.Kind == RuntimeArg {
			for _, ca := range k.RuntimeValues {
				if a.Index < len(ca.Values) {
					acc.add(ca.Values[a.Index])
				}
			}
		} else {
			acc.add(a.Value)
		}
		if acc.n == 0 {
			continue
		}
		if acc.exact && acc.same {
			env.argExact[a.Name] = uint64(acc.first.Const)
		}
		env.argRes[a.Name] = acc.res
	}
	return env
}

// argAcc gathers what is statically known of one argument over its
// values (one per core for a runtime argument).
type argAcc struct {
	n           int
	first       ArgValue
	exact, same bool // every value a constant; every constant the first's
	res         residue
}

func (acc *argAcc) add(v ArgValue) {
	if acc.n == 0 {
		acc.first, acc.exact, acc.same, acc.res = v, true, true, valueRes(v)
	}
	acc.n++
	if v.Kind != ValConst {
		acc.exact = false
	} else if v.Const != acc.first.Const {
		acc.same = false
	}
	acc.res = meetRes(acc.res, valueRes(v))
}

func valueRes(v ArgValue) residue {
	switch v.Kind {
	case ValConst:
		return exactRes(uint64(v.Const))
	case ValBufferAddr:
		return exactRes(uint64(v.Const))
	}
	return unknownRes
}

func mask(t Type, v uint64) uint64 {
	if t == U32T {
		return v & 0xffffffff
	}
	return v
}

// exact returns the value of e when it is statically known.
func (env *staticEnv) exact(e Expr) (uint64, bool) {
	switch e := e.(type) {
	case Const:
		return uint64(e.V), true
	case ArgRef:
		v, ok := env.argExact[e.Name]
		return v, ok
	case Var:
		val, ok := env.lets[e.Name]
		if !ok || env.busy[e.Name] {
			return 0, false
		}
		env.busy[e.Name] = true
		defer delete(env.busy, e.Name)
		v, ok := env.exact(val)
		return mask(e.Type, v), ok
	case Bin:
		x, ok1 := env.exact(e.X)
		y, ok2 := env.exact(e.Y)
		if !ok1 || !ok2 {
			return 0, false
		}
		v, ok := evalBin(e.Op, x, y)
		return mask(TypeOf(e), v), ok
	}
	return 0, false
}

// evalBin applies op to x and y with C++ unsigned semantics; ok is false on
// division by zero.
func evalBin(op BinOp, x, y uint64) (uint64, bool) {
	b := func(c bool) uint64 {
		if c {
			return 1
		}
		return 0
	}
	switch op {
	case OpAdd:
		return x + y, true
	case OpSub:
		return x - y, true
	case OpMul:
		return x * y, true
	case OpDiv:
		if y == 0 {
			return 0, false
		}
		return x / y, true
	case OpMod:
		if y == 0 {
			return 0, false
		}
		return x % y, true
	case OpShl:
		return x << (y & 63), true
	case OpShr:
		return x >> (y & 63), true
	case OpAnd:
		return x & y, true
	case OpOr:
		return x | y, true
	case OpXor:
		return x ^ y, true
	case OpLt:
		return b(x < y), true
	case OpLe:
		return b(x <= y), true
	case OpGt:
		return b(x > y), true
	case OpGe:
		return b(x >= y), true
	case OpEq:
		return b(x == y), true
	case OpNe:
		return b(x != y), true
	case OpLAnd:
		return b(x != 0 && y != 0), true
	case OpLOr:
		return b(x != 0 || y != 0), true
	}
	return 0, false
}

// tz is the number of known trailing zero bits of a residue (64 means the
// value is a multiple of the modulus and of every smaller power of two).
func tz(a residue) uint64 {
	if a.r%a.m == 0 {
		return uint64(bits.TrailingZeros64(a.m))
	}
	return uint64(bits.TrailingZeros64(a.r))
}

// res returns what is known about e modulo 64.
func (env *staticEnv) res(e Expr) residue {
	if v, ok := env.exact(e); ok {
		return exactRes(v)
	}
	switch e := e.(type) {
	case ArgRef:
		if r, ok := env.argRes[e.Name]; ok {
			return r
		}
	case Var:
		if r, ok := env.memoRes[e.Name]; ok {
			return r
		}
		val, ok := env.lets[e.Name]
		if !ok || env.busy[e.Name] {
			return unknownRes
		}
		env.busy[e.Name] = true
		r := env.res(val)
		delete(env.busy, e.Name)
		env.memoRes[e.Name] = r
		return r
	case GetWritePtr, GetReadPtr, GetSemaphore, GetEthSemaphore:
		return residue{0, 16}
	case NoCAddr:
		return env.res(e.Addr)
	case DRAMBankAddr:
		return env.res(e.Offset)
	case MulticastAddr:
		return env.res(e.Addr)
	case Bin:
		x, y := env.res(e.X), env.res(e.Y)
		switch e.Op {
		case OpAdd:
			m := min(x.m, y.m)
			return residue{(x.r + y.r) % m, m}
		case OpSub:
			m := min(x.m, y.m)
			return residue{(x.r - y.r) % m, m}
		case OpMul:
			// x = rx + A*mx, y = ry + B*my: the unknown terms are multiples
			// of 2^tz(rx)*my, 2^tz(ry)*mx and mx*my.
			m := uint64(maxMod)
			if x.r%x.m != 0 {
				m = min(m, y.m<<min(tz(x), 6))
			}
			if y.r%y.m != 0 {
				m = min(m, x.m<<min(tz(y), 6))
			}
			m = min(m, x.m*y.m)
			return residue{(x.r * y.r) % m, m}
		case OpShl:
			if s, ok := env.exact(e.Y); ok && s < 64 {
				m := min(x.m<<s, maxMod)
				if s >= 6 {
					m = maxMod
				}
				return residue{(x.r << s) % m, m}
			}
		}
	}
	return unknownRes
}

// isDRAM reports whether e is (statically traceable to) a DRAM bank NoC address.
func (env *staticEnv) isDRAM(e Expr) bool {
	switch e := e.(type) {
	case DRAMBankAddr:
		return true
	case Var:
		val, ok := env.lets[e.Name]
		if !ok || env.busy[e.Name] {
			return false
		}
		env.busy[e.Name] = true
		defer delete(env.busy, e.Name)
		return env.isDRAM(val)
	case Bin:
		return (e.Op == OpAdd || e.Op == OpSub) && env.isDRAM(e.X) || e.Op == OpAdd && env.isDRAM(e.Y)
	}
	return false
}
