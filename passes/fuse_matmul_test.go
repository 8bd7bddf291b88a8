package passes

import (
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/passes/rewrite"
	"github.com/tcc-dev/tcc/passes/rulestest"
	"github.com/tcc-dev/tcc/sim/ref"
	"golang.org/x/tools/txtar"
)

// commonFamilies are the rule families of fuse_{mlp,layout,matmul,
// residual,collective,eltwise}.go.
var commonFamilies = []string{"mlp", "layout", "matmul", "residual", "collective", "eltwise"}

// commonPCC is the agreement every fused op of the common families must
// reach with its decomposition at storage formats. They reproduce the
// decompositions' rounding points, so in practice they agree exactly.
const commonPCC = 0.9999

// commonAgreement returns the Pearson correlation of got with want and
// the largest |got - want| relative to the largest |want|.
func commonAgreement(want, got []float32) (pcc, maxRel float64) {
	var mw, mg float64
	for i := range want {
		mw += float64(want[i])
		mg += float64(got[i])
	}
	n := float64(len(want))
	mw, mg = mw/n, mg/n
	var sww, sgg, swg, scale, worst float64
	for i := range want {
		dw, dg := float64(want[i])-mw, float64(got[i])-mg
		sww += dw * dw
		sgg += dg * dg
		swg += dw * dg
		scale = max(scale, math.Abs(float64(want[i])))
		worst = max(worst, math.Abs(float64(got[i])-float64(want[i])))
	}
	switch {
	case sww == 0 && sgg == 0:
		pcc = 1
	case sww == 0 || sgg == 0:
		pcc = 0
	default:
		pcc = swg / math.Sqrt(sww*sgg)
	}
	if worst == 0 {
		return pcc, 0
	}
	return pcc, worst / scale
}

// commonRandom draws a value of type t: floats N(0, 1), integers (token
// ids, positions) in [0, 4).
func commonRandom(t ir.TensorType, rng *rand.Rand) ref.Tensor {
	x := ref.NewTensor(t.Shape)
	for j := range x.Data {
		if t.DType.IsFloat() {
			x.Data[j] = float32(rng.NormFloat64())
		} else {
			x.Data[j] = float32(rng.IntN(4))
		}
	}
	return x
}

// commonEvalGraph evaluates g on a 1xN mesh (N = g.Mesh.Cols, each device
// its own random data for every declared value) and returns the outputs
// per device. Fused collectives are not supported (the graphs it runs are
// unfused or hold only single-device fused ops).
func commonEvalGraph(g *ir.Graph, seed uint64, opts ref.Options) ([][]ref.Tensor, error) {
	n := max(g.Mesh.Cols, 1)
	envs := make([]map[*ir.Value]ref.Tensor, n)
	for d := range envs {
		rng := rand.New(rand.NewPCG(seed, uint64(d)))
		envs[d] = map[*ir.Value]ref.Tensor{}
		for _, list := range [][]*ir.Value{g.Inputs, g.Weights, g.States} {
			for _, v := range list {
				envs[d][v] = commonRandom(v.Type, rng)
			}
		}
	}
	vals, err := ref.EvalMesh(g, envs, opts)
	if err != nil {
		return nil, err
	}
	outs := make([][]ref.Tensor, n)
	for d := range vals {
		for _, o := range g.Outputs {
			outs[d] = append(outs[d], vals[d][o])
		}
	}
	return outs, nil
}

// commonEvalFused evaluates a fused op and its decomposition
// (rewrite.EquivalencePair) on random operands, devices operands per
// device for fused collectives, and returns both per device.
func commonEvalFused(op *ir.Op, seed uint64, opts ref.Options) (fused, dec [][]ref.Tensor, err error) {
	rng := rand.New(rand.NewPCG(seed, uint64(op.ID)))
	if ref.IsCollective(op.Kind) && op.Int("devices") > 1 {
		return rulestest.EvalMeshPair(op, rulestest.MeshArgs(op, op.Int("devices"), rng), opts)
	}
	fg, dg, err := rewrite.EquivalencePair(op)
	if err != nil {
		return nil, nil, err
	}
	env := func(g *ir.Graph, args []ref.Tensor) map[*ir.Value]ref.Tensor {
		m := map[*ir.Value]ref.Tensor{}
		for i, v := range g.Inputs {
			m[v] = args[i]
		}
		return m
	}
	var args []ref.Tensor
	for _, v := range op.Operands {
		args = append(args, commonRandom(v.Type, rng))
	}
	run := func(g *ir.Graph) ([]ref.Tensor, error) {
		vals, err := ref.Eval(g, env(g, args), opts)
		if err != nil {
			return nil, err
		}
		var out []ref.Tensor
		for _, o := range g.Outputs {
			out = append(out, vals[o])
		}
		return out, nil
	}
	f, err := run(fg)
	if err != nil {
		return nil, nil, fmt.Errorf("fused: %w", err)
	}
	d, err := run(dg)
	if err != nil {
		return nil, nil, fmt.Errorf("decomposed: %w", err)
	}
	return [][]ref.Tensor{f}, [][]ref.Tensor{d}, nil
}

// commonFusedOps returns the fused ops a rule created among ops and,
// recursively, inside their decompositions (a chain grown step by step
// holds the earlier steps' fused ops there).
func commonFusedOps(ops []*ir.Op) []*ir.Op {
	var out []*ir.Op
	for _, op := range ops {
		if !op.Info().Fused || op.Rule == "" || op.Decomp == nil {
			continue
		}
		out = append(out, op)
		out = append(out, commonFusedOps(op.Decomp.Ops)...)
	}
	return out
}

// commonCaseRules returns the rules a test data case runs (its families=
// directive, else every registered rule).
func commonCaseRules(comment string) []*rewrite.Rule {
	for _, line := range strings.Split(comment, "\n") {
		if fams, ok := strings.CutPrefix(strings.TrimSpace(line), "families="); ok {
			var rules []*rewrite.Rule
			for _, f := range strings.Split(fams, ",") {
				rules = append(rules, FamilyRules(f)...)
			}
			return rules
		}
	}
	return Rules()
}

// TestCommonRulesEquivalent checks every rule of the common families on
// its test data, at the device's storage formats (ref.DefaultOptions) and
// in exact math, on random inputs:
//
//   - each fused op a rule created is evaluated against its decomposition
//     (rewrite.EquivalencePair; fused collectives over every device of the
//     row): PCC >= 0.9999, and the maximum relative error is logged per
//     rule; these ops reproduce the decompositions' rounding points, so at
//     storage formats the error must be exactly 0 (a dropped or extra
//     rounding shows up as ~1e-3 while PCC stays above 0.9999);
//   - a rule that emits no fused op (DropToMemory, CollapseReshape,
//     CollapseTypecast, FuseReduceScatterAllGather) is checked on the
//     whole graph, before against after, on every device: the values must
//     be identical.
//
// Every rule of the common families must fire in some case.
func TestCommonRulesEquivalent(t *testing.T) {
	type tally struct {
		ops, graphs int
		pcc, maxRel float64
	}
	seen := map[string]*tally{}
	get := func(rule string) *tally {
		if seen[rule] == nil {
			seen[rule] = &tally{pcc: 1}
		}
		return seen[rule]
	}
	mine := map[string]bool{}
	for _, f := range commonFamilies {
		for _, r := range FamilyRules(f) {
			mine[r.Name] = true
		}
	}
	for _, fam := range commonFamilies {
		files, err := filepath.Glob(filepath.Join("testdata", "fuse_"+fam, "*.txt"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no test data for family %s: %v", fam, err)
		}
		for _, path := range files {
			a, err := txtar.ParseFile(path)
			if err != nil {
				t.Fatal(err)
			}
			var input string
			for _, f := range a.Files {
				if f.Name == "input" {
					input = string(f.Data)
				}
			}
			name := strings.TrimSuffix(filepath.Base(path), ".txt")
			t.Run(fam+"/"+name, func(t *testing.T) {
				before, err := ir.Parse(input)
				if err != nil {
					t.Fatal(err)
				}
				after, err := ir.Parse(input)
				if err != nil {
					t.Fatal(err)
				}
				e, err := rewrite.NewEngine(commonCaseRules(string(a.Comment))...)
				if err != nil {
					t.Fatal(err)
				}
				st, err := e.Run(after)
				if err != nil {
					t.Fatal(err)
				}
				for _, op := range commonFusedOps(after.Ops()) {
					if !mine[op.Rule] {
						continue
					}
					for _, o := range []struct {
						name string
						opts ref.Options
					}{{"storage formats", ref.DefaultOptions()}, {"exact", ref.ExactOptions()}} {
						f, d, err := commonEvalFused(op, 7, o.opts)
						if err != nil {
							t.Fatalf("%s: %v", op.Where(), err)
						}
						for dev := range f {
							for k := range f[dev] {
								pcc, rel := commonAgreement(d[dev][k].Data, f[dev][k].Data)
								if pcc < commonPCC {
									t.Errorf("%s (%s) device %d result %d: PCC %.7f, max rel err %.3g; want PCC >= %g", op.Where(), o.name, dev, k, pcc, rel, commonPCC)
								}
								if o.name == "storage formats" && rel != 0 {
									t.Errorf("%s device %d result %d: max rel err %.3g at storage formats; the op reproduces its decomposition's rounding points, so it must be 0", op.Where(), dev, k, rel)
								}
								if o.name == "storage formats" {
									tl := get(op.Rule)
									tl.pcc, tl.maxRel = min(tl.pcc, pcc), max(tl.maxRel, rel)
								}
							}
						}
					}
					get(op.Rule).ops++
				}
				var pure []string
				for _, f := range st.Firings() {
					if mine[f.Rule] && !slices.ContainsFunc(commonFusedOps(after.Ops()), func(op *ir.Op) bool { return op.Rule == f.Rule }) {
						pure = append(pure, f.Rule)
					}
				}
				// Rules without a fused op: the rule alone, whole graph
				// before and after.
				for _, rule := range pure {
					alone, err := ir.Parse(input)
					if err != nil {
						t.Fatal(err)
					}
					var only []*rewrite.Rule
					for _, r := range Rules() {
						if r.Name == rule {
							only = append(only, r)
						}
					}
					e, err := rewrite.NewEngine(only...)
					if err != nil {
						t.Fatal(err)
					}
					if st, err := e.Run(alone); err != nil || st.Total(rule) == 0 {
						t.Fatalf("%s alone: fired %d times, err %v", rule, st.Total(rule), err)
					}
					want, err := commonEvalGraph(before, 11, ref.DefaultOptions())
					if err != nil {
						t.Fatalf("before: %v", err)
					}
					got, err := commonEvalGraph(alone, 11, ref.DefaultOptions())
					if err != nil {
						t.Fatalf("after %s: %v", rule, err)
					}
					for dev := range want {
						for k := range want[dev] {
							if pcc, rel := commonAgreement(want[dev][k].Data, got[dev][k].Data); rel != 0 {
								t.Errorf("%s: device %d output %d: rewritten graph differs (PCC %.7f, max rel err %.3g); the rule must not change values", rule, dev, k, pcc, rel)
							}
						}
					}
					get(rule).graphs++
				}
			})
		}
	}
	for _, f := range commonFamilies {
		for _, r := range FamilyRules(f) {
			tl := seen[r.Name]
			switch {
			case tl == nil:
				t.Errorf("%s/%s fires in no test data case", f, r.Name)
			case tl.ops > 0:
				t.Logf("%s/%s: %d fused ops vs decomposition at storage formats: worst PCC %.7f, max rel err %.3g", f, r.Name, tl.ops, tl.pcc, tl.maxRel)
			default:
				t.Logf("%s/%s: %d graphs, rewritten vs original at storage formats: identical", f, r.Name, tl.graphs)
			}
		}
	}
}
