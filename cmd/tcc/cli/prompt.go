package cli

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/tcc-dev/tcc/models/tokenizer"
)

// promptRun is the text side of `tcc run --prompt`: the tokenizer, the
// prompt's ids, the end-of-sequence ids and the text generated so far.
type promptRun struct {
	tok    *tokenizer.Tokenizer
	path   string // the tokenizer.json read
	text   string // the prompt as tokenized (with --chat, in the template)
	ids    []int
	eos    map[int]bool
	eosSrc string // where the end-of-sequence ids come from, for messages
	stream *tokenizer.Stream
	out    strings.Builder // the generated text
	gen    []int           // the generated ids
	// stopped names the end-of-sequence token generated ("" until then).
	stopped string
}

// tokenizerPath is the tokenizer.json of a run: --tokenizer, or the one
// in --weights DIR.
func tokenizerPath(rf runFlags) (string, error) {
	if rf.tokenizer != "" {
		if !fileExists(rf.tokenizer) {
			return "", fmt.Errorf("--tokenizer %s: no such file", rf.tokenizer)
		}
		return rf.tokenizer, nil
	}
	if rf.weights == "" {
		return "", fmt.Errorf("--prompt needs a tokenizer: give --weights DIR (a checkpoint with %s) or --tokenizer FILE", tokenizer.File)
	}
	p := filepath.Join(rf.weights, tokenizer.File)
	if _, err := os.Stat(p); errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("--prompt: no tokenizer: %s does not exist (the prompt is tokenized with the %s of --weights; copy the checkpoint's there or give --tokenizer FILE)", p, tokenizer.File)
	} else if err != nil {
		return "", err
	}
	return p, nil
}

// loadPrompt reads the tokenizer and its config, applies --chat and
// tokenizes the prompt (--prompt or --prompt-file).
func loadPrompt(rf runFlags) (*promptRun, error) {
	text := rf.prompt
	if rf.promptFile != "" {
		data, err := os.ReadFile(rf.promptFile)
		if err != nil {
			return nil, fmt.Errorf("--prompt-file: %v", err)
		}
		text = string(data)
	}
	path, err := tokenizerPath(rf)
	if err != nil {
		return nil, err
	}
	tok, err := tokenizer.Load(path)
	if err != nil {
		return nil, err
	}
	cfg, err := tokenizer.LoadConfig(filepath.Dir(path), tok)
	if err != nil {
		return nil, err
	}
	pr := &promptRun{tok: tok, path: path, text: text, eos: map[int]bool{}}
	if rf.chat {
		if pr.text, err = cfg.ChatML(tok, text); err != nil {
			return nil, fmt.Errorf("--chat: %v", err)
		}
	}
	var src []string
	for _, id := range cfg.EOS {
		pr.eos[id] = true
	}
	if len(cfg.EOS) > 0 {
		src = append(src, strings.Join(baseNames(cfg.Sources), " and "))
	}
	if rf.chat {
		// The assistant's turn ends with <|im_end|> whatever the
		// checkpoint's eos (a base model's is <|endoftext|>).
		id, _ := tok.ID(tokenizer.IMEnd)
		if !pr.eos[id] {
			pr.eos[id] = true
			src = append(src, "--chat")
		}
	}
	pr.eosSrc = strings.Join(src, ", ")
	if pr.ids, err = tok.Encode(pr.text); err != nil {
		return nil, fmt.Errorf("--prompt: %v", err)
	}
	if len(pr.ids) == 0 {
		return nil, fmt.Errorf("--prompt: the prompt is empty (no tokens)")
	}
	pr.stream = tok.NewStream(true)
	return pr, nil
}

func baseNames(paths []string) []string {
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = filepath.Base(p)
	}
	return out
}

// checkVocab fails when the prompt holds an id the model has no embedding
// row for: the tokenizer is not the model's.
func (pr *promptRun) checkVocab(vocab int) error {
	for _, id := range pr.ids {
		if id >= vocab {
			return fmt.Errorf("--prompt: token %d of the prompt is outside the model's vocabulary of %d ids: %s is not this model's tokenizer", id, vocab, pr.path)
		}
	}
	return nil
}

// describe is the run's prompt line.
func (pr *promptRun) describe() string {
	eos := "none declared: the run stops after --steps"
	if pr.eosSrc != "" {
		var names []string
		for _, id := range slices.Sorted(maps.Keys(pr.eos)) {
			s, _ := pr.tok.Token(id)
			names = append(names, fmt.Sprintf("%s (%d)", s, id))
		}
		eos = strings.Join(names, ", ") + " from " + pr.eosSrc
	}
	return fmt.Sprintf("%d tokens %v (%s); end of sequence: %s", len(pr.ids), pr.ids, pr.path, eos)
}

// next takes one generated token: it returns the text the token completes
// (whole characters only) and whether it ends the sequence. The
// end-of-sequence token itself adds no text.
func (pr *promptRun) next(id int) (string, bool) {
	pr.gen = append(pr.gen, id)
	if pr.eos[id] {
		var ok bool
		if pr.stopped, ok = pr.tok.Token(id); !ok {
			pr.stopped = fmt.Sprintf("id %d", id)
		}
		s := pr.stream.Flush()
		pr.out.WriteString(s)
		return s, true
	}
	s := pr.stream.Next(id)
	pr.out.WriteString(s)
	return s, false
}

// flush returns the text held back at the end (an incomplete character).
func (pr *promptRun) flush() string {
	s := pr.stream.Flush()
	pr.out.WriteString(s)
	return s
}

// stopReason says what was generated and why generation ended.
func (pr *promptRun) stopReason(steps int) string {
	why := fmt.Sprintf("stopped after --steps %d", steps)
	if pr.stopped != "" {
		why = "stopped at the end-of-sequence token " + pr.stopped
	}
	return fmt.Sprintf("generated %d tokens %v, %s", len(pr.gen), pr.gen, why)
}

// tokenNote describes a generated id the tokenizer has no token for (a
// model's vocab_size may exceed its tokenizer's, as Qwen's does): it
// decodes to nothing.
func (pr *promptRun) tokenNote(id int) string {
	if _, ok := pr.tok.Token(id); ok {
		return ""
	}
	return " (no token of the tokenizer: decodes to nothing)"
}

// streamWriter writes generated text as it comes; it ends the output with
// a newline when the text does not.
type streamWriter struct {
	w    io.Writer
	last byte
}

func (s *streamWriter) write(text string) {
	if text == "" {
		return
	}
	io.WriteString(s.w, text)
	s.last = text[len(text)-1]
}

func (s *streamWriter) end() {
	if s.last != 0 && s.last != '\n' {
		io.WriteString(s.w, "\n")
	}
}

// checkPromptFlags refuses flag combinations --prompt does not take.
func checkPromptFlags(rf runFlags) error {
	if rf.prompt != "" && rf.promptFile != "" {
		return fmt.Errorf("--prompt and --prompt-file: give one of them")
	}
	if !rf.hasPrompt {
		for _, f := range []struct {
			set  bool
			name string
		}{{rf.chat, "--chat"}, {rf.tokenizer != "", "--tokenizer"}} {
			if f.set {
				return fmt.Errorf("%s applies to a prompt: give --prompt TEXT or --prompt-file FILE", f.name)
			}
		}
		return nil
	}
	if rf.prefillSet {
		return fmt.Errorf("--prefill and --prompt: the prompt's tokens are the prefill (its length is the prompt's)")
	}
	return nil
}
