package ref

import (
	"strings"
	"testing"

	"github.com/tcc-dev/tcc/ir"
)

// errGraph builds x [2,8] bf16, ids [1,2] uint32, table [4,8] bf16 and
// returns the graph with those values and the embedding result.
func errGraph(t *testing.T) (g *ir.Graph, x, ids, tab *ir.Value) {
	t.Helper()
	b := ir.NewBuilder("err")
	x = b.Input("x", ir.T(ir.BF16, 2, 8))
	ids = b.Input("ids", ir.T(ir.UInt32, 1, 2))
	tab = b.Weight("embed_tokens", ir.T(ir.BF16, 4, 8))
	b.Region("embed", -1)
	e := b.Embedding(ids, tab)
	b.Region("mlp", 3)
	b.Output(b.Add(b.Reshape(e, []int{2, 8}), x))
	g, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	return g, x, ids, tab
}

func TestEvalErrors(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(env map[*ir.Value]Tensor, x, ids, tab *ir.Value)
		want   []string
	}{
		{"missing weight", func(env map[*ir.Value]Tensor, x, ids, tab *ir.Value) { delete(env, tab) },
			[]string{`no tensor for weight "embed_tokens"`, "[4,8]"}},
		{"wrong shape", func(env map[*ir.Value]Tensor, x, ids, tab *ir.Value) {
			env[x] = Tensor{Shape: ir.Shape{8, 2}, Data: make([]float32, 16)}
		}, []string{`input "x"`, "declared [2,8]", "shape [8,2]"}},
		{"data length", func(env map[*ir.Value]Tensor, x, ids, tab *ir.Value) {
			env[x] = Tensor{Shape: ir.Shape{2, 8}, Data: make([]float32, 15)}
		}, []string{`input "x"`, "needs 16 values, data has 15"}},
		{"non-integer id", func(env map[*ir.Value]Tensor, x, ids, tab *ir.Value) {
			env[ids] = Tensor{Shape: ir.Shape{1, 2}, Data: []float32{1, 0.5}}
		}, []string{`input "ids"`, "uint32", "0.5"}},
		{"id out of range", func(env map[*ir.Value]Tensor, x, ids, tab *ir.Value) {
			env[ids] = Tensor{Shape: ir.Shape{1, 2}, Data: []float32{1, 7}}
		}, []string{"op embedding", "in embed", "id 7 at position 1", "4-row table"}},
		{"undeclared value", func(env map[*ir.Value]Tensor, x, ids, tab *ir.Value) {
			env[&ir.Value{ID: 99, Name: "stray"}] = Tensor{Shape: ir.Shape{1}, Data: []float32{0}}
		}, []string{"does not declare", `"stray"`}},
		{"nil key", func(env map[*ir.Value]Tensor, x, ids, tab *ir.Value) {
			env[nil] = Tensor{Shape: ir.Shape{1}, Data: []float32{0}}
		}, []string{"does not declare", "<nil>"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g, x, ids, tab := errGraph(t)
			env := map[*ir.Value]Tensor{
				x:   {Shape: ir.Shape{2, 8}, Data: make([]float32, 16)},
				ids: {Shape: ir.Shape{1, 2}, Data: []float32{3, 0}},
				tab: {Shape: ir.Shape{4, 8}, Data: make([]float32, 32)},
			}
			if _, err := Eval(g, env, DefaultOptions()); err != nil {
				t.Fatalf("valid env: %v", err)
			}
			tc.mutate(env, x, ids, tab)
			_, err := Eval(g, env, DefaultOptions())
			if err == nil {
				t.Fatalf("got no error, want one containing %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
	if _, err := Eval(nil, nil, DefaultOptions()); err == nil {
		t.Errorf("Eval(nil graph) succeeded")
	}
}

// TestEvalOpRejectsMalformedOps feeds hand-made ops that bypass the builder
// and verifier: every case must give an error naming the op, never a panic.
func TestEvalOpRejectsMalformedOps(t *testing.T) {
	g := ir.NewGraph("bad")
	val := func(dt ir.DType, dims ...int) *ir.Value { return g.NewValue(ir.KindInput, "", ir.T(dt, dims...)) }
	res := func(dt ir.DType, dims ...int) []*ir.Value {
		return []*ir.Value{g.NewValue(ir.KindResult, "", ir.T(dt, dims...))}
	}
	ten := func(dims ...int) Tensor { return NewTensor(ir.Shape(dims)) }
	region := &ir.Region{Kind: "mlp", Index: 5}
	tests := []struct {
		name string
		op   *ir.Op
		args []Tensor
		want string
	}{
		{"matmul rank", &ir.Op{Kind: ir.OpMatmul, Operands: []*ir.Value{val(ir.BF16, 4, 8), val(ir.BF16, 8)}, Results: res(ir.BF16, 4, 1)},
			[]Tensor{ten(4, 8), ten(8)}, "rule matmul-rank"},
		{"matmul inner", &ir.Op{Kind: ir.OpMatmul, Operands: []*ir.Value{val(ir.BF16, 4, 8), val(ir.BF16, 9, 2)}, Results: res(ir.BF16, 4, 2)},
			[]Tensor{ten(4, 8), ten(9, 2)}, "rule matmul-inner"},
		{"broadcast", &ir.Op{Kind: ir.OpAdd, Operands: []*ir.Value{val(ir.BF16, 4, 8), val(ir.BF16, 3)}, Results: res(ir.BF16, 4, 8)},
			[]Tensor{ten(4, 8), ten(3)}, "rule broadcast"},
		{"operand count", &ir.Op{Kind: ir.OpAdd, Operands: []*ir.Value{val(ir.BF16, 4)}, Results: res(ir.BF16, 4)},
			[]Tensor{ten(4)}, "takes 2 operands"},
		{"args count", &ir.Op{Kind: ir.OpExp, Operands: []*ir.Value{val(ir.BF16, 4)}, Results: res(ir.BF16, 4)},
			[]Tensor{ten(4), ten(4)}, "has 1 operands, got 2"},
		{"missing attribute", &ir.Op{Kind: ir.OpAddScalar, Operands: []*ir.Value{val(ir.BF16, 4)}, Results: res(ir.BF16, 4)},
			[]Tensor{ten(4)}, `missing float attribute "value"`},
		{"wrong attribute type", &ir.Op{Kind: ir.OpRMSNorm, Operands: []*ir.Value{val(ir.BF16, 2, 4), val(ir.BF16, 4)}, Attrs: ir.Attrs{"eps": 1, "offset": 0.0}, Results: res(ir.BF16, 2, 4)},
			[]Tensor{ten(2, 4), ten(4)}, `attribute "eps" is int`},
		{"norm weight", &ir.Op{Kind: ir.OpRMSNorm, Operands: []*ir.Value{val(ir.BF16, 2, 4), val(ir.BF16, 3)}, Attrs: ir.Attrs{"eps": 1e-6, "offset": 0.0}, Results: res(ir.BF16, 2, 4)},
			[]Tensor{ten(2, 4), ten(3)}, "rule norm-weight"},
		{"no results", &ir.Op{Kind: ir.OpExp, Operands: []*ir.Value{val(ir.BF16, 4)}},
			[]Tensor{ten(4)}, "has 0 results"},
		{"result shape", &ir.Op{Kind: ir.OpExp, Operands: []*ir.Value{val(ir.BF16, 4)}, Results: res(ir.BF16, 5)},
			[]Tensor{ten(4)}, "result 0 has shape [4] but its declared type is [5]"},
		{"bad tensor", &ir.Op{Kind: ir.OpExp, Operands: []*ir.Value{val(ir.BF16, 4)}, Results: res(ir.BF16, 4)},
			[]Tensor{{Shape: ir.Shape{4}, Data: nil}}, "needs 4 values, data has 0"},
		{"zero dim", &ir.Op{Kind: ir.OpMean, Operands: []*ir.Value{val(ir.BF16, 0)}, Results: res(ir.BF16, 1)},
			[]Tensor{{Shape: ir.Shape{0}}}, "non-positive dimension"},
		{"reduce scalar", &ir.Op{Kind: ir.OpMean, Operands: []*ir.Value{val(ir.BF16)}, Results: res(ir.BF16)},
			[]Tensor{{Shape: ir.Shape{}, Data: []float32{1}}}, "cannot reduce a scalar"},
		{"reshape numel", &ir.Op{Kind: ir.OpReshape, Operands: []*ir.Value{val(ir.BF16, 4)}, Attrs: ir.Attrs{"shape": []int{3}}, Results: res(ir.BF16, 3)},
			[]Tensor{ten(4)}, "rule reshape-numel"},
		{"embedding table rank", &ir.Op{Kind: ir.OpEmbedding, Operands: []*ir.Value{val(ir.UInt32, 2), val(ir.BF16, 8)}, Results: res(ir.BF16, 2, 8)},
			[]Tensor{ten(2), ten(8)}, "rule embedding-table"},
		{"typecast to invalid", &ir.Op{Kind: ir.OpTypecast, Operands: []*ir.Value{val(ir.BF16, 4)}, Attrs: ir.Attrs{"dtype": ir.InvalidDType}, Results: res(ir.InvalidDType, 4)},
			[]Tensor{ten(4)}, "cannot convert to invalid"},
		{"unknown kind", &ir.Op{Kind: ir.OpKind(9999), Operands: []*ir.Value{val(ir.BF16, 4)}, Results: res(ir.BF16, 4)},
			[]Tensor{ten(4)}, "no semantics for op kind op(9999)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.op.ID = 42
			tc.op.Region = region
			_, err := EvalOp(tc.op, tc.args, DefaultOptions())
			if err == nil {
				t.Fatalf("got no error, want %q", tc.want)
			}
			for _, w := range []string{tc.want, "%42 in layer 5 (mlp)"} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
	op := &ir.Op{ID: 7, Kind: ir.OpExp, Operands: []*ir.Value{val(ir.BF16, 4)}, Results: res(ir.BF16, 4)}
	if _, err := EvalDecomposition(op, []Tensor{ten(4)}); err == nil || !strings.Contains(err.Error(), "op exp %7 has no decomposition") {
		t.Errorf("EvalDecomposition without Decomp: got %v", err)
	}
	if _, err := EvalOp(nil, nil, DefaultOptions()); err == nil {
		t.Errorf("EvalOp(nil) succeeded")
	}
}
