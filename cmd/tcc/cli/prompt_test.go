package cli

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/tcc-dev/tcc/ir/longtest"
	"github.com/tcc-dev/tcc/models/checkpoint"
	"github.com/tcc-dev/tcc/models/tokenizer"
)

// runCLISplit executes the command tree with args and returns stdout and
// stderr apart.
func runCLISplit(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	root := NewRoot()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), errOut.String(), err
}

var generatedRe = regexp.MustCompile(`(?m)^tcc: generated (\d+) tokens \[([0-9 ]*)\], (.*)$`)

// generatedIDs reads the ids of the "generated" line of a run's stderr.
func generatedIDs(t *testing.T, stderr string) ([]int, string) {
	t.Helper()
	m := generatedRe.FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("no generated line on stderr:\n%s", stderr)
	}
	var ids []int
	for _, f := range strings.Fields(m[2]) {
		id, _ := strconv.Atoi(f)
		ids = append(ids, id)
	}
	if n, _ := strconv.Atoi(m[1]); n != len(ids) {
		t.Fatalf("generated %s tokens, %d ids listed", m[1], len(ids))
	}
	return ids, m[3]
}

// TestRunPromptStreams: with --prompt and no --check, stdout is exactly
// the generated text (the tokens decoded, special tokens skipped, then a
// newline), everything else is on stderr; one layer, one step, ~2 CPU-s.
func TestRunPromptStreams(t *testing.T) {
	dir := synthFor(t, oneLayerQwen(t), checkpoint.FormBF16)
	stdout, stderr, err := runCLISplit(t, "run", "qwen27b", "--weights", dir, "--prompt", "hello world", "--steps", "1")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	ids, why := generatedIDs(t, stderr)
	if len(ids) != 2 || why != "stopped after --steps 1" {
		t.Errorf("generated %v, %q; want 2 tokens (the prompt's and one step's), stopped after --steps 1", ids, why)
	}
	tok, err := tokenizer.Load(filepath.Join(dir, tokenizer.File))
	if err != nil {
		t.Fatal(err)
	}
	want := tok.Decode(ids, true)
	if !strings.HasSuffix(want, "\n") {
		want += "\n"
	}
	if stdout != want {
		t.Errorf("stdout %q, want the decoded tokens %v: %q", stdout, ids, want)
	}
	for _, w := range []string{"programs per device", "prompt    2 tokens [301 333]"} {
		if !strings.Contains(stderr, w) {
			t.Errorf("stderr lacks %q:\n%s", w, stderr)
		}
	}
}

// TestRunPromptStopsAtEOS: generation stops at an end-of-sequence token
// (here every id is one, from generation_config.json): the prefill's token
// ends the run, no decode step runs and no text is printed.
func TestRunPromptStopsAtEOS(t *testing.T) {
	longtest.Skip(t, "a one-layer run stopped by its end-of-sequence token (~3 CPU-s)")
	dir := synthFor(t, oneLayerQwen(t), checkpoint.FormBF16)
	var ids []string
	for i := 0; i < 2048; i++ {
		ids = append(ids, strconv.Itoa(i))
	}
	os.WriteFile(filepath.Join(dir, tokenizer.GenerationConfigFile), []byte(fmt.Sprintf(`{"eos_token_id": [%s]}`, strings.Join(ids, ", "))), 0o644)
	stdout, stderr, err := runCLISplit(t, "run", "qwen27b", "--weights", dir, "--prompt", "hello world", "--steps", "3")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	gen, why := generatedIDs(t, stderr)
	if len(gen) != 1 || !strings.HasPrefix(why, "stopped at the end-of-sequence token") || stdout != "" {
		t.Errorf("generated %v, %q, stdout %q; want one token ending the run and no text", gen, why, stdout)
	}
	if strings.Contains(stderr, "decode 0") {
		t.Errorf("a decode step ran after the end of sequence:\n%s", stderr)
	}
}

// TestPromptRun: the prompt side without a model: --chat's template and
// its end of turn, the stream of generated text, the stop at the end of
// sequence, tokens the tokenizer lacks.
func TestPromptRun(t *testing.T) {
	tokPath := filepath.Join(synthTokenizer, tokenizer.File)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, tokenizer.File), must(os.ReadFile(tokPath)), 0o644)
	pr, err := loadPrompt(runFlags{prompt: "hello world", hasPrompt: true, chat: true, tokenizer: filepath.Join(dir, tokenizer.File)})
	if err != nil {
		t.Fatal(err)
	}
	if want := "<|im_start|>user\nhello world<|im_end|>\n<|im_start|>assistant\n"; pr.text != want {
		t.Errorf("--chat prompt %q, want %q", pr.text, want)
	}
	// No tokenizer_config.json here: --chat alone declares <|im_end|>.
	if !pr.eos[1215] || len(pr.eos) != 1 || !strings.Contains(pr.describe(), "<|im_end|> (1215) from --chat") {
		t.Errorf("end of sequence %v: %s", pr.eos, pr.describe())
	}
	tok := pr.tok
	var got strings.Builder
	for _, b := range []byte("é!") {
		id, _ := tok.ID(tokenizer.ByteSymbol(b))
		s, stop := pr.next(id)
		if stop {
			t.Fatalf("token %d stopped the run", id)
		}
		got.WriteString(s)
	}
	if s, stop := pr.next(1215); !stop || s != "" {
		t.Errorf("<|im_end|>: %q, stop %v", s, stop)
	}
	if got.String() != "é!" || pr.out.String() != "é!" || !strings.Contains(pr.stopReason(4), "stopped at the end-of-sequence token <|im_end|>") {
		t.Errorf("streamed %q, text %q, %s", got.String(), pr.out.String(), pr.stopReason(4))
	}
	if pr.tokenNote(2000) == "" || pr.tokenNote(5) != "" {
		t.Errorf("tokenNote(2000) = %q, tokenNote(5) = %q", pr.tokenNote(2000), pr.tokenNote(5))
	}
	// Without --chat and any config: no end of sequence.
	pr, err = loadPrompt(runFlags{prompt: "hi", hasPrompt: true, tokenizer: filepath.Join(dir, tokenizer.File)})
	if err != nil || len(pr.eos) != 0 || !strings.Contains(pr.describe(), "none declared") {
		t.Errorf("no config: %v, %v", err, pr.eos)
	}
	if _, err := loadPrompt(runFlags{prompt: "", hasPrompt: true, tokenizer: filepath.Join(dir, tokenizer.File)}); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Errorf("empty prompt: %v", err)
	}
	// A chat template that is not ChatML is refused.
	os.WriteFile(filepath.Join(dir, tokenizer.ConfigFile), []byte(`{"chat_template": "[INST] {{ m }} [/INST]"}`), 0o644)
	if _, err := loadPrompt(runFlags{prompt: "hi", hasPrompt: true, chat: true, tokenizer: filepath.Join(dir, tokenizer.File)}); err == nil || !strings.Contains(err.Error(), "--chat") {
		t.Errorf("--chat with a non-ChatML template: %v", err)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestCopyTokenizer: weights convert copies the tokenizer files a
// checkpoint has into the cache.
func TestCopyTokenizer(t *testing.T) {
	cache := t.TempDir()
	if err := copyTokenizer(synthTokenizer, cache); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{tokenizer.File, tokenizer.ConfigFile} {
		if !fileExists(filepath.Join(cache, f)) {
			t.Errorf("%s not copied", f)
		}
	}
	if fileExists(filepath.Join(cache, tokenizer.GenerationConfigFile)) {
		t.Errorf("%s copied though the checkpoint has none", tokenizer.GenerationConfigFile)
	}
}
