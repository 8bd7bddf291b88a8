package nn

import (
	"math"
	"math/rand"
	"sort"
	"strings"
	"testing"

	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/ir/numerics"
	"github.com/tcc-dev/tcc/sim/ref"
)

// The numerics tests evaluate each block's graph with the reference
// evaluator (sim/ref) and compare it with float64 code written from the
// published equations (reference/qwen27b.md) in these test files.

// block is a one-block test graph on a 1xN mesh.
type block struct {
	g      *ir.Graph
	tally  *Tally
	out    *ir.Value
	byName map[string]*ir.Value
}

func buildBlock(t *testing.T, devices int, emit func(c Ctx) *ir.Value) block {
	t.Helper()
	b := ir.NewBuilder("block")
	b.G.Mesh = ir.Mesh{Rows: 1, Cols: devices}
	b.Region("layer", 0)
	c := Ctx{B: b, TP: TP{Devices: devices}, Tally: NewTally(b.G)}
	out := emit(c)
	b.Output(out)
	g, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	bl := block{g: g, tally: c.Tally, out: out, byName: map[string]*ir.Value{}}
	for _, list := range [][]*ir.Value{g.Inputs, g.Weights, g.States} {
		for _, v := range list {
			bl.byName[v.Name] = v
		}
	}
	return bl
}

// partOps returns the ops the block charged to the named part (the first
// part of that name), in program order.
func (bl block) partOps(t *testing.T, name string) []*ir.Op {
	t.Helper()
	ops := bl.g.Ops()
	i := 0
	for _, p := range bl.tally.Parts {
		if p.Name == name {
			return ops[i : i+p.Ops]
		}
		i += p.Ops
	}
	t.Fatalf("block has no part %q", name)
	return nil
}

// names returns the names of bl's declared values, sorted, so that random
// contents are drawn in a fixed order.
func (bl block) names() []string {
	out := make([]string, 0, len(bl.byName))
	for name := range bl.byName {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// whole holds one-device contents by value name.
type whole map[string]ref.Tensor

func randTensor(rng *rand.Rand, shape ir.Shape, mean, std float64) ref.Tensor {
	t := ref.NewTensor(shape)
	for i := range t.Data {
		t.Data[i] = float32(mean + std*rng.NormFloat64())
	}
	return t
}

// envs cuts the whole contents w into one env per device of bl's mesh;
// shareOf maps a weight or state name to its share (inputs are
// replicated).
func (bl block) envs(t *testing.T, w whole, shareOf func(name string) Share) []map[*ir.Value]ref.Tensor {
	t.Helper()
	n := bl.g.Mesh.Devices()
	envs := make([]map[*ir.Value]ref.Tensor, n)
	for d := range envs {
		envs[d] = map[*ir.Value]ref.Tensor{}
		for name, v := range bl.byName {
			src, ok := w[name]
			if !ok {
				t.Fatalf("no contents for %q", name)
			}
			sh := Replicate
			if v.Kind != ir.KindInput {
				sh = shareOf(name)
			}
			part, shape, err := sh.Cut(src.Data, src.Shape, d, n)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if !shape.Equal(v.Type.Shape) {
				t.Fatalf("%s: share %s, declared %s", name, shape, v.Type.Shape)
			}
			envs[d][v] = ref.Tensor{Shape: shape, Data: part}
		}
	}
	return envs
}

// eval runs bl on every device of its mesh with the reference evaluator.
func (bl block) eval(t *testing.T, w whole, shareOf func(string) Share, opts ref.Options) []map[*ir.Value]ref.Tensor {
	t.Helper()
	res, err := ref.EvalMesh(bl.g, bl.envs(t, w, shareOf), opts)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// eval1 runs a one-device block and returns its values.
func (bl block) eval1(t *testing.T, w whole, opts ref.Options) map[*ir.Value]ref.Tensor {
	t.Helper()
	return bl.eval(t, w, func(string) Share { return Replicate }, opts)[0]
}

// stored returns, by name, the float64 contents of bl's declared values
// as the evaluator bound them (rounded through their dtypes with
// StorageFormats): the inputs the float64 equations start from.
func (bl block) stored(res map[*ir.Value]ref.Tensor) map[string][]float64 {
	m := map[string][]float64{}
	for name, v := range bl.byName {
		m[name] = f64(res[v].Data)
	}
	return m
}

// update returns the new value of the named state.
func (bl block) update(res map[*ir.Value]ref.Tensor, state string) ref.Tensor {
	return res[bl.g.StateUpdates[bl.byName[state]]]
}

func f64(x []float32) []float64 {
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v)
	}
	return out
}

func f32(x []float64) []float32 {
	out := make([]float32, len(x))
	for i, v := range x {
		out[i] = float32(v)
	}
	return out
}

// mode is one way of running the reference evaluator with the thresholds
// its results must meet against float64 equations.
type mode struct {
	name string
	opts ref.Options
	// minPCC is the lowest accepted PCC; maxRel the largest accepted
	// numerics.MaxRelErr (0: logged, not asserted).
	minPCC, maxRel float64
}

// modes: the pure-math reference (float32 values, no storage rounding)
// and the reference at the device's formats (bf16 activations, block-float
// weights).
var modes = []mode{
	{name: "exact", opts: ref.ExactOptions(), minPCC: 0.99999, maxRel: 1e-3},
	{name: "bf16", opts: ref.DefaultOptions(), minPCC: 0.999},
}

// compare logs the PCC and max relative error of got against want and
// fails when they miss m's thresholds.
func (m mode) compare(t *testing.T, what string, want []float64, got []float32) {
	t.Helper()
	if len(want) != len(got) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	w := f32(want)
	pcc, rel := numerics.PCC(w, got), numerics.MaxRelErr(w, got)
	t.Logf("%s %s: PCC %.7f, max rel err %.2e (%d values)", m.name, what, pcc, rel, len(want))
	if pcc < m.minPCC {
		t.Errorf("%s %s: PCC %.7f < %g", m.name, what, pcc, m.minPCC)
	}
	if m.maxRel > 0 && rel > m.maxRel {
		t.Errorf("%s %s: max rel err %.2e > %g", m.name, what, rel, m.maxRel)
	}
}

// Float64 helpers for the equations.

func sigmoid(x float64) float64 { return 1 / (1 + math.Exp(-x)) }
func silu(x float64) float64    { return x * sigmoid(x) }

// softplus with beta 1 and threshold 20 (torch.nn.functional.softplus).
func softplus(x float64) float64 {
	if x > 20 {
		return x
	}
	return math.Log1p(math.Exp(x))
}

// vecMat returns x @ W for W [len(x), n] row-major (the IR's [in, out]).
func vecMat(x, w []float64, n int) []float64 {
	out := make([]float64, n)
	for k, xv := range x {
		for j := 0; j < n; j++ {
			out[j] += xv * w[k*n+j]
		}
	}
	return out
}

// rmsRow is x * rsqrt(mean(x^2) + eps).
func rmsRow(x []float64, eps float64) []float64 {
	ss := 0.0
	for _, v := range x {
		ss += v * v
	}
	inv := 1 / math.Sqrt(ss/float64(len(x))+eps)
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = v * inv
	}
	return out
}

// l2Row is x / sqrt(sum(x^2) + eps) (HF's l2norm).
func l2Row(x []float64, eps float64) []float64 {
	ss := 0.0
	for _, v := range x {
		ss += v * v
	}
	inv := 1 / math.Sqrt(ss+eps)
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = v * inv
	}
	return out
}

// shareByName looks a value's share up by the suffix after the block's
// weight prefix "l." or state name "s".
func shareByName(shares map[string]Share) func(string) Share {
	return func(name string) Share {
		key := strings.TrimPrefix(name, "l.")
		if strings.HasPrefix(name, "s.") {
			key = name[1:]
		}
		if s, ok := shares[key]; ok {
			return s
		}
		return Replicate
	}
}

// tpMatches evaluates a block built for one device (Eval) and for n
// devices (EvalMesh) on the same whole contents, in mode m, and checks
// that every device's output matches the one-device output and that every
// updated state matches its share of the one-device update.
func tpMatches(t *testing.T, m mode, one, many block, w whole, shares map[string]Share) {
	t.Helper()
	r1 := one.eval1(t, w, m.opts)
	shareOf := shareByName(shares)
	rn := many.eval(t, w, shareOf, m.opts)
	n := many.g.Mesh.Devices()
	for d := 0; d < n; d++ {
		m.compare(t, "output", f64(r1[one.out].Data), rn[d][many.out].Data)
		for _, s := range many.g.States {
			upd := one.update(r1, s.Name)
			want, _, err := shareOf(s.Name).Cut(upd.Data, upd.Shape, d, n)
			if err != nil {
				t.Fatal(err)
			}
			m.compare(t, s.Name, f64(want), rn[d][many.g.StateUpdates[s]].Data)
		}
	}
}
