package interp

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
)

// state is the test machine's per-thread state: a log of the calls it
// ran (name and operand values), an L1 of words and the waits.
type state struct {
	log   []string
	mem   map[uint64]uint64
	waits []Wait
}

// logger is a machine that logs every instruction.
type logger struct{}

func (logger) Instruction(_ *Compiler[*state], s kir.Stmt) (Op[*state], error) {
	name := kir.APIName(s)
	if name == "" {
		name = "l1_store"
	}
	return func(t *Thread[*state], v []uint64) (bool, error) {
		t.S.log = append(t.S.log, fmt.Sprint(name, v))
		if name == "l1_store" {
			t.S.mem[v[0]] = v[1]
		}
		return false, nil
	}, nil
}

func (logger) ReadL1(t *Thread[*state], addr uint64, _ string) uint64 { return t.S.mem[addr] }

func (logger) Block(t *Thread[*state], w Wait) { t.S.waits = append(t.S.waits, w) }

var bh = target.Blackhole()

func testConfig() *Config {
	return &Config{Target: bh, SemaphoreBase: 0x1000, EthSemaphoreBase: 0x2000, ScalarCycles: 1}
}

// testCore is worker (1,2) with CB c_0 of 4 pages of 2048 bytes at 0x10000
// and semaphore 3.
func testCore(t *testing.T) *Core {
	t.Helper()
	c := &Core{C: kir.Core{X: 1, Y: 2}, NX: 2, NY: 3, CBs: make([]*CB, bh.MaxCBs), SemBase: 0x1000}
	if _, f := c.AddCB(&kir.CB{Index: 0, PageSize: 2048, Pages: 4, Format: ir.BF16}, 0x10000); f != nil {
		t.Fatal(f)
	}
	c.AddSemaphore(3)
	return c
}

// runKernel compiles k and runs it on core until it finishes, blocks or
// fails (at most 10,000 steps); it returns the thread and the last status
// (0 when it finished).
func runKernel(t *testing.T, k *kir.Kernel, core *Core, mem map[uint64]uint64) (*Thread[*state], int) {
	t.Helper()
	code, err := Compile(k, testConfig(), Machine[*state](logger{}))
	if err != nil {
		t.Fatal(err)
	}
	args, err := ResolveArgs(k, core.C, nil)
	if err != nil {
		t.Fatal(err)
	}
	if mem == nil {
		mem = map[uint64]uint64{}
	}
	th := &Thread[*state]{}
	th.Start(code, core, args, &state{mem: mem})
	for i := 0; i < 10000 && !th.Done(); i++ {
		if st := th.Step(); st < 0 {
			return th, st
		}
	}
	return th, 0
}

func reader(body func(b *kir.Builder)) *kir.Kernel {
	k := &kir.Kernel{Name: "k", Role: kir.RoleReader}
	body(k.Builder())
	return k
}

// TestControlFlow: loops, branches and assignments run as C++ would; the
// kernel stores its result at L1 0x100.
func TestControlFlow(t *testing.T) {
	out := kir.C(0x100)
	for _, tc := range []struct {
		name string
		body func(b *kir.Builder)
		want uint64
	}{
		{"loop sum", func(b *kir.Builder) {
			s := b.Let("s", kir.C(0))
			b.For("i", kir.C(0), kir.C(10), func(i kir.Var) { b.Assign(s, kir.Add(s, i)) })
			b.L1Write32(out, s)
		}, 45},
		{"loop step", func(b *kir.Builder) {
			s := b.Let("s", kir.C(0))
			b.ForStep("i", kir.C(1), kir.C(10), kir.C(3), func(i kir.Var) { b.Assign(s, kir.Add(s, i)) }) // 1+4+7
			b.L1Write32(out, s)
		}, 12},
		{"empty loop", func(b *kir.Builder) {
			s := b.Let("s", kir.C(7))
			b.For("i", kir.C(5), kir.C(5), func(i kir.Var) { b.Assign(s, kir.C(0)) })
			b.L1Write32(out, s)
		}, 7},
		{"nested loops", func(b *kir.Builder) {
			s := b.Let("s", kir.C(0))
			b.For("i", kir.C(0), kir.C(3), func(i kir.Var) {
				b.For("j", kir.C(0), i, func(j kir.Var) { b.Assign(s, kir.Add(s, kir.C(1))) })
			})
			b.L1Write32(out, s)
		}, 3},
		{"if without else", func(b *kir.Builder) {
			s := b.Let("s", kir.C(1))
			b.If(kir.Lt(s, kir.C(2)), func() { b.Assign(s, kir.C(5)) })
			b.If(kir.Gt(s, kir.C(9)), func() { b.Assign(s, kir.C(0)) })
			b.L1Write32(out, s)
		}, 5},
		{"if else", func(b *kir.Builder) {
			s := b.Let("s", kir.C(0))
			b.For("i", kir.C(0), kir.C(6), func(i kir.Var) {
				b.IfElse(kir.Eq(kir.Mod(i, kir.C(2)), kir.C(0)), func() { b.Assign(s, kir.Add(s, kir.C(10))) }, func() { b.Assign(s, kir.Add(s, kir.C(1))) })
			})
			b.L1Write32(out, s)
		}, 33},
		{"u32 wraps", func(b *kir.Builder) {
			s := b.Let("s", kir.C(0xFFFFFFFF))
			b.Assign(s, kir.Add(s, kir.C(2)))
			b.L1Write32(out, s)
		}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			th, st := runKernel(t, reader(tc.body), testCore(t), nil)
			if st != 0 {
				t.Fatalf("status %d, error %v", st, th.Err)
			}
			if got := th.S.mem[0x100]; got != tc.want {
				t.Errorf("result %d, want %d", got, tc.want)
			}
		})
	}
}

// TestOneShape: an If ends its then-branch with a jump even without an
// else, and every control statement costs ScalarCycles: the timing
// model's predictions depend on the instruction count and the clock.
func TestOneShape(t *testing.T) {
	k := reader(func(b *kir.Builder) {
		s := b.Let("s", kir.C(0))                                                                         // 1 instruction, 1 cycle
		b.If(kir.Lt(s, kir.C(1)), func() { b.Assign(s, kir.C(1)) })                                       // test, assign, jump: 2 cycles
		b.For("i", kir.C(0), kir.C(3), func(i kir.Var) { b.L1Write32(kir.C(0x100), i) })                  // start, head, store, step: 4 heads
		b.IfElse(kir.Eq(s, kir.C(0)), func() { b.Assign(s, kir.C(2)) }, func() { b.Assign(s, kir.C(3)) }) // test, assign, jump, assign: 2 cycles
	})
	code, err := Compile(k, testConfig(), Machine[*state](logger{}))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(code.Instrs), 1+3+4+4; got != want {
		t.Errorf("%d instructions, want %d", got, want)
	}
	th, st := runKernel(t, k, testCore(t), nil)
	if st != 0 || th.Err != nil {
		t.Fatalf("status %d, error %v", st, th.Err)
	}
	if want := 1.0 + 2 + 4 + 2; th.Clock != want {
		t.Errorf("clock %v, want %v cycles of scalar code", th.Clock, want)
	}
}

// TestExpressions: every kind of expression evaluates as on the card (the
// NoC addresses in this package's encoding), and the ones that cannot be
// evaluated fault with their rule.
func TestExpressions(t *testing.T) {
	dx, dy, _ := bh.DRAMNoC(1)
	for _, tc := range []struct {
		name string
		e    kir.Expr
		want uint64
		rule kir.Rule // 0: no fault
	}{
		{"add", kir.Add(kir.C(3), kir.C(4)), 7, 0},
		{"sub wraps", kir.Sub(kir.C(3), kir.C(4)), 0xFFFFFFFF, 0},
		{"mul", kir.Mul(kir.C(6), kir.C(7)), 42, 0},
		{"div", kir.Div(kir.C(7), kir.C(2)), 3, 0},
		{"shr", kir.Shr(kir.C(0x80), kir.C(3)), 0x10, 0},
		{"le", kir.Le(kir.C(3), kir.C(3)), 1, 0},
		{"lor", kir.Bin{Op: kir.OpLOr, X: kir.C(0), Y: kir.C(5)}, 1, 0},
		{"div by zero", kir.Div(kir.C(1), kir.C(0)), 0, kir.RuleMalformed},
		{"write ptr", kir.GetWritePtr{CB: 0}, 0x10000, 0},
		{"tile size", kir.GetTileSize{CB: 0}, 2048, 0},
		{"no CB", kir.GetReadPtr{CB: 5}, 0, kir.RuleCBCount},
		{"semaphore", kir.GetSemaphore{ID: kir.C(3)}, 0x1000 + 3*SemaphoreStride, 0},
		{"no semaphore", kir.GetSemaphore{ID: kir.C(2)}, 0, kir.RuleSemaphore},
		{"eth semaphore on a worker", kir.GetEthSemaphore{ID: kir.C(2)}, 0x2000 + 2*SemaphoreStride, 0},
		{"noc addr", kir.NoCAddr{X: kir.C(2), Y: kir.C(3), Addr: kir.C(0x40)}, NoCAddress(2, 3, 0x40), 0},
		{"bank addr", kir.DRAMBankAddr{Bank: kir.C(1), Offset: kir.C(0x80)}, NoCAddress(uint64(dx), uint64(dy), 0x80), 0},
		{"no bank", kir.DRAMBankAddr{Bank: kir.Ci(bh.DRAMBanks), Offset: kir.C(0)}, 0, kir.RuleMemory},
		{"mcast addr", kir.MulticastAddr{X0: kir.C(1), Y0: kir.C(2), X1: kir.C(3), Y1: kir.C(4), Addr: kir.C(8)}, MulticastAddress(1, 2, 3, 4, 8), 0},
		{"u64 plus", kir.Add(kir.NoCAddr{X: kir.C(2), Y: kir.C(3), Addr: kir.C(0)}, kir.C(0x10)), NoCAddress(2, 3, 0x10), 0},
		{"l1 read", kir.L1Read32{Addr: kir.C(0x200)}, 99, 0},
		{"my noc", kir.Add(kir.Mul(kir.MyNoCX{}, kir.C(100)), kir.MyNoCY{}), 203, 0},
		{"banks", kir.NumDRAMBanks{}, uint64(bh.DRAMBanks), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := reader(func(b *kir.Builder) {
				v := b.Let("v", tc.e)
				b.Emit(kir.NoCSemaphoreInc{Addr: v, Incr: kir.C(0)}) // logs v
			})
			th, st := runKernel(t, k, testCore(t), map[uint64]uint64{0x200: 99})
			if tc.rule != 0 {
				var f *Fault
				if st != Failed || !errors.As(th.Err, &f) || f.Rule != tc.rule {
					t.Fatalf("status %d, error %v; want a fault of rule %s", st, th.Err, tc.rule)
				}
				return
			}
			if st != 0 {
				t.Fatalf("status %d, error %v", st, th.Err)
			}
			if want := fmt.Sprint("noc_semaphore_inc", []uint64{tc.want, 0}); th.S.log[0] != want {
				t.Errorf("got %s, want %s", th.S.log[0], want)
			}
		})
	}
}

// TestCBBooks: the CB calls keep the ring's books, block when the ring is
// full or empty, and refuse what a card's CB would not do.
func TestCBBooks(t *testing.T) {
	type call struct {
		name string
		n    uint64
	}
	for _, tc := range []struct {
		name     string
		calls    []call
		straddle bool
		// want is the outcome of the last call: "ok", "blocked" or the
		// rule of its fault; books are WrPos, RdPos, Filled, Reserved, Waited after it.
		want  string
		books [5]int
	}{
		{"reserve push wait pop", []call{{"cb_reserve_back", 2}, {"cb_push_back", 2}, {"cb_wait_front", 2}, {"cb_pop_front", 1}}, false, "ok", [5]int{2, 1, 1, 0, 1}},
		{"full ring blocks", []call{{"cb_reserve_back", 4}, {"cb_push_back", 4}, {"cb_reserve_back", 1}}, false, "blocked", [5]int{0, 0, 4, 0, 0}},
		{"empty ring blocks", []call{{"cb_wait_front", 1}}, false, "blocked", [5]int{}},
		{"count", []call{{"cb_reserve_back", 5}}, false, "cb-flow", [5]int{}},
		{"push unreserved", []call{{"cb_reserve_back", 1}, {"cb_push_back", 2}}, false, "cb-flow", [5]int{0, 0, 0, 1, 0}},
		{"pop unwaited", []call{{"cb_reserve_back", 1}, {"cb_push_back", 1}, {"cb_pop_front", 1}}, false, "cb-flow", [5]int{1, 0, 1, 0, 0}},
		{"straddle", []call{{"cb_reserve_back", 3}, {"cb_push_back", 3}, {"cb_wait_front", 3}, {"cb_pop_front", 3}, {"cb_reserve_back", 2}}, false, "cb-flow", [5]int{3, 3, 0, 0, 0}},
		{"straddle allowed", []call{{"cb_reserve_back", 3}, {"cb_push_back", 3}, {"cb_wait_front", 3}, {"cb_pop_front", 3}, {"cb_reserve_back", 2}, {"cb_push_back", 2}}, true, "ok", [5]int{1, 3, 2, 0, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			core := testCore(t)
			cb := core.CB(0)
			var outcome string
			for _, c := range tc.calls {
				wait, f := cbCalls[c.name].do(cb, c.n, tc.straddle)
				switch {
				case f != nil:
					outcome = f.Rule.String()
				case wait:
					outcome = "blocked"
				default:
					outcome = "ok"
				}
				if outcome != "ok" {
					break
				}
			}
			got := [5]int{cb.WrPos, cb.RdPos, cb.Filled, cb.Reserved, cb.Waited}
			if outcome != tc.want || got != tc.books {
				t.Errorf("outcome %s, books %v; want %s, %v", outcome, got, tc.want, tc.books)
			}
		})
	}
}

// TestCBCallBlocks: a blocked CB call tells the machine what it waits for
// and runs again, from the same instruction, when resumed.
func TestCBCallBlocks(t *testing.T) {
	k := reader(func(b *kir.Builder) {
		b.CBWaitFront(0, kir.C(2))
		b.CBPopFront(0, kir.C(2))
	})
	core := testCore(t)
	th, st := runKernel(t, k, core, nil)
	want := []Wait{{Kind: WaitFilled, Call: "cb_wait_front", CB: 0, Want: 2}}
	if st != Blocked || th.PC != 0 || !cmp.Equal(th.S.waits, want) {
		t.Fatalf("status %d at %d, waits %+v; want blocked at 0 on %+v", st, th.PC, th.S.waits, want)
	}
	if r := th.S.waits[0].Reason(); r != "waits for 2 pages, 0 available" {
		t.Errorf("reason %q", r)
	}
	cb := core.CB(0)
	cb.Filled, cb.WrPos = 2, 2 // a producer pushed two pages
	for !th.Done() {
		if st := th.Step(); st < 0 {
			t.Fatalf("status %d after the push: %v", st, th.Err)
		}
	}
	if want := []string{"cb_wait_front[2]", "cb_pop_front[2]"}; !cmp.Equal(th.S.log, want) {
		t.Errorf("ran %v, want %v", th.S.log, want)
	}
}

// TestSemaphoreWait: the waits read the word through the machine and
// block until it holds; the plain forms refuse an ethernet core.
func TestSemaphoreWait(t *testing.T) {
	sem := kir.GetSemaphore{ID: kir.C(3)}
	addr := uint64(0x1000 + 3*SemaphoreStride)
	for _, tc := range []struct {
		name string
		s    kir.Stmt
		word uint64
		eth  bool
		want string // "ok", "blocked" or a fault's rule
	}{
		{"equal", kir.NoCSemaphoreWait{Addr: sem, Value: kir.C(2)}, 2, false, "ok"},
		{"not equal", kir.NoCSemaphoreWait{Addr: sem, Value: kir.C(2)}, 3, false, "blocked"},
		{"at least", kir.NoCSemaphoreWaitMin{Addr: sem, Value: kir.C(2)}, 3, false, "ok"},
		{"below", kir.NoCSemaphoreWaitMin{Addr: sem, Value: kir.C(2)}, 1, false, "blocked"},
		{"plain on eth", kir.NoCSemaphoreWait{Addr: kir.C(0x2000), Value: kir.C(2)}, 2, true, "eth-wait"},
		{"eth form on eth", kir.EthNoCSemaphoreWait{Addr: kir.C(0x2000), Value: kir.C(2)}, 2, true, "ok"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			core, a := testCore(t), addr
			if tc.eth {
				core.Eth, a = true, 0x2000
			}
			k := reader(func(b *kir.Builder) { b.Emit(tc.s) })
			th, st := runKernel(t, k, core, map[uint64]uint64{a: tc.word})
			got := "ok"
			var f *Fault
			switch {
			case errors.As(th.Err, &f):
				got = f.Rule.String()
			case st == Blocked:
				got = "blocked"
				if w := th.S.waits[0]; w.Kind != WaitWord || w.Addr != a || w.Have != tc.word || core.SemaphoreAt(w.Addr) != 3 {
					t.Errorf("wait %+v", w)
				}
			}
			if got != tc.want {
				t.Errorf("%s, want %s", got, tc.want)
			}
		})
	}
}

// TestCompileErrors: kernels the core cannot follow are refused when they
// compile, as is a machine without an op for an instruction.
func TestCompileErrors(t *testing.T) {
	undeclared := kir.Var{Name: "x"}
	for _, tc := range []struct {
		name string
		k    *kir.Kernel
		m    Machine[*state]
		want string
	}{
		{"undeclared", reader(func(b *kir.Builder) { b.Assign(undeclared, kir.C(1)) }), logger{}, "used before its declaration"},
		{"retyped", reader(func(b *kir.Builder) {
			b.Let("x", kir.C(1))
			b.Assign(kir.Var{Name: "x", Type: kir.U64T}, kir.C(1))
		}), logger{}, "used as uint64_t, declared uint32_t"},
		{"unknown arg", reader(func(b *kir.Builder) { b.Let("x", kir.ArgRef{Name: "a"}) }), logger{}, `argument "a" is not in the argument table`},
		{"compute call in a reader", reader(func(b *kir.Builder) { b.TileRegsAcquire() }), logger{}, "is a compute call in a reader kernel"},
		{"missing operand", reader(func(b *kir.Builder) { b.Emit(kir.Let{Var: kir.Var{Name: "x"}}) }), logger{}, "missing operand"},
		{"machine without op", reader(func(b *kir.Builder) { b.NoCAsyncReadBarrier() }), silent{}, "compiled noc_async_read_barrier to nothing"},
		{"core's books without op", reader(func(b *kir.Builder) { b.CBPopFront(0, kir.C(1)) }), silent{}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Compile(tc.k, testConfig(), tc.m)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// silent is a machine with no op for any instruction.
type silent struct{ logger }

func (silent) Instruction(*Compiler[*state], kir.Stmt) (Op[*state], error) { return nil, nil }

// TestResolveArgs: argument values by row, a missing runtime value named.
func TestResolveArgs(t *testing.T) {
	k := &kir.Kernel{Name: "k"}
	k.CompileArg("n", 7)
	k.RuntimeArg("start")
	c := kir.Core{X: 1, Y: 1}
	k.SetRuntimeArgs(c, kir.U32(5))
	got, err := ResolveArgs(k, c, nil)
	if err != nil || !cmp.Equal(got, []uint64{7, 5}) {
		t.Errorf("args %v, %v; want [7 5]", got, err)
	}
	_, err = ResolveArgs(k, kir.Core{X: 2, Y: 2}, nil)
	var ae *ArgError
	if !errors.As(err, &ae) || ae.Arg.Name != "start" || !strings.Contains(err.Error(), `no value for runtime arg "start" (index 0)`) {
		t.Errorf("error %v, want the missing runtime arg named", err)
	}
}

func TestNoCEncoding(t *testing.T) {
	a := NoCAddress(13, 11, 0x12345)
	if got := DecodeNoC(a); got != (NoCTarget{X0: 13, Y0: 11, X1: 13, Y1: 11, Addr: 0x12345}) {
		t.Errorf("decode(unicast) = %+v", got)
	}
	m := MulticastAddress(1, 2, 3, 4, 0x40)
	if got := DecodeNoC(m); got != (NoCTarget{Mcast: true, X0: 1, Y0: 2, X1: 3, Y1: 4, Addr: 0x40}) {
		t.Errorf("decode(multicast) = %+v", got)
	}
	if got := DecodeNoC(a + 0x100); got.Addr != 0x12445 {
		t.Errorf("address arithmetic on a NoC address: local %#x, want 0x12445", got.Addr)
	}
}
