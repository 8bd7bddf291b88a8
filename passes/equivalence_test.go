package passes_test

import (
	"fmt"
	"hash/fnv"
	"math"
	"math/rand"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/ir/longtest"
	"github.com/tcc-dev/tcc/models"
	"github.com/tcc-dev/tcc/models/qwen27b"
	"github.com/tcc-dev/tcc/models/tinymlp"
	"github.com/tcc-dev/tcc/passes"
	"github.com/tcc-dev/tcc/passes/rewrite"
	"github.com/tcc-dev/tcc/sim/ref"
	"golang.org/x/tools/txtar"
)

// This file holds the cross-cutting equivalence harness shared by
// TestEveryRuleEquivalent, TestDisableEachRule, TestFusedMatchesUnfused
// and FuzzPipeline: graph sources (tiny-mlp, the small Qwen config, the
// rule families' test data), deterministic data keyed by value name (so an
// unfused and a fused graph, or a prefill and a decode graph, get the same
// weights and states), whole-graph evaluation with sim/ref, and agreement
// figures (PCC and maximum relative error).

// Thresholds.
const (
	// opPCC is the agreement a fused op must reach with its decomposition
	// at the device's storage formats (ref.DefaultOptions).
	opPCC = 0.9999
	// ruleGraphPCC is the whole-graph agreement, unfused vs rewritten by one
	// rule alone, required of a rule that emits no fused op.
	ruleGraphPCC = 0.9999
	// modelPCC is the whole-model agreement of logits and states, unfused
	// vs fused, at storage formats (roundings move between layers).
	modelPCC = 0.999
)

// smallConfig is the small Qwen3.5-family config of models/qwen27b.
const smallConfig = "../models/qwen27b/testdata/small.json"

// ---------------------------------------------------------------------------
// Agreement figures.

// agreement compares a reference tensor (want) with another (got).
type agreement struct {
	// PCC is the Pearson correlation of the two, over positions where both
	// are finite; 1 for two identical constant tensors, NaN when the two
	// disagree on which positions are non-finite.
	PCC float64
	// MaxRel is the largest absolute difference relative to the largest
	// magnitude of want (0 when both are all zero).
	MaxRel float64
}

func (a agreement) String() string { return fmt.Sprintf("PCC %.7f, max rel err %.3g", a.PCC, a.MaxRel) }

// ok reports a.PCC >= min, or a max relative error of at most 1e-5: a
// near-constant output (sub(x, add_scalar(x, c)) is -c up to rounding) has
// a meaningless correlation but agrees when its values do (false for NaN).
func (a agreement) ok(min float64) bool { return a.PCC >= min || a.MaxRel <= 1e-5 }

// compare computes the agreement of got with want (equal lengths, else
// NaN and +Inf).
func compare(want, got []float32) agreement {
	if len(want) != len(got) {
		return agreement{PCC: math.NaN(), MaxRel: math.Inf(1)}
	}
	var n int
	var sw, sg float64
	for i := range want {
		w, g := float64(want[i]), float64(got[i])
		fw, fg := !math.IsNaN(w) && !math.IsInf(w, 0), !math.IsNaN(g) && !math.IsInf(g, 0)
		if fw != fg || (!fw && !(math.IsNaN(w) && math.IsNaN(g)) && w != g) {
			return agreement{PCC: math.NaN(), MaxRel: math.Inf(1)}
		}
		if fw {
			n++
			sw += w
			sg += g
		}
	}
	if n == 0 {
		return agreement{PCC: 1}
	}
	mw, mg := sw/float64(n), sg/float64(n)
	var cov, vw, vg, scale, worst float64
	for i := range want {
		w, g := float64(want[i]), float64(got[i])
		if math.IsNaN(w) || math.IsInf(w, 0) {
			continue
		}
		cov += (w - mw) * (g - mg)
		vw += (w - mw) * (w - mw)
		vg += (g - mg) * (g - mg)
		scale = max(scale, math.Abs(w))
		worst = max(worst, math.Abs(w-g))
	}
	a := agreement{}
	switch {
	case worst == 0:
		a.MaxRel = 0
	case scale == 0:
		a.MaxRel = math.Inf(1)
	default:
		a.MaxRel = worst / scale
	}
	switch {
	case vw > 0 && vg > 0:
		a.PCC = cov / math.Sqrt(vw*vg)
	case a.MaxRel <= 1e-6:
		a.PCC = 1 // constant (or identical) tensors: correlation is undefined
	default:
		a.PCC = 0
	}
	return a
}

// merge keeps the lowest PCC (NaN wins) and the highest relative error.
func (a *agreement) merge(b agreement) {
	if math.IsNaN(b.PCC) || b.PCC < a.PCC {
		a.PCC = b.PCC
	}
	a.MaxRel = max(a.MaxRel, b.MaxRel)
}

func perfect() agreement { return agreement{PCC: 1} }

// ---------------------------------------------------------------------------
// Data keyed by name.

// named is one device's declared values (inputs, weights, states) by name.
type named map[string]ref.Tensor

// seedFor derives a per-value seed, so a value's contents do not depend on
// the order in which values are drawn.
func seedFor(seed int64, parts ...any) int64 {
	h := fnv.New64a()
	fmt.Fprint(h, parts...)
	return seed ^ int64(h.Sum64()>>1)
}

// bind turns per-device named data into EvalMesh envs for g; every
// declared value of g must be present.
func bind(g *ir.Graph, data []named) ([]map[*ir.Value]ref.Tensor, error) {
	if len(data) != g.Mesh.Devices() {
		return nil, fmt.Errorf("%d device envs for mesh %s", len(data), g.Mesh)
	}
	envs := make([]map[*ir.Value]ref.Tensor, len(data))
	for d, dn := range data {
		envs[d] = map[*ir.Value]ref.Tensor{}
		for _, list := range [][]*ir.Value{g.Inputs, g.Weights, g.States} {
			for _, v := range list {
				t, ok := dn[v.Name]
				if !ok {
					return nil, fmt.Errorf("device %d: no data for %s %q", d, v.Kind, v.Name)
				}
				envs[d][v] = t
			}
		}
	}
	return envs, nil
}

// stepResult is what one evaluated step of a graph produced, per device.
type stepResult struct {
	vals    []map[*ir.Value]ref.Tensor
	outputs [][]ref.Tensor // [device][output]
	states  []named        // [device] state name -> new value
}

// evalStep evaluates g on every device of its mesh with the named data.
func evalStep(g *ir.Graph, data []named, opts ref.Options) (*stepResult, error) {
	envs, err := bind(g, data)
	if err != nil {
		return nil, err
	}
	vals, err := evalMesh(g, envs, opts)
	if err != nil {
		return nil, err
	}
	r := &stepResult{vals: vals}
	for _, dv := range vals {
		var outs []ref.Tensor
		for _, o := range g.Outputs {
			outs = append(outs, dv[o])
		}
		st := named{}
		for s, v := range g.StateUpdates {
			st[s.Name] = dv[v]
		}
		r.outputs = append(r.outputs, outs)
		r.states = append(r.states, st)
	}
	return r, nil
}

// fusedCollective reports whether op is a collective that ref.EvalMesh's
// collective table does not hold (a fused one such as all_reduce_add): an
// op with a devices attribute above 1 that is not ref.IsCollective.
func fusedCollective(op *ir.Op) bool {
	n, _ := op.Attrs["devices"].(int)
	return n > 1 && !ref.IsCollective(op.Kind)
}

// evalMesh is ref.EvalMesh, except for graphs holding fused collectives,
// which it evaluates in lockstep itself with the reference's public entry
// points: ref.FusedMeshOp for fused collectives, ref.EvalMesh on a one-op
// graph for plain collectives, ref.EvalOp for everything else. Values are
// rounded on entry as ref.EvalMesh does.
func evalMesh(g *ir.Graph, envs []map[*ir.Value]ref.Tensor, opts ref.Options) ([]map[*ir.Value]ref.Tensor, error) {
	if !slices.ContainsFunc(g.Ops(), fusedCollective) {
		return ref.EvalMesh(g, envs, opts)
	}
	n, cols := g.Mesh.Devices(), g.Mesh.Cols
	if len(envs) != n {
		return nil, fmt.Errorf("graph %q: %d envs for mesh %s", g.Name, len(envs), g.Mesh)
	}
	vals := make([]map[*ir.Value]ref.Tensor, n)
	for d, env := range envs {
		vals[d] = map[*ir.Value]ref.Tensor{}
		for v, t := range env {
			if opts.StorageFormats {
				st, err := ref.Store(v.Type.DType, t)
				if err != nil {
					return nil, fmt.Errorf("device %d: %s %q: %w", d, v.Kind, v.Name, err)
				}
				t = st
			}
			vals[d][v] = t.Clone()
		}
	}
	operands := func(op *ir.Op, d int) []ref.Tensor {
		args := make([]ref.Tensor, len(op.Operands))
		for i, v := range op.Operands {
			args[i] = vals[d][v]
		}
		return args
	}
	for _, op := range g.Ops() {
		switch {
		case fusedCollective(op):
			for row := range g.Mesh.Rows {
				args := make([][]ref.Tensor, cols)
				for c := range args {
					args[c] = operands(op, row*cols+c)
				}
				outs, err := ref.FusedMeshOp(op, args, opts)
				if err != nil {
					return nil, fmt.Errorf("graph %q: %w", g.Name, err)
				}
				for c, res := range outs {
					for i, r := range op.Results {
						vals[row*cols+c][r] = res[i]
					}
				}
			}
		case ref.IsCollective(op.Kind):
			b := ir.NewBuilder(op.Name())
			b.G.Mesh = g.Mesh
			var ins []*ir.Value
			for i, v := range op.Operands {
				ins = append(ins, b.Input(fmt.Sprintf("x%d", i), v.Type))
			}
			b.Output(b.Emit(op.Kind, ins, op.Attrs)...)
			one, err := b.Finish()
			if err != nil {
				return nil, fmt.Errorf("graph %q: %s: %w", g.Name, op.Where(), err)
			}
			oenvs := make([]map[*ir.Value]ref.Tensor, n)
			for d := range oenvs {
				oenvs[d] = map[*ir.Value]ref.Tensor{}
				for i, v := range ins {
					oenvs[d][v] = vals[d][op.Operands[i]]
				}
			}
			outs, err := ref.EvalMesh(one, oenvs, opts)
			if err != nil {
				return nil, fmt.Errorf("graph %q: %s: %w", g.Name, op.Where(), err)
			}
			for d := range outs {
				for i, r := range op.Results {
					vals[d][r] = outs[d][one.Outputs[i]]
				}
			}
		default:
			for d := range vals {
				outs, err := ref.EvalOp(op, operands(op, d), opts)
				if err != nil {
					return nil, fmt.Errorf("graph %q: device %d: %w", g.Name, d, err)
				}
				for i, r := range op.Results {
					vals[d][r] = outs[i]
				}
			}
		}
	}
	return vals, nil
}

// compareSteps compares every output and state update of two evaluations
// of graphs with the same interface, on every device, and returns the
// worst agreement per output ("output 0", ...) and state (by name).
func compareSteps(want, got *stepResult) (map[string]agreement, error) {
	res := map[string]agreement{}
	if len(want.outputs) != len(got.outputs) {
		return nil, fmt.Errorf("%d vs %d devices", len(want.outputs), len(got.outputs))
	}
	for d := range want.outputs {
		if len(want.outputs[d]) != len(got.outputs[d]) {
			return nil, fmt.Errorf("%d vs %d outputs", len(want.outputs[d]), len(got.outputs[d]))
		}
		for i := range want.outputs[d] {
			key := fmt.Sprintf("output %d", i)
			a, ok := res[key]
			if !ok {
				a = perfect()
			}
			a.merge(compare(want.outputs[d][i].Data, got.outputs[d][i].Data))
			res[key] = a
		}
		if len(want.states[d]) != len(got.states[d]) {
			return nil, fmt.Errorf("%d vs %d state updates", len(want.states[d]), len(got.states[d]))
		}
		for name, w := range want.states[d] {
			gs, ok := got.states[d][name]
			if !ok {
				return nil, fmt.Errorf("state %q is updated by one graph only", name)
			}
			a, ok := res[name]
			if !ok {
				a = perfect()
			}
			a.merge(compare(w.Data, gs.Data))
			res[name] = a
		}
	}
	return res, nil
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// ---------------------------------------------------------------------------
// Graph sources.

// source is a graph the pipeline is run on: build returns a fresh unfused
// graph (the same one each call) and data its per-device declared values.
type source struct {
	name  string
	build func() (*ir.Graph, error)
	data  func(g *ir.Graph) ([]named, error)
}

func tinyMLPSizes() tinymlp.Sizes {
	return tinymlp.Sizes{Layers: 2, Hidden: 128, Intermediate: 256, Vocab: 512, Batch: 1}
}

func tinyMLPSource(s tinymlp.Sizes) source {
	return source{
		name:  "tiny-mlp",
		build: func() (*ir.Graph, error) { return tinymlp.BuildGraph(s), nil },
		data: func(g *ir.Graph) ([]named, error) {
			n := named{}
			for _, list := range [][]*ir.Value{g.Weights, g.States} {
				for _, v := range list {
					rng := rand.New(rand.NewSource(seedFor(11, v.Name)))
					n[v.Name] = ref.Tensor{Shape: v.Type.Shape.Clone(), Data: tinymlp.Model{}.InitWeight(v, rng)}
				}
			}
			for _, v := range g.Inputs {
				t := ref.NewTensor(v.Type.Shape)
				for i := range t.Data {
					t.Data[i] = float32((7 + 131*i) % s.Vocab)
				}
				n[v.Name] = t
			}
			return []named{n}, nil
		},
	}
}

// qwenOptions returns the small config's options: a 32-token cache,
// batch users, decode or prefill of seq tokens.
func qwenOptions(mode qwen27b.Mode, seq, batch int) (qwen27b.Options, error) {
	return qwen27b.OptionsFrom(models.Args{
		"config": smallConfig, "batch": fmt.Sprint(batch), "max-seq": "32",
		"mode": string(mode), "seq": fmt.Sprint(seq),
	})
}

func meshOf(n int) ir.Mesh { return ir.Mesh{Rows: 1, Cols: n} }

// qwenWeights draws the whole (one-device) weights and initial states of
// the small config with qwen27b's InitWeight, one seeded stream per name,
// and cuts them per device with ShareOf; the result holds no inputs.
func qwenWeights(o qwen27b.Options, devices int, seed int64) ([]named, error) {
	one, _, err := qwen27b.BuildGraph(o, meshOf(1))
	if err != nil {
		return nil, err
	}
	out := make([]named, devices)
	for d := range out {
		out[d] = named{}
	}
	for _, list := range [][]*ir.Value{one.Weights, one.States} {
		for _, v := range list {
			whole := qwen27b.Model{}.InitWeight(v, rand.New(rand.NewSource(seedFor(seed, v.Name))))
			sh, err := qwen27b.ShareOf(o.Config, v.Name, devices)
			if err != nil {
				return nil, err
			}
			for d := range out {
				part, shape, err := sh.Cut(whole, v.Type.Shape, d, devices)
				if err != nil {
					return nil, fmt.Errorf("%s: %w", v.Name, err)
				}
				out[d][v.Name] = ref.Tensor{Shape: shape, Data: part}
			}
		}
	}
	return out, nil
}

// qwenInputs sets one step's inputs in every device's data: tokens[b][s]
// (decode: s = 0 only), the first position pos and the rotary tables.
func qwenInputs(o qwen27b.Options, data []named, tokens [][]int, pos int) {
	c := o.Config
	B, S := len(tokens), len(tokens[0])
	var cos, sin []float32
	var tok, rope ir.Shape
	posN := B // decode: a position per user
	if o.Mode == qwen27b.Prefill {
		posN = 1
		cos, sin = qwen27b.RopePrefillTables(c.RotaryDim(), c.RopeTheta, pos, S)
		tok, rope = ir.Shape{B, S}, ir.Shape{S, 1, c.RotaryDim()}
	} else {
		cos, sin = qwen27b.RopeTables(c.RotaryDim(), c.RopeTheta, pos, B)
		tok, rope = ir.Shape{B}, ir.Shape{B, c.RotaryDim()}
	}
	tt := ref.NewTensor(tok)
	for b, row := range tokens {
		for s, id := range row {
			tt.Data[b*S+s] = float32(id)
		}
	}
	for _, n := range data {
		n["tokens"] = tt.Clone()
		pt := ref.NewTensor(ir.Shape{posN})
		for i := range pt.Data {
			pt.Data[i] = float32(pos)
		}
		n["pos"] = pt
		n["rope.cos"] = ref.Tensor{Shape: rope.Clone(), Data: append([]float32(nil), cos...)}
		n["rope.sin"] = ref.Tensor{Shape: rope.Clone(), Data: append([]float32(nil), sin...)}
	}
}

// qwenSource is the small config on a 1xdevices mesh with batch users: a
// decode step at position 3 or a prefill of seq tokens at position 0.
func qwenSource(mode qwen27b.Mode, seq, batch, devices int) source {
	name := fmt.Sprintf("qwen-small/%s/b%d/1x%d", mode, batch, devices)
	o, oerr := qwenOptions(mode, seq, batch)
	return source{
		name: name,
		build: func() (*ir.Graph, error) {
			if oerr != nil {
				return nil, oerr
			}
			g, _, err := qwen27b.BuildGraph(o, meshOf(devices))
			return g, err
		},
		data: func(g *ir.Graph) ([]named, error) {
			data, err := qwenWeights(o, devices, 5)
			if err != nil {
				return nil, err
			}
			tokens := make([][]int, batch)
			for u := range tokens {
				tokens[u] = make([]int, seq)
				for s := range tokens[u] {
					tokens[u][s] = (17 + 389*s + 1021*u) % o.Config.VocabSize
				}
			}
			pos := 3
			if mode == qwen27b.Prefill {
				pos = 0
			}
			qwenInputs(o, data, tokens, pos)
			return data, nil
		},
	}
}

// testdataSources returns one source per input section of the rule
// families' test data (testdata/*/*.txt).
func testdataSources(t *testing.T) []source {
	t.Helper()
	files, err := filepath.Glob("testdata/*/*.txt")
	if err != nil {
		t.Fatal(err)
	}
	var out []source
	for _, path := range files {
		a, err := txtar.ParseFile(path)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		var input string
		for _, f := range a.Files {
			if f.Name == "input" {
				input = string(f.Data)
			}
		}
		if input == "" {
			continue
		}
		name := strings.TrimSuffix(strings.TrimPrefix(filepath.ToSlash(path), "testdata/"), ".txt")
		out = append(out, source{
			name:  "testdata/" + name,
			build: func() (*ir.Graph, error) { return ir.Parse(input) },
			data:  func(g *ir.Graph) ([]named, error) { return genericData(g, seedFor(3, name)), nil },
		})
	}
	return out
}

// genericData draws data for a graph without a model: float inputs
// N(0, 1), integer inputs small non-negative integers (valid token ids and
// cache positions for any table or cache of at least 8 rows), the same on
// every device; weights and states by qwen27b's InitWeight (name-based
// scales, N(0, 1/fan-in) for matrices), different per device.
func genericData(g *ir.Graph, seed int64) []named {
	n := g.Mesh.Devices()
	data := make([]named, n)
	for d := range data {
		data[d] = named{}
	}
	for _, v := range g.Inputs {
		rng := rand.New(rand.NewSource(seedFor(seed, "input", v.Name)))
		t := ref.NewTensor(v.Type.Shape)
		for i := range t.Data {
			if v.Type.DType.IsFloat() {
				t.Data[i] = float32(rng.NormFloat64())
			} else {
				t.Data[i] = float32(rng.Intn(4))
			}
		}
		for d := range data {
			data[d][v.Name] = t.Clone()
		}
	}
	for _, list := range [][]*ir.Value{g.Weights, g.States} {
		for _, v := range list {
			for d := range data {
				rng := rand.New(rand.NewSource(seedFor(seed, v.Name, d)))
				data[d][v.Name] = ref.Tensor{Shape: v.Type.Shape.Clone(), Data: qwen27b.Model{}.InitWeight(v, rng)}
			}
		}
	}
	return data
}

// ---------------------------------------------------------------------------
// Fused op equivalence.

// opCheck is the outcome of one fused op checked against its decomposition.
type opCheck struct {
	rule   string
	where  string // op and region
	source string
	agree  agreement
	exact  agreement // the same in exact math, computed when agree fails
	err    error
	warn   string // a problem outside the rule that did not stop the check
}

// withoutDist returns a deep copy of op and its decomposition (nested
// ones included) in which every value is replicated.
func withoutDist(op *ir.Op) *ir.Op {
	vals := map[*ir.Value]*ir.Value{}
	val := func(v *ir.Value) *ir.Value {
		if v == nil {
			return nil
		}
		if c, ok := vals[v]; ok {
			return c
		}
		c := *v
		c.Type.Dist = ir.Replicated
		vals[v] = &c
		return &c
	}
	var clone func(o *ir.Op) *ir.Op
	clone = func(o *ir.Op) *ir.Op {
		c := *o
		c.Operands, c.Results = nil, nil
		for _, v := range o.Operands {
			c.Operands = append(c.Operands, val(v))
		}
		for _, r := range o.Results {
			cr := val(r)
			cr.Def = &c
			c.Results = append(c.Results, cr)
		}
		if d := o.Decomp; d != nil {
			nd := &ir.Decomposition{}
			for _, v := range d.Inputs {
				nd.Inputs = append(nd.Inputs, val(v))
			}
			for _, inner := range d.Ops {
				nd.Ops = append(nd.Ops, clone(inner))
			}
			for _, v := range d.Outputs {
				nd.Outputs = append(nd.Outputs, val(v))
			}
			c.Decomp = nd
		}
		return &c
	}
	return clone(op)
}

// checkFused checks op (a fused op a rule created, with a decomposition)
// on the per-device operand values args[d] and then, recursively, every
// fused op inside its decomposition on the values the decomposition
// computes there. The pair graphs get mesh so collectives evaluate.
func checkFused(op *ir.Op, mesh ir.Mesh, args [][]ref.Tensor, src string, report func(opCheck)) {
	c := opCheck{rule: op.Rule, where: op.Where(), source: src}
	fused, dec, err := rewrite.EquivalencePair(op)
	if err != nil {
		// Distributions do not change one device's arithmetic; retry
		// without them so a distribution the pair's re-inferred types
		// cannot carry (see the warning) does not hide the numbers.
		if f2, d2, err2 := rewrite.EquivalencePair(withoutDist(op)); err2 == nil {
			c.warn = fmt.Sprintf("rewrite.EquivalencePair fails (%v); checked with every distribution dropped", err)
			fused, dec, err = f2, d2, nil
		}
	}
	if err != nil {
		c.err = err
		report(c)
		return
	}
	fused.Mesh, dec.Mesh = mesh, mesh
	run := func(g *ir.Graph, opts ref.Options) ([]map[*ir.Value]ref.Tensor, error) {
		envs := make([]map[*ir.Value]ref.Tensor, len(args))
		for d := range envs {
			envs[d] = map[*ir.Value]ref.Tensor{}
			for i, v := range g.Inputs {
				envs[d][v] = args[d][i]
			}
		}
		return evalMesh(g, envs, opts)
	}
	agree := func(opts ref.Options) (agreement, []map[*ir.Value]ref.Tensor, error) {
		fv, err := run(fused, opts)
		if err != nil {
			return agreement{}, nil, fmt.Errorf("fused: %w", err)
		}
		dv, err := run(dec, opts)
		if err != nil {
			return agreement{}, nil, fmt.Errorf("decomposed: %w", err)
		}
		a := perfect()
		for d := range args {
			for k := range fused.Outputs {
				a.merge(compare(dv[d][dec.Outputs[k]].Data, fv[d][fused.Outputs[k]].Data))
			}
		}
		return a, dv, nil
	}
	a, dv, err := agree(composedOptions())
	c.agree, c.err = a, err
	if err == nil && !a.ok(opPCC) {
		c.exact, _, _ = agree(ref.ExactOptions())
	}
	report(c)
	if err != nil {
		return
	}
	decOps := dec.Ops()
	for k, inner := range op.Decomp.Ops {
		if inner.Rule == "" || inner.Decomp == nil || !inner.Info().Fused {
			continue
		}
		if k >= len(decOps) || decOps[k].Kind != inner.Kind {
			report(opCheck{rule: inner.Rule, where: inner.Where() + " inside " + op.Where(), source: src,
				err: fmt.Errorf("decomposed graph does not follow the decomposition's op order")})
			continue
		}
		inArgs := make([][]ref.Tensor, len(args))
		for d := range args {
			for _, v := range decOps[k].Operands {
				inArgs[d] = append(inArgs[d], dv[d][v])
			}
		}
		checkFused(inner, mesh, inArgs, src+" (inside "+op.Rule+")", report)
	}
}

// ---------------------------------------------------------------------------
// TestEveryRuleEquivalent.

// ruleTally collects one rule's coverage over all sources.
type ruleTally struct {
	firings    map[string]int // source -> firings
	ops        int            // fused ops checked
	nested     int            // of which inside another fused op's decomposition
	agree      agreement      // worst over its fused ops
	failures   []opCheck
	warnings   map[string]int       // warning text -> fused ops
	graphAgree map[string]agreement // source -> whole graph, the rule alone (rules without fused ops)
	graphErr   []string
}

// TestEveryRuleEquivalent checks every registered rule numerically,
// without per-rule code, so a new rule is covered as soon as it fires:
//
//   - the default pipeline runs on tiny-mlp, the small Qwen config (decode
//     and prefill on meshes 1x1 and 1x2, batch 1; decode at batch 2 on
//     1x2) and every test data input of the rule families;
//   - each source is evaluated with sim/ref at storage formats, unfused and
//     fused, on the same data; the whole-graph outputs and state updates
//     must agree: PCC >= 0.9999 for test data graphs; for the models, where
//     roundings move across layers, PCC >= 0.999 on logits and states and
//     equal greedy tokens unless near-tied;
//   - every fused op a rule created (op.Rule), including fused ops nested
//     in another fused op's decomposition, is evaluated against its
//     decomposition (rewrite.EquivalencePair) on the operand values the
//     fused graph actually computed there: PCC >= 0.9999 at storage formats
//     on every result and device;
//   - a rule that fired but created no fused op (a pure rewrite) is run
//     alone on each source where it fired, and the whole graph must agree
//     with the unfused one (PCC >= 0.9999);
//   - a registered rule that fires nowhere fails: add test data for it.
func TestEveryRuleEquivalent(t *testing.T) {
	longtest.Skip(t, "every rule checked numerically on every model source (~45 CPU-s)")
	t.Parallel()
	sources := []source{
		tinyMLPSource(tinyMLPSizes()),
		qwenSource(qwen27b.Decode, 1, 1, 1),
		qwenSource(qwen27b.Decode, 1, 1, 2),
		qwenSource(qwen27b.Decode, 1, 2, 2),
		qwenSource(qwen27b.Prefill, 6, 1, 1),
		qwenSource(qwen27b.Prefill, 6, 1, 2),
	}
	sources = append(sources, testdataSources(t)...)

	var mu sync.Mutex
	tally := map[string]*ruleTally{}
	get := func(rule string) *ruleTally {
		r, ok := tally[rule]
		if !ok {
			r = &ruleTally{firings: map[string]int{}, agree: perfect(), graphAgree: map[string]agreement{}, warnings: map[string]int{}}
			tally[rule] = r
		}
		return r
	}
	bases := map[string]source{} // by name, for the single-rule graph checks
	sourceFailed := false

	t.Run("sources", func(t *testing.T) {
		for _, src := range sources {
			t.Run(src.name, func(t *testing.T) {
				t.Parallel()
				rep, err := runSource(src, passes.Options{})
				if err != nil {
					mu.Lock()
					sourceFailed = true
					mu.Unlock()
					t.Fatal(err)
				}
				if strings.HasPrefix(src.name, "testdata/") {
					for _, k := range sortedKeys(rep.whole) {
						if !rep.whole[k].ok(ruleGraphPCC) {
							t.Errorf("whole graph, %s: unfused vs fused %s, want PCC >= %g", k, rep.whole[k], ruleGraphPCC)
						}
					}
				} else {
					checkModelStep(t, "whole graph", rep.want, rep.got) // logits, states, greedy tokens
				}
				t.Logf("%d -> %d ops; whole graph worst: %s", rep.g0.NumOps(), rep.g1.NumOps(), worstOf(rep.whole))
				mu.Lock()
				defer mu.Unlock()
				bases[src.name] = src
				for _, f := range rep.res.Rewrites.Firings() {
					get(f.Rule).firings[src.name] += f.Count
				}
				for _, c := range rep.checks {
					r := get(c.rule)
					r.ops++
					if c.warn != "" {
						r.warnings[c.source+": "+opIDs.ReplaceAllString(c.warn, "${1}N")]++
					}
					if strings.Contains(c.source, "(inside ") {
						r.nested++
					}
					if c.err != nil || !c.agree.ok(opPCC) {
						r.failures = append(r.failures, c)
						continue
					}
					r.agree.merge(c.agree)
				}
			})
		}
	})

	// Rules that fired without leaving a fused op: whole-graph check with
	// the rule alone.
	t.Run("pure-rewrites", func(t *testing.T) {
		for _, rule := range passes.Rules() {
			r := tally[rule.Name]
			if r == nil || r.ops > 0 || len(r.firings) == 0 {
				continue
			}
			for _, srcName := range sortedKeys(r.firings) {
				rep, err := runSource(bases[srcName], passes.Options{Rules: []*rewrite.Rule{rule}})
				if err != nil {
					r.graphErr = append(r.graphErr, fmt.Sprintf("%s: %v", srcName, err))
					continue
				}
				if rep.res.Rewrites.Total(rule.Name) == 0 {
					continue // fires only after other rules; covered by the whole-graph check of the source
				}
				r.graphAgree[srcName] = worstOf(rep.whole)
			}
		}
	})

	// Every registered rule, and the fuse-boundaries pass's rewrite (judged
	// like a rule: its fused ops carry its name).
	type judged struct{ family, rule string }
	var judge []judged
	for _, fam := range passes.Families() {
		for _, rule := range passes.FamilyRules(fam) {
			judge = append(judge, judged{fam, rule.Name})
		}
	}
	judge = append(judge, judged{"fuse-boundaries", passes.BoundaryRule})
	for _, j := range judge {
		fam, rule := j.family, struct{ Name string }{j.rule}
		{
			t.Run(fam+"/"+rule.Name, func(t *testing.T) {
				r := tally[rule.Name]
				if (r == nil || len(r.firings) == 0) && sourceFailed {
					t.Skipf("not judged: a source failed (see sources/...)")
				}
				if r == nil || len(r.firings) == 0 {
					t.Fatalf("rule %s (family %s) fires on no source (tiny-mlp, qwen small decode and prefill on 1x1/1x2, testdata/*/*.txt): add a test data case where it fires", rule.Name, fam)
				}
				var where []string
				for _, s := range sortedKeys(r.firings) {
					where = append(where, fmt.Sprintf("%s=%d", s, r.firings[s]))
				}
				t.Logf("fired: %s", strings.Join(where, ", "))
				for _, c := range r.failures {
					if c.err != nil {
						t.Errorf("%s (%s): %v", c.where, c.source, c.err)
						continue
					}
					t.Errorf("%s (%s): fused vs decomposed %s at storage formats (exact math: %s), want PCC >= %g",
						c.where, c.source, c.agree, c.exact, opPCC)
				}
				for _, w := range sortedKeys(r.warnings) {
					t.Logf("WARNING (%d fused ops): %s", r.warnings[w], w)
				}
				if r.ops > 0 {
					t.Logf("%d fused ops (%d nested in another fused op) checked against their decompositions at storage formats; worst %s", r.ops, r.nested, r.agree)
					return
				}
				for _, e := range r.graphErr {
					t.Errorf("rule alone: %s", e)
				}
				if len(r.graphAgree) == 0 && len(r.graphErr) == 0 {
					t.Logf("creates no fused op and fires only after other rules; covered by the whole-graph checks of %s", strings.Join(sortedKeys(r.firings), ", "))
					return
				}
				for _, s := range sortedKeys(r.graphAgree) {
					a := r.graphAgree[s]
					if !a.ok(ruleGraphPCC) {
						t.Errorf("%s, rule alone, whole graph unfused vs rewritten: %s, want PCC >= %g", s, a, ruleGraphPCC)
					} else {
						t.Logf("%s, rule alone, whole graph: %s", s, a)
					}
				}
			})
		}
	}
}

// sourceReport is one source run through a pipeline and evaluated.
type sourceReport struct {
	g0, g1    *ir.Graph // unfused, after the pipeline
	res       *passes.Result
	data      []named
	want, got *stepResult          // g0 and g1 evaluated at storage formats
	whole     map[string]agreement // per output and state update
	checks    []opCheck            // every fused op created by a rule, nested ones included
}

// runSource builds src twice, runs the pipeline with opts on one copy,
// evaluates both at storage formats on the same data, compares them and
// checks every fused op a rule created against its decomposition on the
// operand values the fused graph computed.
func runSource(src source, opts passes.Options) (*sourceReport, error) {
	r := &sourceReport{}
	var err error
	if r.g0, err = src.build(); err != nil {
		return nil, err
	}
	if r.g1, err = src.build(); err != nil {
		return nil, err
	}
	if r.res, err = passes.Run(r.g1, opts); err != nil {
		return nil, fmt.Errorf("pipeline: %w", err)
	}
	if r.data, err = src.data(r.g0); err != nil {
		return nil, err
	}
	if r.want, err = evalStep(r.g0, r.data, composedOptions()); err != nil {
		return nil, fmt.Errorf("unfused: %w", err)
	}
	if r.got, err = evalStep(r.g1, r.data, composedOptions()); err != nil {
		return nil, fmt.Errorf("fused: %w", err)
	}
	if r.whole, err = compareSteps(r.want, r.got); err != nil {
		return nil, err
	}
	for _, op := range r.g1.Ops() {
		if op.Rule == "" || op.Decomp == nil || !op.Info().Fused {
			continue
		}
		args := make([][]ref.Tensor, len(r.got.vals))
		for d := range args {
			for _, v := range op.Operands {
				args[d] = append(args[d], r.got.vals[d][v])
			}
		}
		checkFused(op, r.g1.Mesh, args, src.name, func(c opCheck) { r.checks = append(r.checks, c) })
	}
	return r, nil
}

// opIDs matches value and op IDs in messages, to merge warnings that
// differ only there.
var opIDs = regexp.MustCompile(`(%|layer )[0-9]+`)

// worstOf is the lowest PCC and highest relative error of a comparison.
func worstOf(m map[string]agreement) agreement {
	w := perfect()
	for _, a := range m {
		w.merge(a)
	}
	return w
}

// wrongOffsetRMSNormMatmul is a deliberately wrong rule for the harness's
// own test: it matches a matmul reading a written-out RMSNorm with a (1 + w)
// weight but builds the fused rmsnorm_matmul with the plain weight (offset
// 0). On tiny-mlp it fires once, in the head (a layer's norm has two
// readers, the gate and up projections).
func wrongOffsetRMSNormMatmul() *rewrite.Rule {
	x := rewrite.Var("x")
	normed := rewrite.Op(ir.OpMul, x, rewrite.Op(ir.OpRsqrt, rewrite.Op(ir.OpAddScalar, rewrite.Op(ir.OpMean, rewrite.Op(ir.OpSquare, x))).As("eps")))
	norm := rewrite.Op(ir.OpMul, normed, rewrite.Op(ir.OpAddScalar, rewrite.Var("wn")))
	return &rewrite.Rule{
		Name:    "WrongOffsetRMSNormMatmul",
		Rewrite: "matmul(mul(mul(x, rsqrt(add_scalar(mean(square(x)), eps))), add_scalar(wn, 1)), w) => rmsnorm_matmul(x, wn, w) {offset = 0}",
		Pattern: rewrite.Op(ir.OpMatmul, norm, rewrite.Var("w")),
		Where:   func(m *rewrite.Match) bool { return m.Value("wn").Kind == ir.KindWeight },
		Build: func(b *rewrite.Builder, m *rewrite.Match) ([]*ir.Value, error) {
			v, err := b.Emit1(ir.OpRMSNormMatmul, []*ir.Value{m.Value("x"), m.Value("wn"), m.Value("w")}, ir.Attrs{"eps": m.Op("eps").Float("value"), "offset": 0.0})
			return []*ir.Value{v}, err
		},
	}
}

// TestHarnessCatchesWrongRule checks that the harness can fail: a rule
// that drops the (1 + w) offset must fail the fused-op check and the
// whole-graph comparison, while the agreement figures are right on hand
// values.
func TestHarnessCatchesWrongRule(t *testing.T) {
	rep, err := runSource(tinyMLPSource(tinyMLPSizes()), passes.Options{Rules: []*rewrite.Rule{wrongOffsetRMSNormMatmul()}})
	if err != nil {
		t.Fatal(err)
	}
	if n := rep.res.Rewrites.Total("WrongOffsetRMSNormMatmul"); n != 1 {
		t.Fatalf("WrongOffsetRMSNormMatmul fired %d times on tiny-mlp, want 1 (the head)", n)
	}
	if len(rep.checks) != 1 {
		t.Fatalf("%d fused ops checked, want 1", len(rep.checks))
	}
	for _, c := range rep.checks {
		if c.err != nil || c.rule != "WrongOffsetRMSNormMatmul" || c.agree.ok(opPCC) {
			t.Errorf("%s: rule %q, %s, err %v: want a PCC failure of WrongOffsetRMSNormMatmul", c.where, c.rule, c.agree, c.err)
		}
	}
	if w := worstOf(rep.whole); w.ok(modelPCC) {
		t.Errorf("whole graph with the wrong rule: %s, want PCC < %g", w, modelPCC)
	}

	for _, tc := range []struct {
		name      string
		want, got []float32
		pcc, rel  float64
	}{
		{"identical", []float32{1, 2, 3}, []float32{1, 2, 3}, 1, 0},
		{"reversed", []float32{1, 2, 3}, []float32{3, 2, 1}, -1, 2.0 / 3},
		{"scaled", []float32{2, -4}, []float32{1, -2}, 1, 0.5},
		{"constant equal", []float32{5, 5}, []float32{5, 5}, 1, 0},
		{"constant vs varying", []float32{5, 5}, []float32{4, 6}, 0, 0.2},
		{"inf where finite", []float32{1, 2}, []float32{1, float32(math.Inf(1))}, math.NaN(), math.Inf(1)},
		{"same inf", []float32{1, float32(math.Inf(1)), 3}, []float32{1, float32(math.Inf(1)), 3}, 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := compare(tc.want, tc.got)
			if !(math.Abs(a.PCC-tc.pcc) < 1e-12 || math.IsNaN(tc.pcc) && math.IsNaN(a.PCC)) || !(math.Abs(a.MaxRel-tc.rel) < 1e-12 || math.IsInf(tc.rel, 1) && math.IsInf(a.MaxRel, 1)) {
				t.Errorf("compare = %s, want PCC %g, max rel err %g", a, tc.pcc, tc.rel)
			}
		})
	}

	logits := []float32{0, 10, 9.95, 1, 0, 0, 10, 5} // two rows of 4
	errs, ties := checkTokens([]float32{1, 2}, []float32{2, 3}, logits)
	if ties != 1 || len(errs) != 1 {
		t.Errorf("checkTokens: %d near ties %v, want 1 tie (row 0: 9.95 vs 10 of range 10) and 1 error (row 1: 5 vs 10)", ties, errs)
	}
}

// TestAgreementNearConstant: two near-constant tensors that agree to
// rounding pass although their correlation is noise; two that differ fail.
func TestAgreementNearConstant(t *testing.T) {
	want := []float32{-0.125, -0.125, -0.125000015, -0.12499999}
	got := []float32{-0.12499999, -0.125000015, -0.125, -0.125}
	if a := compare(want, got); !a.ok(0.9999) {
		t.Errorf("near-constant equal outputs rejected: %s", a)
	}
	if a := compare(want, []float32{-0.5, -0.125, -0.125, -0.125}); a.ok(0.9999) {
		t.Errorf("different outputs accepted: %s", a)
	}
}
