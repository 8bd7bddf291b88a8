package sfpu

import (
	"fmt"
	"math"
	"regexp"
	"strings"
	"testing"

	"github.com/tcc-dev/tcc/ir/numerics"
)

// Every entry sits at its Op's index, under a unique name that ByName and
// String give back, with the calls and semantics every layer reads.
func TestTableEntries(t *testing.T) {
	seen := map[string]bool{}
	for i, s := range Table {
		t.Run(s.Name, func(t *testing.T) {
			if int(s.Op) != i {
				t.Errorf("Table[%d] is op %d: the table must be indexed by Op", i, s.Op)
			}
			if seen[s.Name] {
				t.Errorf("name %q appears twice", s.Name)
			}
			seen[s.Name] = true
			if op, ok := ByName(s.Name); !ok || op != s.Op {
				t.Errorf("ByName(%q) = %v, %v", s.Name, op, ok)
			}
			if s.Op.String() != s.Name {
				t.Errorf("String() = %q", s.Op.String())
			}
			if s.Call == "" || s.Init == "" || s.Header == "" || s.Decl == "" || s.Cycles <= 0 || s.Eval == nil {
				t.Errorf("incomplete entry: %+v", s)
			}
			if s.Param && s.Binary {
				t.Error("an op takes a scalar or a second tile, not both")
			}
		})
	}
	if len(Ops) != len(Table) {
		t.Errorf("Ops has %d ops, Table %d", len(Ops), len(Table))
	}
}

// Eval is the exact function of each op.
func TestEval(t *testing.T) {
	for _, c := range []struct {
		op      Op
		x, p    float32
		want    float32
		comment string
	}{
		{Exp, 0, 0, 1, ""},
		{Exp, -200, 0, 0, "underflows to 0"},
		{Log, 1, 0, 0, ""},
		{Sigmoid, 0, 0, 0.5, ""},
		{SiLU, 0, 0, 0, ""},
		{SigmoidBF16, 0, 0, 0.5, "the exact function, as sigmoid"},
		{SiLUBF16, 0, 0, 0, "the exact function, as silu"},
		{Rsqrt, 4, 0, 0.5, ""},
		{Sqrt, 9, 0, 3, ""},
		{Recip, 4, 0, 0.25, ""},
		{Square, -3, 0, 9, ""},
		{Negative, 2, 0, -2, ""},
		{Abs, -2, 0, 2, ""},
		{Relu, -1, 0, 0, ""},
		{Relu, 1.5, 0, 1.5, ""},
		{Softplus, 0, 0, float32(math.Ln2), "log(1 + e^0)"},
		{Softplus, 30, 0, 30, "past the threshold: x"},
		{AddScalar, 1, 2, 3, ""},
		{MulScalar, 3, 2, 6, ""},
		{AddBinary, 1, 2, 3, "p is DEST[src]"},
		{MulBinary, 3, 2, 6, "p is DEST[src]"},
		{MinBinary, 3, -2, -2, "p is DEST[src]"},
	} {
		t.Run(c.op.String(), func(t *testing.T) {
			if got := c.op.Spec().Eval(c.x, c.p); got != c.want {
				t.Errorf("%s(%g, %g) = %g, want %g %s", c.op, c.x, c.p, got, c.want, c.comment)
			}
		})
	}
}

// Softplus's printed constants are the parameters its Eval computes with:
// beta, 1/beta and the threshold past which it returns x.
func TestSoftplusConsts(t *testing.T) {
	s := Softplus.Spec()
	want := []Const{{"beta", softplusBeta}, {"beta_reciprocal", 1 / softplusBeta}, {"threshold", softplusThreshold}}
	if len(s.Consts) != len(want) {
		t.Fatalf("Consts = %+v, want %+v", s.Consts, want)
	}
	for i, c := range want {
		if s.Consts[i] != c {
			t.Errorf("Consts[%d] = %+v, want %+v", i, s.Consts[i], c)
		}
	}
	for _, x := range []float32{-3, 0.5, 19, 25} {
		if got, want := s.Eval(x, 0), numerics.Softplus(x, softplusBeta, softplusThreshold); got != want {
			t.Errorf("softplus(%g) = %g, want %g", x, got, want)
		}
	}
}

// InitGroup, HasParam and IsBinary, inside and outside the table.
func TestOpProperties(t *testing.T) {
	for _, c := range []struct {
		op            Op
		group         Op
		param, binary bool
		name          string
	}{
		{Exp, Exp, false, false, "exp"},
		{AddScalar, AddScalar, true, false, "add_scalar"},
		{MulScalar, AddScalar, true, false, "mul_scalar"},
		{AddBinary, AddBinary, false, true, "add_binary"},
		{MulBinary, MulBinary, false, true, "mul_binary"},
		{Op(200), Op(200), false, false, "sfpu?"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.op.String() != c.name {
				t.Errorf("String() = %q, want %q", c.op.String(), c.name)
			}
			if c.op.HasParam() != c.param || c.op.IsBinary() != c.binary {
				t.Errorf("HasParam %v IsBinary %v, want %v %v", c.op.HasParam(), c.op.IsBinary(), c.param, c.binary)
			}
			if int(c.op) < len(Table) && c.op.InitGroup() != c.group {
				t.Errorf("InitGroup() = %s, want %s", c.op.InitGroup(), c.group)
			}
		})
	}
	if _, ok := ByName("no_such_op"); ok {
		t.Error("ByName found an op outside the table")
	}
}

// Every entry says where its cycles come from: a tt-llk or tt-metal SFPU
// header with line numbers (cycles.go's path prefixes).
func TestCyclesSource(t *testing.T) {
	file := regexp.MustCompile(`\b(sfpu|llk_sfpu)/ckernel_sfpu_\w+\.h:\d+-\d+`)
	for _, s := range Table {
		t.Run(s.Name, func(t *testing.T) {
			if !file.MatchString(s.CyclesSource) {
				t.Errorf("CyclesSource %q names no sfpu/ or llk_sfpu/ ckernel_sfpu_*.h:lines", s.CyclesSource)
			}
		})
	}
}

// The derived cycles per tile, with the arithmetic of cycles.go written
// out: 3 per call (SETC16, STALLWAIT, SETRWC) + 4 faces x (2 SETRWC +
// perFace + 8 iterations x perIter); perIter is the total CyclesSource
// ends with. The shared functions: _sfpu_exp_f32_accurate_ 63,
// _sfpu_exp_21f_<false> 27, _sfpu_reciprocal_<2> 9; 3 is each iteration's
// SFPLOAD, SFPSTORE and INCRWC.
func TestCycles(t *testing.T) {
	cases := []struct {
		op               Op
		perFace, perIter float64
		want             float64
	}{
		{Exp, 0, 3 + 63, 3 + 4*(2+8*(3+63))},
		{Log, 0, 3 + 1 + 5 + 9 + 4 + 52 + 3, 3 + 4*(2+8*(3+1+5+9+4+(1+1+7+2+(1+9)+1+2+16+4+6+1+1)+3))},
		{Sigmoid, 0, 3 + 1 + 63 + 2 + 9, 3 + 4*(2+8*(3+1+63+2+9))},
		{SiLU, 0, 3 + 75 + 2, 3 + 4*(2+8*(3+(1+63+2+9)+2))},
		{Rsqrt, 0, 3 + 16 + 14, 3 + 4*(2+8*(3+16+14))},
		{Sqrt, 0, 3 + 16 + 11, 3 + 4*(2+8*(3+16+11))},
		{Recip, 0, 3 + 30, 3 + 4*(2+8*(3+2+3+3+8+2+2+5+1+4))},
		{Square, 0, 5, 3 + 4*(2+8*5)},
		{Negative, 0, 4, 3 + 4*(2+8*4)},
		{Abs, 0, 4, 3 + 4*(2+8*4)},
		{Relu, 1, 8, 3 + 4*(2+1+8*8)},
		{Softplus, 0, 3 + 3 + 6 + 68 + 4 + 1, 3 + 4*(2+8*(3+3+6+(1+5+27+1+6+26+2)+4+1))},
		{AddScalar, 2, 5, 3 + 4*(2+2+8*5)},
		{MulScalar, 2, 5, 3 + 4*(2+2+8*5)},
		{AddBinary, 0, 6, 3 + 4*(2+8*6)},
		{MulBinary, 0, 6, 3 + 4*(2+8*6)},
		{SigmoidBF16, 0, 3 + 1 + 63 + 2 + 9, 3 + 4*(2+8*(3+1+63+2+9))},
		{SiLUBF16, 0, 3 + 75 + 2, 3 + 4*(2+8*(3+(1+63+2+9)+2))},
		{ExpSoftmax, 0, 3 + 63, 3 + 4*(2+8*(3+63))},
		{MinBinary, 0, 6, 3 + 4*(2+8*6)},
	}
	if len(cases) != len(Table) {
		t.Errorf("%d cases for %d ops: pin every op's cycles", len(cases), len(Table))
	}
	for _, c := range cases {
		t.Run(c.op.String(), func(t *testing.T) {
			s := c.op.Spec()
			if s.Cycles != c.want {
				t.Errorf("Cycles = %g, want %g", s.Cycles, c.want)
			}
			if got := 3 + 4*(2+c.perFace+8*c.perIter); got != c.want {
				t.Errorf("the test's arithmetic: %g per iteration and %g per face give %g, not %g", c.perIter, c.perFace, got, c.want)
			}
			if end := fmt.Sprintf("= %g", c.perIter); !strings.HasSuffix(s.CyclesSource, end) {
				t.Errorf("CyclesSource does not end with the per-iteration total %q: %q", end, s.CyclesSource)
			}
		})
	}
}
