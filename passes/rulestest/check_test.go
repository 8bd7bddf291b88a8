package rulestest_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/passes/external/example"
	"github.com/tcc-dev/tcc/passes/rewrite"
	"github.com/tcc-dev/tcc/passes/rulestest"
)

const foldCase = `%s
-- input --
graph fold mesh 1x1 {
  input %%0 "x" : [1,64] bf16 tile dram_interleaved
  region mlp 0 {
    %%1 = mul_scalar(%%0) {value = 2} : [1,64] bf16 tile dram_interleaved
    %%2 = mul_scalar(%%1) {value = 4} : [1,64] bf16 tile dram_interleaved
  }
  output %%2
}
`

// Check reports each case's problems without go test: a case whose
// directive holds passes, one whose directive is false or names no rule
// fails with the reason.
func TestCheck(t *testing.T) {
	dir := t.TempDir()
	fold, err := os.ReadFile("../external/example/testdata/fold.txt") // with its output section
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a_fires.txt"), fold, 0o644))
	for name, directive := range map[string]string{
		"b_not.txt":     "expect-not=FoldMulScalar",
		"c_unknown.txt": "expect=NoSuchRule",
	} {
		body := strings.ReplaceAll(foldCase, "%s", directive)
		body = strings.ReplaceAll(body, "%%", "%")
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644))
	}
	scalar := rulestest.Options{Families: func(f string) []*rewrite.Rule {
		if f == example.Family {
			return example.Rules()
		}
		return nil
	}}
	res, err := rulestest.Check(filepath.Join(dir, "*.txt"), example.Rules(), scalar)
	require.NoError(t, err)
	require.Len(t, res, 3)
	assert.Empty(t, res[0].Problems, "the example's own case passes")
	require.NotEmpty(t, res[1].Problems)
	assert.Contains(t, res[1].Problems[0], "FoldMulScalar fired 1 times, want none")
	require.NotEmpty(t, res[2].Problems)
	assert.Contains(t, res[2].Problems[0], "expect=NoSuchRule: no such rule")

	_, err = rulestest.Check(filepath.Join(dir, "*.none"), example.Rules(), rulestest.Options{})
	assert.ErrorContains(t, err, "no case files match")
}

// wrongFold is FoldMulScalar with a bug: it folds to x * (2*a*b). Its case
// file's expected output is what it produces (as `-update` would write),
// so only the numeric check of the whole rewrite can catch it.
func wrongFold() *rewrite.Rule {
	r := example.FoldMulScalar()
	r.Name, r.Rewrite = "WrongFold", "mul_scalar(mul_scalar(x, a), b) => mul_scalar(x, 2*a*b)"
	r.Build = func(b *rewrite.Builder, m *rewrite.Match) ([]*ir.Value, error) {
		ab := 2 * m.Op("inner").Float("value") * m.Op("outer").Float("value")
		v, err := b.Emit1(ir.OpMulScalar, []*ir.Value{m.Value("x")}, ir.Attrs{"value": ab})
		return []*ir.Value{v}, err
	}
	return r
}

// TestCheckCatchesWrongRewrite: every rewrite is checked numerically on
// the whole graph, not only fused ops against their decompositions: a rule
// that changes what is computed fails even when the expected output was
// updated to its result.
func TestCheckCatchesWrongRewrite(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name  string
		rule  *rewrite.Rule
		value string // the folded scalar in the expected output
		ok    bool
	}{
		{"right", example.FoldMulScalar(), "8.0", true},
		{"wrong", wrongFold(), "16.0", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := strings.ReplaceAll(foldCase, "%s", "expect="+tc.rule.Name)
			body = strings.ReplaceAll(body, "%%", "%")
			body += `-- output --
graph fold mesh 1x1 {
  input %0 "x" : [1,64] bf16 tile dram_interleaved
  region mlp 0 {
    %2 = mul_scalar(%0) {value = ` + tc.value + `} : [1,64] bf16 tile dram_interleaved rule "` + tc.rule.Name + `"
  }
  output %2
}
`
			path := filepath.Join(dir, tc.name+".txt")
			require.NoError(t, os.WriteFile(path, []byte(body), 0o644))
			res, err := rulestest.Check(path, []*rewrite.Rule{tc.rule}, rulestest.Options{})
			require.NoError(t, err)
			require.Len(t, res, 1)
			if tc.ok {
				assert.Empty(t, res[0].Problems)
				return
			}
			require.NotEmpty(t, res[0].Problems, "the wrong fold passed")
			assert.Contains(t, res[0].Problems[0], "computes something else")
		})
	}
}
