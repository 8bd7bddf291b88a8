package sfpu

import (
	"math"
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
