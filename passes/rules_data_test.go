package passes

import (
	"flag"
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

var update = flag.Bool("update", false, "rewrite the output sections of testdata/*/*.txt")

// ruleCase is one testdata file (txtar): directives in the comment, an
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
type ruleCase struct {
	expect    map[string]int // rule -> exact count, or -1 for "at least once"
	expectNot []string
	families  []string // empty: every registered rule
	input     string
	output    *string
}

func parseRuleCase(t *testing.T, path string, a *txtar.Archive) ruleCase {
	t.Helper()
	c := ruleCase{expect: map[string]int{}}
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
			c.input = string(f.Data)
		case "output":
			s := string(f.Data)
			c.output = &s
		default:
			t.Fatalf("%s: unknown section %q (want input, output)", path, f.Name)
		}
	}
	if c.input == "" {
		t.Fatalf("%s: no input section", path)
	}
	return c
}

// TestRuleData runs every registered rule on each testdata/<family>/*.txt
// input and checks the firings and the printed result. Run with -update to
// rewrite the output sections (review the diff!).
func TestRuleData(t *testing.T) {
	files, err := filepath.Glob("testdata/*/*.txt")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no testdata files")
	}
	known := map[string]bool{}
	for _, r := range Rules() {
		known[r.Name] = true
	}
	for _, path := range files {
		t.Run(strings.TrimSuffix(path[len("testdata/"):], ".txt"), func(t *testing.T) {
			a, err := txtar.ParseFile(path)
			if err != nil {
				t.Fatal(err)
			}
			c := parseRuleCase(t, path, a)
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
			g, err := ir.Parse(c.input)
			if err != nil {
				t.Fatalf("input: %v", err)
			}
			unchanged := renumbered(t, c.input)
			rules := Rules()
			if len(c.families) > 0 {
				rules = nil
				for _, f := range c.families {
					fr := FamilyRules(f)
					if fr == nil {
						t.Fatalf("families=%s: no such rule family (have %v)", f, Families())
					}
					rules = append(rules, fr...)
				}
			}
			e, err := rewrite.NewEngine(rules...)
			if err != nil {
				t.Fatal(err)
			}
			st, err := e.Run(g)
			if err != nil {
				t.Fatal(err)
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
			g.Renumber()
			got := ir.Print(g)
			if again, err := ir.Parse(got); err != nil {
				t.Errorf("result does not parse back: %v", err)
			} else if diff := cmp.Diff(got, ir.Print(again)); diff != "" {
				t.Errorf("result does not round-trip (-printed +reparsed):\n%s", diff)
			}
			checkDecompositions(t, g)

			want := unchanged
			if c.output != nil {
				want = *c.output
			}
			if *update {
				if got == unchanged && c.output == nil {
					return
				}
				setSection(a, "output", got)
				if err := os.WriteFile(path, txtar.Format(a), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("graph after fusion (-want +got):\n%s", diff)
			}
		})
	}
}

// renumbered parses src and prints it with dense IDs: the expected output
// of a case whose graph the rules leave alone.
func renumbered(t *testing.T, src string) string {
	t.Helper()
	g, err := ir.Parse(src)
	if err != nil {
		t.Fatal(err)
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

// checkDecompositions checks that every fused op carries a decomposition
// that builds into a standalone graph with the fused op's interface.
func checkDecompositions(t *testing.T, g *ir.Graph) {
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
		checkEquivalent(t, op)
	}
}

// checkEquivalent evaluates a fused op and its decomposition with the
// reference evaluator in exact float32 math on seeded random operands and
// requires agreement to a relative error of 1e-5 (relative to the largest
// output magnitude): a rule that drops eps or the (1+w) offset, or binds the
// wrong operand, fails here.
func checkEquivalent(t *testing.T, op *ir.Op) {
	t.Helper()
	if checkEquivalentMesh(t, op) { // fused collectives over several devices (fuse_collective_test.go)
		return
	}
	rng := rand.New(rand.NewPCG(1, uint64(op.ID)))
	args := make([]ref.Tensor, len(op.Operands))
	for i, v := range op.Operands {
		args[i] = ref.NewTensor(v.Type.Shape)
		for j := range args[i].Data {
			if v.Type.DType.IsFloat() {
				args[i].Data[j] = float32(rng.NormFloat64())
			} else {
				// integer operands (cache positions, token ids): small
				// non-negative integers, valid for any cache or table of
				// at least 4 rows
				args[i].Data[j] = float32(rng.IntN(4))
			}
		}
	}
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
