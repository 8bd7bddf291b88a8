package interp

import (
	"strings"
	"testing"

	"github.com/tcc-dev/tcc/codegen/kir"
)

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
