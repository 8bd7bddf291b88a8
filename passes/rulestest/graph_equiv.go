package rulestest

import (
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"

	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/sim/ref"
)

// graphTolerance is how far, relative to the largest magnitude of an
// output, a rewritten graph's result may move from the input graph's in
// exact (fp32) math: reassociated sums, nothing more. A rewrite that
// changes what is computed (a scale doubled, an operand swapped) moves it
// by O(1).
const graphTolerance = 1e-5

// checkGraphEquivalent evaluates the case's input graph (parsed from src)
// and the rewritten graph got on the same random inputs, weights and
// states (matched by name; every device of the mesh its own draw) in
// exact math, and reports every output and state update that moved by
// more than graphTolerance of its largest magnitude. It checks every
// rewrite a rule makes, fusing or not: a rule that rewrote
// mul_scalar(x, a) to mul_scalar(x, 2a) fails here even with its
// expected output updated to match.
func checkGraphEquivalent(t T, src string, got *ir.Graph) {
	t.Helper()
	g0, err := ir.Parse(src)
	if err != nil {
		t.Fatalf("input: %v", err)
	}
	n := g0.Mesh.Rows * g0.Mesh.Cols
	draw := func(g *ir.Graph) []map[*ir.Value]ref.Tensor {
		envs := make([]map[*ir.Value]ref.Tensor, n)
		for d := range envs {
			envs[d] = map[*ir.Value]ref.Tensor{}
			for _, vs := range [][]*ir.Value{g.Inputs, g.Weights, g.States} {
				for _, v := range vs {
					envs[d][v] = randomTensor(v, d)
				}
			}
		}
		return envs
	}
	want, err := ref.EvalMesh(g0, draw(g0), ref.ExactOptions())
	if err != nil {
		t.Errorf("input graph: %v", err)
		return
	}
	have, err := ref.EvalMesh(got, draw(got), ref.ExactOptions())
	if err != nil {
		t.Errorf("graph after the rules: %v", err)
		return
	}
	if len(g0.Outputs) != len(got.Outputs) {
		t.Errorf("the rules changed the number of graph outputs from %d to %d", len(g0.Outputs), len(got.Outputs))
		return
	}
	type pair struct {
		what   string
		before *ir.Value
		after  *ir.Value
	}
	var pairs []pair
	for i, o := range g0.Outputs {
		pairs = append(pairs, pair{what: fmt.Sprintf("output %d %q", i, o.Name), before: o, after: got.Outputs[i]})
	}
	updated := map[string]*ir.Value{}
	for s, v := range got.StateUpdates {
		updated[s.Name] = v
	}
	for _, s := range g0.States {
		if v0, ok := g0.StateUpdates[s]; ok {
			v1, ok := updated[s.Name]
			if !ok {
				t.Errorf("the rules dropped the update of state %s", s.Name)
				continue
			}
			pairs = append(pairs, pair{what: "update of state " + s.Name, before: v0, after: v1})
		}
	}
	for d := 0; d < n; d++ {
		for _, p := range pairs {
			a, b := want[d][p.before], have[d][p.after]
			if len(a.Data) != len(b.Data) {
				t.Errorf("device %d, %s: %d values before the rules, %d after", d, p.what, len(a.Data), len(b.Data))
				continue
			}
			// scale: the largest finite magnitude; worst: the largest
			// difference, +Inf where only one side is NaN or infinite.
			var scale, worst float64
			at := -1
			for j := range a.Data {
				x, y := float64(a.Data[j]), float64(b.Data[j])
				if !math.IsInf(x, 0) && !math.IsNaN(x) {
					scale = max(scale, math.Abs(x))
				}
				if x == y || math.IsNaN(x) && math.IsNaN(y) {
					continue
				}
				diff := math.Abs(x - y)
				if math.IsNaN(diff) || math.IsInf(x, 0) || math.IsInf(y, 0) {
					diff = math.Inf(1)
				}
				if diff > worst {
					worst, at = diff, j
				}
			}
			if at >= 0 && worst > graphTolerance*scale {
				t.Errorf("device %d, %s: the rewritten graph computes something else: element %d is %g before the rules and %g after (largest magnitude %g; exact math, tolerance %g of it)",
					d, p.what, at, a.Data[at], b.Data[at], scale, graphTolerance)
			}
		}
	}
}

// randomTensor draws value v's contents on device d from a seed of its
// name and d, so that the same name gets the same data in both graphs:
// floats N(0, 1), integers (token ids, cache positions) uniform in [0, 4).
func randomTensor(v *ir.Value, d int) ref.Tensor {
	h := fnv.New64a()
	h.Write([]byte(v.Name))
	rng := rand.New(rand.NewPCG(h.Sum64(), uint64(d)))
	x := ref.NewTensor(v.Type.Shape)
	for j := range x.Data {
		if v.Type.DType.IsFloat() {
			x.Data[j] = float32(rng.NormFloat64())
		} else {
			x.Data[j] = float32(rng.IntN(4))
		}
	}
	return x
}
