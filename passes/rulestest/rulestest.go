// Package rulestest runs fusion-rule test data: txtar case files, each an
// input graph, the rules expected to fire (or not) and the expected graph
// after them. Every fused op a rule makes is also checked against its
// decomposition with the reference evaluator, and the whole rewritten
// graph against the input graph on random inputs (checkGraphEquivalent),
// so any rewrite that changes what is computed fails. tcc's own rules use it
// (passes.TestRuleData), and so can an out-of-tree rule package:
//
//	func TestRules(t *testing.T) {
//		rulestest.Run(t, "testdata/*.txt", Rules(), rulestest.Options{Update: *update})
//	}
package rulestest

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/passes/rewrite"
	"github.com/tcc-dev/tcc/sim/ref"
	"golang.org/x/tools/txtar"
)

// T is what the checks report to: a *testing.T, or the collector Check
// uses. Fatalf must not return.
type T interface {
	Helper()
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
}

// Options configure Run and Check.
type Options struct {
	// Update rewrites the output sections with what the rules produce
	// (review the diff).
	Update bool
	// Families returns the rules of a family named by a case's families=
	// directive (nil: the family does not exist). Nil: cases may not name
	// families.
	Families func(name string) []*rewrite.Rule
	// Equivalent, when set, checks a fused op first; returning true means
	// it was checked (tcc uses it for collectives spanning several devices).
	Equivalent func(t T, op *ir.Op) bool
}

// Case is one test-data file (txtar): directives in the comment, an
// "input" graph and an optional "output" graph (absent: unchanged).
//
//	# comment
//	expect=FuseRMSNorm       the rule fires at least once
//	expect=FuseRMSNorm*2     the rule fires exactly twice
//	expect-not=FuseRMSNorm   the rule does not fire
//	families=attention,norm  run only these families' rules (default: all),
//	                         so the expected output does not depend on
//	                         other families' rules
//	-- input --
//	graph ... (ir text)
//	-- output --
//	graph ... (ir text after the fuse rules and Renumber)
type Case struct {
	expect    map[string]int // rule -> exact count, or -1 for "at least once"
	expectNot []string
	families  []string // empty: every registered rule
	Input     string
	output    *string
}

func ParseCase(t T, path string, a *txtar.Archive) Case {
	t.Helper()
	c := Case{expect: map[string]int{}}
	for i, line := range strings.Split(string(a.Comment), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, val, ok := strings.Cut(line, "=")
		switch {
		case ok && key == "expect":
			name, n, counted := strings.Cut(val, "*")
			c.expect[name] = -1
			if counted {
				k, err := strconv.Atoi(n)
				if err != nil {
					t.Fatalf("%s:%d: bad count in %q", path, i+1, line)
				}
				c.expect[name] = k
			}
		case ok && key == "expect-not":
			c.expectNot = append(c.expectNot, val)
		case ok && key == "families":
			c.families = append(c.families, strings.Split(val, ",")...)
		default:
			t.Fatalf("%s:%d: want expect=Rule[*N], expect-not=Rule or families=f1,f2, got %q", path, i+1, line)
		}
	}
	if len(c.expect)+len(c.expectNot) == 0 {
		t.Fatalf("%s: no expect= or expect-not= directive", path)
	}
	for _, f := range a.Files {
		switch f.Name {
		case "input":
			c.Input = string(f.Data)
		case "output":
			s := string(f.Data)
			c.output = &s
		default:
			t.Fatalf("%s: unknown section %q (want input, output)", path, f.Name)
		}
	}
	if c.Input == "" {
		t.Fatalf("%s: no input section", path)
	}
	return c
}

// Run runs rules on every case file matching pattern (filepath.Glob) as a
// subtest named after the file: the firings, verification and the printed
// round trip of the result, every fused op's decomposition and its
// equivalence in exact float32 math on seeded random operands, and the
// result against the output section (absent: the input unchanged).
func Run(t *testing.T, pattern string, rules []*rewrite.Rule, opts Options) {
	t.Helper()
	files, err := filepath.Glob(pattern)
	if err != nil {
		t.Fatalf("%v", err)
	}
	if len(files) == 0 {
		t.Fatalf("no case files match %s", pattern)
	}
	known := map[string]bool{}
	for _, r := range rules {
		known[r.Name] = true
	}
	for _, path := range files {
		t.Run(caseName(pattern, path), func(t *testing.T) { runCase(t, path, rules, known, opts) })
	}
}

// caseName is path relative to the fixed part of pattern, without .txt.
func caseName(pattern, path string) string {
	prefix := strings.TrimSuffix(pattern[:strings.IndexAny(pattern+"*", "*")], "/")
	return strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(path, prefix), "/"), ".txt")
}

// Result is what Check found in one case file: the problems (none: it
// passed).
type Result struct {
	Case     string
	Problems []string
}

// Check runs the cases matching pattern as Run does, outside go test
// (tcc check): one Result per file, in path order. Options.Update is
// honoured. The error is for a pattern that matches nothing or is bad.
func Check(pattern string, rules []*rewrite.Rule, opts Options) ([]Result, error) {
	files, err := filepath.Glob(pattern)
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no case files match %s", pattern)
	}
	known := map[string]bool{}
	for _, r := range rules {
		known[r.Name] = true
	}
	var out []Result
	for _, path := range files {
		c := &collector{}
		func() {
			defer func() {
				if v := recover(); v != nil && v != errFatal {
					c.Errorf("panic: %v", v)
				}
			}()
			runCase(c, path, rules, known, opts)
		}()
		out = append(out, Result{Case: path, Problems: c.problems})
	}
	return out, nil
}

// collector is the T of Check; Fatalf unwinds to Check with errFatal.
type collector struct{ problems []string }

var errFatal = errors.New("rulestest: fatal")

func (*collector) Helper() {}
func (c *collector) Errorf(format string, args ...any) {
	c.problems = append(c.problems, fmt.Sprintf(format, args...))
}
func (c *collector) Fatalf(format string, args ...any) {
	c.Errorf(format, args...)
	panic(errFatal)
}

func runCase(t T, path string, all []*rewrite.Rule, known map[string]bool, opts Options) {
	a, err := txtar.ParseFile(path)
	if err != nil {
		t.Fatalf("%v", err)
	}
	c := ParseCase(t, path, a)
	for name := range c.expect {
		if !known[name] {
			t.Fatalf("expect=%s: no such rule", name)
		}
	}
	for _, name := range c.expectNot {
		if !known[name] {
			t.Fatalf("expect-not=%s: no such rule", name)
		}
	}
	g, err := ir.Parse(c.Input)
	if err != nil {
		t.Fatalf("input: %v", err)
	}
	unchanged := renumbered(t, c.Input)
	rules := all
	if len(c.families) > 0 {
		rules = nil
		for _, f := range c.families {
			var fr []*rewrite.Rule
			if opts.Families != nil {
				fr = opts.Families(f)
			}
			if fr == nil {
				t.Fatalf("families=%s: no such rule family", f)
			}
			rules = append(rules, fr...)
		}
	}
	e, err := rewrite.NewEngine(rules...)
	if err != nil {
		t.Fatalf("%v", err)
	}
	st, err := e.Run(g)
	if err != nil {
		t.Fatalf("%v", err)
	}
	for name, want := range c.expect {
		got := st.Total(name)
		if (want < 0 && got == 0) || (want >= 0 && got != want) {
			t.Errorf("%s fired %d times, want %s", name, got, countText(want))
		}
	}
	for _, name := range c.expectNot {
		if got := st.Total(name); got != 0 {
			t.Errorf("%s fired %d times, want none", name, got)
		}
	}
	if err := ir.Verify(g); err != nil {
		t.Fatalf("result does not verify: %v", err)
	}
	checkGraphEquivalent(t, c.Input, g)
	g.Renumber()
	got := ir.Print(g)
	if again, err := ir.Parse(got); err != nil {
		t.Errorf("result does not parse back: %v", err)
	} else if diff := cmp.Diff(got, ir.Print(again)); diff != "" {
		t.Errorf("result does not round-trip (-printed +reparsed):\n%s", diff)
	}
	CheckDecompositions(t, g, opts.Equivalent)

	want := unchanged
	if c.output != nil {
		want = *c.output
	}
	if opts.Update {
		if got == unchanged && c.output == nil {
			return
		}
		setSection(a, "output", got)
		if err := os.WriteFile(path, txtar.Format(a), 0o644); err != nil {
			t.Fatalf("%v", err)
		}
		return
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("graph after fusion (-want +got):\n%s", diff)
	}
}

// renumbered parses src and prints it with dense IDs: the expected output
// of a case whose graph the rules leave alone.
func renumbered(t T, src string) string {
	t.Helper()
	g, err := ir.Parse(src)
	if err != nil {
		t.Fatalf("%v", err)
	}
	g.Renumber()
	return ir.Print(g)
}

func countText(n int) string {
	if n < 0 {
		return "at least once"
	}
	return strconv.Itoa(n)
}

func setSection(a *txtar.Archive, name, data string) {
	for i := range a.Files {
		if a.Files[i].Name == name {
			a.Files[i].Data = []byte(data)
			return
		}
	}
	a.Files = append(a.Files, txtar.File{Name: name, Data: []byte(data)})
}

// CheckDecompositions checks that every fused op of g carries a
// decomposition that builds into a standalone graph with the fused op's
// interface and computes what the fused op computes (equivalent, when set,
// is tried first for each op).
func CheckDecompositions(t T, g *ir.Graph, equivalent func(T, *ir.Op) bool) {
	t.Helper()
	for _, op := range g.Ops() {
		if !op.Info().Fused {
			continue
		}
		fused, dec, err := rewrite.EquivalencePair(op)
		if err != nil {
			t.Errorf("%s: %v", op.Where(), err)
			continue
		}
		var fin, din []string
		for i := range fused.Inputs {
			fin = append(fin, fused.Inputs[i].Type.String())
			din = append(din, dec.Inputs[i].Type.String())
		}
		if !slices.Equal(fin, din) || len(fused.Outputs) != len(dec.Outputs) ||
			!fused.Outputs[0].Type.Shape.Equal(dec.Outputs[0].Type.Shape) || fused.Outputs[0].Type.DType != dec.Outputs[0].Type.DType {
			t.Errorf("%s: fused %v -> %s and decomposed %v -> %s differ", op.Where(), fin, fused.Outputs[0].Type, din, dec.Outputs[0].Type)
		}
		if (equivalent == nil || !equivalent(t, op)) && !checkEquivalentMesh(t, op) {
			checkEquivalent(t, op)
		}
	}
}

// checkEquivalent evaluates a fused op and its decomposition with the
// reference evaluator in exact float32 math on seeded random operands and
// requires agreement to a relative error of 1e-5 (relative to the largest
// output magnitude): a rule that drops eps or the (1+w) offset, or binds the
// wrong operand, fails here.
func checkEquivalent(t T, op *ir.Op) {
	t.Helper()
	// integer operands (cache positions, token ids): small non-negative
	// integers, valid for any cache or table of at least 4 rows
	args := RandomArgs(op, rand.New(rand.NewPCG(1, uint64(op.ID))), 4)
	fused, err := ref.EvalOp(op, args, ref.ExactOptions())
	if err != nil {
		t.Errorf("%s: %v", op.Where(), err)
		return
	}
	dec, err := ref.EvalDecompositionWith(op, args, ref.ExactOptions())
	if err != nil {
		t.Errorf("%s: %v", op.Where(), err)
		return
	}
	for k := range fused {
		var scale, worst float64
		for j := range fused[k].Data {
			scale = max(scale, math.Abs(float64(dec[k].Data[j])))
			worst = max(worst, math.Abs(float64(fused[k].Data[j]-dec[k].Data[j])))
		}
		if worst > 1e-5*scale {
			t.Errorf("%s: result %d differs from its decomposition by %g (largest magnitude %g)", op.Where(), k, worst, scale)
		}
	}
}

// checkEquivalentMesh is checkEquivalent for a fused collective spanning
// more than one device (all_reduce_add, all_reduce_add_rmsnorm,
// argmax_sharded: every fused op ref.IsCollective reports), which one
// device's operands cannot evaluate: every device gets its own random
// operands, the fused op runs on the whole row (ref.FusedMeshOp) and the
// decomposition on a 1xN mesh (ref.EvalMesh); in exact math every
// device's results must agree to 1e-5 of the largest magnitude. It
// reports whether op was such a collective (and so has been checked).
func checkEquivalentMesh(t T, op *ir.Op) bool {
	t.Helper()
	if !ref.IsCollective(op.Kind) || op.Int("devices") <= 1 {
		return false
	}
	n := op.Int("devices")
	rng := rand.New(rand.NewPCG(1, uint64(op.ID)))
	args := MeshArgs(op, n, rng)
	fused, dec, err := EvalMeshPair(op, args, ref.ExactOptions())
	if err != nil {
		t.Errorf("%s: %v", op.Where(), err)
		return true
	}
	for d := range fused {
		for k := range fused[d] {
			var scale, worst float64
			for j := range fused[d][k].Data {
				scale = max(scale, math.Abs(float64(dec[d][k].Data[j])))
				worst = max(worst, math.Abs(float64(fused[d][k].Data[j]-dec[d][k].Data[j])))
			}
			if worst > 1e-5*scale {
				t.Errorf("%s: device %d result %d differs from its decomposition by %g (largest magnitude %g)", op.Where(), d, k, worst, scale)
			}
		}
	}
	return true
}

// MeshArgs draws N(0, 1) operands for op on each of n devices.
func MeshArgs(op *ir.Op, n int, rng *rand.Rand) [][]ref.Tensor {
	args := make([][]ref.Tensor, n)
	for d := range args {
		for _, v := range op.Operands {
			t := ref.NewTensor(v.Type.Shape)
			for j := range t.Data {
				t.Data[j] = float32(rng.NormFloat64())
			}
			args[d] = append(args[d], t)
		}
	}
	return args
}

// EvalMeshPair evaluates a fused collective op on per-device
// operands args with ref.FusedMeshOp, and the decomposed graph of
// rewrite.EquivalencePair(op) on a 1xN mesh with ref.EvalMesh; it returns
// both per device, results in order.
func EvalMeshPair(op *ir.Op, args [][]ref.Tensor, opts ref.Options) (fused, dec [][]ref.Tensor, err error) {
	fused, err = ref.FusedMeshOp(op, args, opts)
	if err != nil {
		return nil, nil, err
	}
	_, dg, err := rewrite.EquivalencePair(op)
	if err != nil {
		return nil, nil, err
	}
	dg.Mesh = ir.Mesh{Rows: 1, Cols: len(args)}
	envs := make([]map[*ir.Value]ref.Tensor, len(args))
	for d := range envs {
		envs[d] = map[*ir.Value]ref.Tensor{}
		for i, v := range dg.Inputs {
			envs[d][v] = args[d][i]
		}
	}
	vals, err := ref.EvalMesh(dg, envs, opts)
	if err != nil {
		return nil, nil, err
	}
	dec = make([][]ref.Tensor, len(args))
	for d := range vals {
		for _, o := range dg.Outputs {
			dec[d] = append(dec[d], vals[d][o])
		}
	}
	return fused, dec, nil
}

// RandomArgs draws one tensor per operand of op: float operands N(0, 1),
// integer operands uniform in [0, ints); a value read as several operands
// gets one tensor.
func RandomArgs(op *ir.Op, rng *rand.Rand, ints int) []ref.Tensor {
	args := make([]ref.Tensor, len(op.Operands))
	for i, v := range op.Operands {
		if j := slices.Index(op.Operands, v); j < i {
			args[i] = args[j] // one value read as several operands
			continue
		}
		args[i] = ref.NewTensor(v.Type.Shape)
		for j := range args[i].Data {
			if v.Type.DType.IsFloat() {
				args[i].Data[j] = float32(rng.NormFloat64())
			} else {
				args[i].Data[j] = float32(rng.IntN(ints))
			}
		}
	}
	return args
}
