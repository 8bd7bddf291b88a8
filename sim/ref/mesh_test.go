package ref

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/ir/numerics"
)

// meshOne builds a graph on mesh with one input x and y = build(x) as
// output.
func meshOne(t *testing.T, mesh ir.Mesh, in ir.TensorType, build func(b *ir.Builder, x *ir.Value) *ir.Value) (*ir.Graph, *ir.Value, *ir.Value) {
	t.Helper()
	b := ir.NewBuilder("mesh")
	b.G.Mesh = mesh
	x := b.Input("x", in)
	b.Region("test", 0)
	y := build(b, x)
	b.Output(y)
	g, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	return g, x, y
}

// deviceData returns n tensors of shape with bf16-representable values
// that differ per device (device d's are offset by 100*d).
func deviceData(n int, shape ir.Shape, seed uint64) []Tensor {
	rng := rand.New(rand.NewPCG(seed, 3))
	ts := make([]Tensor, n)
	for d := range ts {
		ts[d] = NewTensor(shape)
		for i := range ts[d].Data {
			ts[d].Data[i] = numerics.RoundBF16(float32(rng.Float64()*4-2) + float32(100*d))
		}
	}
	return ts
}

func envsFor(x *ir.Value, ts []Tensor) []map[*ir.Value]Tensor {
	envs := make([]map[*ir.Value]Tensor, len(ts))
	for d, t := range ts {
		envs[d] = map[*ir.Value]Tensor{x: t}
	}
	return envs
}

func TestEvalMeshAllReduce(t *testing.T) {
	for _, tc := range []struct {
		name string
		mesh ir.Mesh
		dt   ir.DType
	}{
		{"1x2 fp32", ir.Mesh{Rows: 1, Cols: 2}, ir.FP32},
		{"1x3 fp32", ir.Mesh{Rows: 1, Cols: 3}, ir.FP32},
		{"1x2 bf16", ir.Mesh{Rows: 1, Cols: 2}, ir.BF16},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := tc.mesh.Devices()
			shape := ir.Shape{2, 40}
			var red *ir.Value
			g, x, y := meshOne(t, tc.mesh, ir.T(tc.dt, shape...), func(b *ir.Builder, x *ir.Value) *ir.Value {
				red = b.AllReduce(x, n)
				return b.AddScalar(red, 0.5) // a per-device op after the collective
			})
			ts := deviceData(n, shape, 1)
			for _, opts := range []Options{DefaultOptions(), ExactOptions()} {
				res, err := EvalMesh(g, envsFor(x, ts), opts)
				if err != nil {
					t.Fatal(err)
				}
				want := make([]float32, shape.Numel())
				for i := range want {
					s := 0.0
					for _, d := range ts {
						s += float64(d.Data[i])
					}
					want[i] = float32(s)
					if opts.StorageFormats { // in device order: FPU adds, fp32 values read as tf32
						want[i] = ts[0].Data[i]
						for _, d := range ts[1:] {
							want[i] = numerics.FPUAdd(numerics.TruncTF32(want[i]), numerics.TruncTF32(d.Data[i]), true)
						}
					}
					if opts.StorageFormats && tc.dt == ir.BF16 {
						want[i] = packedBF16(want[i]) // packed: ties away from zero
					}
				}
				for d := range res {
					if diff := cmp.Diff(want, res[d][red].Data); diff != "" {
						t.Errorf("StorageFormats=%v: device %d all_reduce (-want +got):\n%s", opts.StorageFormats, d, diff)
					}
					if res[d][y].Data[0] == res[d][red].Data[0] {
						t.Errorf("device %d: the op after the collective did not run", d)
					}
				}
				res[0][red].Data[0] = 12345
				if res[1][red].Data[0] == 12345 {
					t.Errorf("devices share the all_reduce result's memory")
				}
			}
		})
	}
}

// TestEvalMeshRowParallelMatmul splits K of a matmul over two devices: the
// all_reduce of the partial products is the whole product.
func TestEvalMeshRowParallelMatmul(t *testing.T) {
	const M, K, N = 3, 64, 24
	b := ir.NewBuilder("tp")
	b.G.Mesh = ir.Mesh{Rows: 1, Cols: 2}
	x := b.Input("x", ir.T(ir.BF16, 1, M, K/2))
	w := b.Weight("w", ir.T(ir.BF16, K/2, N))
	b.Region("mlp", 0)
	y := b.AllReduce(b.Matmul(x, w, ir.WithDType(ir.FP32)), 2)
	b.Output(y)
	g, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	xf := deviceData(1, ir.Shape{M, K}, 5)[0]
	wf := deviceData(1, ir.Shape{K, N}, 6)[0]
	envs := make([]map[*ir.Value]Tensor, 2)
	for d := range envs {
		xs := NewTensor(ir.Shape{1, M, K / 2})
		for i := 0; i < M; i++ {
			copy(xs.Data[i*K/2:(i+1)*K/2], xf.Data[i*K+d*K/2:i*K+(d+1)*K/2])
		}
		ws := Tensor{Shape: ir.Shape{K / 2, N}, Data: append([]float32(nil), wf.Data[d*K/2*N:(d+1)*K/2*N]...)}
		envs[d] = map[*ir.Value]Tensor{x: xs, w: ws}
	}
	want := to32(matmul64(arr{shape: []int{M, K}, v: to64(xf.Data)}, arr{shape: []int{K, N}, v: to64(wf.Data)}))
	for _, opts := range []Options{DefaultOptions(), ExactOptions()} {
		res, err := EvalMesh(g, envs, opts)
		if err != nil {
			t.Fatal(err)
		}
		for d := range res {
			got := res[d][y].Data
			// bf16 operands: HiFi4 products are exact; only the accumulation
			// differs, and with formats on the partial sums meet in an FPU add
			// (tf32 operands aligned in 11 bits, about 2^-11 of each).
			tol := 1e-5
			if opts.StorageFormats {
				tol = 0x1p-7
			}
			if rel := numerics.MaxRelErr(want, got); rel > tol {
				t.Errorf("StorageFormats=%v: device %d: max rel err %g vs the unsplit matmul", opts.StorageFormats, d, rel)
			}
		}
	}
}

func TestEvalMeshReduceScatter(t *testing.T) {
	for _, tc := range []struct {
		name  string
		shape ir.Shape
		axis  int
	}{
		{"last axis", ir.Shape{2, 64}, -1},
		{"axis 0", ir.Shape{4, 8}, 0},
		{"middle axis", ir.Shape{2, 6, 3}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, x, y := meshOne(t, ir.Mesh{Rows: 1, Cols: 2}, ir.T(ir.FP32, tc.shape...), func(b *ir.Builder, x *ir.Value) *ir.Value {
				return b.ReduceScatter(x, tc.axis, 2)
			})
			ts := deviceData(2, tc.shape, 2)
			res, err := EvalMesh(g, envsFor(x, ts), DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			ax := posAxis(tc.axis, tc.shape.Rank())
			sum := make([]float64, tc.shape.Numel())
			for i := range sum {
				sum[i] = float64(numerics.FPUAdd(ts[0].Data[i], ts[1].Data[i], true)) // bf16 values: the FPU add
			}
			s := arr{shape: tc.shape, v: sum}
			for d := range res {
				begin, end := make([]int, tc.shape.Rank()), tc.shape.Clone()
				m := tc.shape[ax] / 2
				begin[ax], end[ax] = d*m, (d+1)*m
				want := Tensor{Shape: ir.Shape(sliceShape(begin, end)), Data: to32(slice64(s, begin, end))}
				if diff := cmp.Diff(want, res[d][y]); diff != "" {
					t.Errorf("device %d (-want +got):\n%s", d, diff)
				}
			}
		})
	}
}

func sliceShape(begin, end []int) []int {
	s := make([]int, len(begin))
	for d := range s {
		s[d] = end[d] - begin[d]
	}
	return s
}

func TestEvalMeshAllGather(t *testing.T) {
	for _, tc := range []struct {
		name  string
		shape ir.Shape
		axis  int
		n     int
	}{
		{"axis 1 of 2", ir.Shape{2, 3, 32}, 1, 2},
		{"last axis of 3", ir.Shape{2, 5}, -1, 3},
		{"axis 0 of 2", ir.Shape{1, 4}, 0, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, x, y := meshOne(t, ir.Mesh{Rows: 1, Cols: tc.n}, ir.T(ir.BF16, tc.shape...), func(b *ir.Builder, x *ir.Value) *ir.Value {
				return b.AllGather(x, tc.axis, tc.n)
			})
			ts := deviceData(tc.n, tc.shape, 4)
			res, err := EvalMesh(g, envsFor(x, ts), DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			// out[.., i, ..] = device i / size's x[.., i % size, ..] along the axis.
			ax := posAxis(tc.axis, tc.shape.Rank())
			size := tc.shape[ax]
			shape := tc.shape.Clone()
			shape[ax] *= tc.n
			want := arr{shape: shape, v: gen64(shape, func(idx []int) float64 {
				j := append([]int(nil), idx...)
				j[ax] %= size
				return float64(ts[idx[ax]/size].Data[ravel(j, tc.shape)])
			})}
			for d := range res {
				if diff := cmp.Diff(Tensor{Shape: ir.Shape(want.shape), Data: to32(want.v)}, res[d][y]); diff != "" {
					t.Errorf("device %d (-want +got):\n%s", d, diff)
				}
			}
		})
	}
}

// TestEvalMeshRowsAreSeparateGroups checks that on a 2x2 mesh an
// all_reduce sums within each mesh row only.
func TestEvalMeshRowsAreSeparateGroups(t *testing.T) {
	g, x, y := meshOne(t, ir.Mesh{Rows: 2, Cols: 2}, ir.T(ir.FP32, 1, 2), func(b *ir.Builder, x *ir.Value) *ir.Value {
		return b.AllReduce(x, 2)
	})
	ts := []Tensor{
		{Shape: ir.Shape{1, 2}, Data: []float32{1, 2}},
		{Shape: ir.Shape{1, 2}, Data: []float32{10, 20}},
		{Shape: ir.Shape{1, 2}, Data: []float32{100, 200}},
		{Shape: ir.Shape{1, 2}, Data: []float32{1000, 2000}},
	}
	res, err := EvalMesh(g, envsFor(x, ts), DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	want := [][]float32{{11, 22}, {11, 22}, {1100, 2200}, {1100, 2200}}
	for d := range res {
		if diff := cmp.Diff(want[d], res[d][y].Data); diff != "" {
			t.Errorf("device %d (-want +got):\n%s", d, diff)
		}
	}
}

// TestEvalMeshWithoutCollectivesMatchesEval checks that EvalMesh is Eval
// on every device when no op combines devices.
func TestEvalMeshWithoutCollectivesMatchesEval(t *testing.T) {
	g, x, y := meshOne(t, ir.Mesh{Rows: 1, Cols: 2}, ir.T(ir.BF16, 3, 40), func(b *ir.Builder, x *ir.Value) *ir.Value {
		return b.Softplus(b.Transpose(x, 0, 1))
	})
	ts := deviceData(2, ir.Shape{3, 40}, 9)
	res, err := EvalMesh(g, envsFor(x, ts), DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	for d, tt := range ts {
		one, err := Eval(g, map[*ir.Value]Tensor{x: tt}, DefaultOptions())
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(one[y], res[d][y]); diff != "" {
			t.Errorf("device %d: EvalMesh differs from Eval (-eval +mesh):\n%s", d, diff)
		}
	}
}

func TestCollectivesOnOneDevice(t *testing.T) {
	data := []float32{1, 2, 3, 4, 5, 6}
	for _, tc := range []struct {
		name  string
		build func(b *ir.Builder, x *ir.Value) *ir.Value
	}{
		{"all_reduce", func(b *ir.Builder, x *ir.Value) *ir.Value { return b.AllReduce(x, 1) }},
		{"reduce_scatter", func(b *ir.Builder, x *ir.Value) *ir.Value { return b.ReduceScatter(x, -1, 1) }},
		{"all_gather", func(b *ir.Builder, x *ir.Value) *ir.Value { return b.AllGather(x, 0, 1) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, x, y := meshOne(t, ir.Mesh{Rows: 1, Cols: 1}, ir.T(ir.FP32, 2, 3), tc.build)
			env := map[*ir.Value]Tensor{x: {Shape: ir.Shape{2, 3}, Data: data}}
			one, err := Eval(g, env, DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			mesh, err := EvalMesh(g, []map[*ir.Value]Tensor{env}, DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			want := Tensor{Shape: ir.Shape{2, 3}, Data: data}
			if diff := cmp.Diff(want, one[y]); diff != "" {
				t.Errorf("Eval: a 1-device collective is not the identity (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(want, mesh[0][y]); diff != "" {
				t.Errorf("EvalMesh: a 1-device collective is not the identity (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEvalMeshErrors(t *testing.T) {
	mesh2 := ir.Mesh{Rows: 1, Cols: 2}
	reduce2 := func(b *ir.Builder, x *ir.Value) *ir.Value { return b.AllReduce(x, 2) }
	good := Tensor{Shape: ir.Shape{1, 4}, Data: []float32{1, 2, 3, 4}}

	g, x, _ := meshOne(t, mesh2, ir.T(ir.FP32, 1, 4), reduce2)
	if _, err := Eval(g, map[*ir.Value]Tensor{x: good}, DefaultOptions()); err == nil || !strings.Contains(err.Error(), "EvalMesh") || !strings.Contains(err.Error(), "op all_reduce") {
		t.Errorf("Eval of a 2-device all_reduce: got %v, want an error naming the op and EvalMesh", err)
	}
	tests := []struct {
		name string
		g    *ir.Graph
		envs []map[*ir.Value]Tensor
		want []string
	}{
		{"one env for two devices", g, []map[*ir.Value]Tensor{{x: good}}, []string{"one env per device", "1x2", "got 1"}},
		{"device 1 misses the input", g, []map[*ir.Value]Tensor{{x: good}, {}}, []string{"device 1", `no tensor for input "x"`}},
		{"device 1 has another shape", g, []map[*ir.Value]Tensor{{x: good}, {x: {Shape: ir.Shape{2, 2}, Data: good.Data}}}, []string{"device 1", "declared [1,4]", "shape [2,2]"}},
	}
	g3, x3, _ := meshOne(t, mesh2, ir.T(ir.FP32, 1, 4), func(b *ir.Builder, x *ir.Value) *ir.Value { return b.AllReduce(x, 3) })
	tests = append(tests, struct {
		name string
		g    *ir.Graph
		envs []map[*ir.Value]Tensor
		want []string
	}{"devices differ from the mesh row", g3, []map[*ir.Value]Tensor{{x3: good}, {x3: good}}, []string{"op all_reduce", "rule collective-mesh", "spans 3 devices", "1x2"}})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := EvalMesh(tc.g, tc.envs, DefaultOptions())
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
	if _, err := EvalMesh(nil, nil, DefaultOptions()); err == nil {
		t.Errorf("EvalMesh(nil graph) succeeded")
	}
	if _, err := EvalMesh(g, []map[*ir.Value]Tensor{{x: good}, {x: good}}, Options{StorageFormats: true, Fidelity: 9}); err == nil {
		t.Errorf("EvalMesh with fidelity 9 succeeded")
	}
}
