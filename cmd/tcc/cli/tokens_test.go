package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/tcc-dev/tcc/models"
	"github.com/tcc-dev/tcc/models/qwen27b"
)

// TestRunTokens: every user of a run starts its own token stream (first
// tokens distinct, prompts distinct), every seed its own run, all ids in
// the vocabulary.
func TestRunTokens(t *testing.T) {
	const vocab = 2048
	a, b := runTokens(1, 32, vocab, 8), runTokens(2, 32, vocab, 8)
	seen := map[int]bool{}
	for u, toks := range a {
		if len(toks) != 8 {
			t.Fatalf("user %d: %d tokens, want 8", u, len(toks))
		}
		for _, id := range toks {
			if id < 0 || id >= vocab {
				t.Fatalf("user %d: token %d outside [0, %d)", u, id, vocab)
			}
		}
		if seen[toks[0]] {
			t.Errorf("user %d's first token %d is another user's", u, toks[0])
		}
		seen[toks[0]] = true
		if u > 0 && slices.Equal(toks, a[u-1]) {
			t.Errorf("users %d and %d get the same prompt %v", u-1, u, toks)
		}
	}
	same := 0
	for u := range a {
		if a[u][0] == b[u][0] {
			same++
		}
	}
	if same > 2 {
		t.Errorf("seeds 1 and 2 give %d of 32 users the same first token:\n%v\n%v", same, a, b)
	}
	if c := runTokens(1, 32, vocab, 8); !slices.EqualFunc(a, c, slices.Equal) {
		t.Errorf("seed 1 drew two different runs")
	}
}

// TestRunUsersGetTheirOwnTokens runs a one-layer qwen27b (~0.6 CPU-s a
// run) with two users at two seeds: the tokens come from the model's
// vocabulary, not from looking for an embedding op (the fused graph has
// embedding_reshape, which made every user's token 0 at every seed).
func TestRunUsersGetTheirOwnTokens(t *testing.T) {
	cfg := oneLayerQwen(t)
	start := regexp.MustCompile(`(?m)^start +tokens \[\[(\d+)\] \[(\d+)\]\]$`)
	var firsts [][]string
	for _, seed := range []string{"1", "2"} {
		out, err := runCLI(t, "run", "qwen27b", "--config", cfg, "--max-seq", "32", "--batch", "2", "--seed", seed)
		if err != nil {
			t.Fatalf("--seed %s: %v\n%s", seed, err, out)
		}
		m := start.FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("--seed %s: no start tokens line:\n%s", seed, out)
		}
		if m[1] == m[2] {
			t.Errorf("--seed %s: both users start with token %s", seed, m[1])
		}
		firsts = append(firsts, m[1:])
	}
	if slices.Equal(firsts[0], firsts[1]) {
		t.Errorf("--seed 1 and 2 start with the same tokens %v", firsts[0])
	}
	if _, err := runCLI(t, "run", "qwen27b", "--config", cfg, "--prefill", "-1"); err == nil || !strings.Contains(err.Error(), "--prefill -1") {
		t.Errorf("--prefill -1: err = %v", err)
	}
	m := qwen27b.Model{}
	args := models.Args{}
	for _, p := range m.Params() {
		args[p.Name] = p.Default
	}
	args["config"] = cfg
	if v, err := m.Vocab(args); err != nil || v != 2048 {
		t.Errorf("qwen27b one-layer config: Vocab = %d, %v; want its vocab_size 2048", v, err)
	}
}

// oneLayerQwen writes the small qwen27b config cut to one linear-attention
// layer and returns its path.
func oneLayerQwen(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("../../../models/qwen27b/testdata/small.json")
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	if err := json.Unmarshal(data, &c); err != nil {
		t.Fatal(err)
	}
	tc := c["text_config"].(map[string]any)
	tc["num_hidden_layers"], tc["layer_types"] = 1, []string{"linear_attention"}
	if data, err = json.Marshal(c); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "one-layer.json")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
