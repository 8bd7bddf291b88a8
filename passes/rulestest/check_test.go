package rulestest_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
