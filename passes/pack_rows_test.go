package passes

import (
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/sim/ref"
)

// packRowsGraph is a decode step of `users` users: norm, matmul, a
// per-user op (sigmoid is not row-wise in pack-rows' table), then a
// residual matmul_add whose result is the output.
func packRowsGraph(t *testing.T, users int) *ir.Graph {
	t.Helper()
	b := ir.NewBuilder("pack")
	b.Region("mlp", 0)
	x := b.Input("x", ir.T(ir.BF16, users, 1, 64))
	n := b.RMSNorm(x, b.Weight("norm.weight", ir.T(ir.BF16, 64)), 1e-6, 1)
	h := b.Matmul(n, b.Weight("w0", ir.T(ir.BF16, 64, 96)))
	s := b.Sigmoid(h)
	y := b.MatmulAdd(s, b.Weight("w1", ir.T(ir.BF16, 96, 64)), x)
	b.Output(y)
	g, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestPackRows(t *testing.T) {
	t.Run("users", func(t *testing.T) {
		g := packRowsGraph(t, 3)
		before, st := packVerified(t, g)
		// rms_norm, matmul and matmul_add packed; reshapes: x packed (read
		// by the norm and the residual: one), h unpacked for sigmoid, its
		// result packed again, the output unpacked.
		if diff := cmp.Diff(PackRowsStats{Ops: 3, Reshapes: 4}, st); diff != "" {
			t.Errorf("stats (-want +got):\n%s", diff)
		}
		var kinds []string
		for _, op := range g.Ops() {
			kinds = append(kinds, op.Name()+" "+op.Results[0].Type.Shape.String())
		}
		want := []string{"reshape [1,3,64]", "rms_norm [1,3,64]", "matmul [1,3,96]", "reshape [3,1,96]", "sigmoid [3,1,96]", "reshape [1,3,96]", "matmul_add [1,3,64]", "reshape [3,1,64]"}
		if diff := cmp.Diff(want, kinds); diff != "" {
			t.Errorf("ops (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(ir.Shape{3, 1, 64}, g.Outputs[0].Type.Shape); diff != "" {
			t.Errorf("output shape (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(before, evalOutputs(t, g)); diff != "" {
			t.Errorf("packing changed the outputs (-before +after):\n%s", diff)
		}
	})
	t.Run("embedding ids keep their shape", func(t *testing.T) {
		// The device loop's tokens [3,1,1] (the argmax's shape) gathered
		// into [3,1,64]: the gather packs, its ids are not reshaped (a
		// state's reshape would be a copy program).
		b := ir.NewBuilder("pack")
		b.Region("embed", -1)
		ids := b.Input("ids", ir.TensorType{Shape: ir.Shape{3, 1, 1}, DType: ir.UInt32, Layout: ir.RowMajorLayout, Mem: ir.DRAM, Dist: ir.Replicated})
		h := b.EmbeddingReshape(ids, b.Weight("table", ir.T(ir.BF16, 16, 64)), []int{3, 1, 64})
		b.Output(b.RMSNorm(h, b.Weight("norm.weight", ir.T(ir.BF16, 64)), 1e-6, 1))
		g, err := b.Finish()
		if err != nil {
			t.Fatal(err)
		}
		st, err := PackRows(g, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := ir.Verify(g); err != nil {
			t.Fatalf("packed graph does not verify: %v\n%s", err, ir.Print(g))
		}
		if diff := cmp.Diff(PackRowsStats{Ops: 2, Reshapes: 1}, st); diff != "" {
			t.Errorf("stats (-want +got):\n%s", diff)
		}
		var kinds []string
		for _, op := range g.Ops() {
			kinds = append(kinds, op.Name()+" "+op.Results[0].Type.Shape.String())
		}
		want := []string{"embedding_reshape [1,3,64]", "rms_norm [1,3,64]", "reshape [3,1,64]"}
		if diff := cmp.Diff(want, kinds); diff != "" {
			t.Errorf("ops (-want +got):\n%s", diff)
		}
	})
	t.Run("sibling matmul writes per-user rows", func(t *testing.T) {
		// norm -> matmul2 whose results go only to per-user ops: the
		// matmul reads the packed norm and keeps its results [3,1,N].
		b := ir.NewBuilder("pack")
		b.Region("gdn", 0)
		x := b.Input("x", ir.T(ir.BF16, 3, 1, 64))
		n := b.RMSNorm(x, b.Weight("norm.weight", ir.T(ir.BF16, 64)), 1e-6, 1)
		ab := b.Matmul2(n, b.Weight("w0", ir.T(ir.BF16, 64, 96)), b.Weight("w1", ir.T(ir.BF16, 64, 32)))
		b.Output(b.Sigmoid(ab[0]), b.Sigmoid(ab[1]))
		g, err := b.Finish()
		if err != nil {
			t.Fatal(err)
		}
		before, st := packVerified(t, g)
		// Reshapes: x packed for the norm; none after the matmul.
		if diff := cmp.Diff(PackRowsStats{Ops: 2, Reshapes: 1, Unpacking: 1}, st); diff != "" {
			t.Errorf("stats (-want +got):\n%s", diff)
		}
		var kinds []string
		for _, op := range g.Ops() {
			kinds = append(kinds, op.Name()+" "+op.Results[0].Type.Shape.String())
		}
		want := []string{"reshape [1,3,64]", "rms_norm [1,3,64]", "matmul2 [3,1,96]", "sigmoid [3,1,96]", "sigmoid [3,1,32]"}
		if diff := cmp.Diff(want, kinds); diff != "" {
			t.Errorf("ops (-want +got):\n%s", diff)
		}
		mm := g.Ops()[2]
		if u, err := ir.MatmulUsers(mm.Attrs); err != nil || u != 3 {
			t.Errorf("matmul2 users attribute = %d (%v), want 3", u, err)
		}
		if diff := cmp.Diff(before, evalOutputs(t, g)); diff != "" {
			t.Errorf("packing changed the outputs (-before +after):\n%s", diff)
		}
	})
	t.Run("one user", func(t *testing.T) {
		g := packRowsGraph(t, 1)
		st, err := PackRows(g, nil)
		if err != nil {
			t.Fatal(err)
		}
		if st != (PackRowsStats{}) {
			t.Errorf("B = 1 packed: %+v", st)
		}
	})
	t.Run("placed values stay", func(t *testing.T) {
		g := packRowsGraph(t, 3)
		norm := g.Ops()[0].Results[0]
		st, err := PackRows(g, func(v *ir.Value) bool { return v == norm })
		if err != nil {
			t.Fatal(err)
		}
		if !norm.Type.Shape.Equal(ir.Shape{3, 1, 64}) || st.Ops != 1 {
			t.Errorf("placed norm result: %s, %d ops packed; want [3,1,64] and only matmul_add", norm.Type.Shape, st.Ops)
		}
		if err := ir.Verify(g); err != nil {
			t.Fatal(err)
		}
	})
}

// packVerified evaluates g's outputs, packs g and checks that it still
// verifies; it returns the outputs from before and the pass's stats.
func packVerified(t *testing.T, g *ir.Graph) ([][]float32, PackRowsStats) {
	t.Helper()
	before := evalOutputs(t, g)
	st, err := PackRows(g, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ir.Verify(g); err != nil {
		t.Fatalf("packed graph does not verify: %v\n%s", err, ir.Print(g))
	}
	return before, st
}

// evalOutputs evaluates g's outputs on fixed random inputs and weights.
func evalOutputs(t *testing.T, g *ir.Graph) [][]float32 {
	t.Helper()
	rng := rand.New(rand.NewPCG(7, 7))
	env := map[*ir.Value]ref.Tensor{}
	for _, list := range [][]*ir.Value{g.Inputs, g.Weights} {
		for _, v := range list {
			x := ref.NewTensor(v.Type.Shape)
			for i := range x.Data {
				x.Data[i] = float32(rng.NormFloat64())
			}
			env[v] = x
		}
	}
	vals, err := ref.Eval(g, env, ref.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	var outs [][]float32
	for _, v := range g.Outputs {
		outs = append(outs, vals[v].Data)
	}
	return outs
}
