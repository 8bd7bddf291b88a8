package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
)

// srcBWeights are the weights the IR text (tcc ir) declares in
// transposed tiles, by name, and how many weights it declares.
func srcBWeights(t *testing.T, irText string) ([]string, int) {
	t.Helper()
	re := regexp.MustCompile(`weight %\d+ "([^"]+)" : \S+ \S+ (\S+)`)
	var names []string
	all := 0
	for _, m := range re.FindAllStringSubmatch(irText, -1) {
		all++
		if m[2] == "tile_t" {
			names = append(names, m[1])
		}
	}
	sort.Strings(names)
	return names, all
}

// TestWeightsOnSrcBTable: by default every step of qwen27b stores the
// same weights in transposed tiles: the GDN, attention and MLP
// projections (5 + 3 per GDN layer, 4 + 3 per attention layer of the
// small config's 6 + 2), not lm_head (decode reads it in a fused head),
// the norms, the convolution or the embedding; the decode build's
// programs.json declares them tile_t; --weights-on-srcb=false stores
// none.
func TestWeightsOnSrcBTable(t *testing.T) {
	base := []string{"ir", "qwen27b", "--config", smallConfig, "--mesh", "1x2", "--stage", "fused"}
	dec, err := runCLI(t, base...)
	require.NoError(t, err, dec)
	pre, err := runCLI(t, append(base, "--mode", "prefill", "--seq", "65", "--max-seq", "128")...)
	require.NoError(t, err, pre)
	off, err := runCLI(t, append(base, "--weights-on-srcb=false")...)
	require.NoError(t, err, off)

	decNames, all := srcBWeights(t, dec)
	if want := 6*8 + 2*7; len(decNames) != want {
		t.Errorf("decode stores %d of %d weights in transposed tiles, want %d", len(decNames), all, want)
	}
	for _, n := range decNames {
		if !strings.HasSuffix(n, "_proj.weight") && !strings.Contains(n, ".in_proj_") {
			t.Errorf("%s is stored in transposed tiles; want only projections", n)
		}
	}
	preNames, _ := srcBWeights(t, pre)
	if diff := cmp.Diff(decNames, preNames); diff != "" {
		t.Errorf("prefill's table differs from decode's (-decode +prefill):\n%s", diff)
	}
	if offNames, n := srcBWeights(t, off); len(offNames) != 0 || n != all {
		t.Errorf("--weights-on-srcb=false stores %d of %d weights in transposed tiles, want 0 of %d", len(offNames), n, all)
	}

	dir := t.TempDir()
	out, err := runCLI(t, "build", "qwen27b", "--config", smallConfig, "--mesh", "1x2", "-o", dir)
	require.NoError(t, err, out)
	data, err := os.ReadFile(filepath.Join(dir, "programs.json"))
	require.NoError(t, err)
	var pj struct {
		Buffers []struct{ Name, Kind, Layout string } `json:"buffers"`
	}
	require.NoError(t, json.Unmarshal(data, &pj))
	seen := map[string]bool{}
	var built []string
	for _, b := range pj.Buffers {
		if b.Kind == "weight" && b.Layout == "tile_t" && !seen[b.Name] {
			seen[b.Name] = true
			built = append(built, b.Name)
		}
	}
	sort.Strings(built)
	if diff := cmp.Diff(decNames, built); diff != "" {
		t.Errorf("programs.json's tile_t weights differ from the IR's (-ir +programs.json):\n%s", diff)
	}
}
