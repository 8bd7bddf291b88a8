package tokenizer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

const synthDir = "testdata/qwen-synth"

// vectors is testdata/qwen-synth/vectors.json, made by make_vectors.mjs
// with Hugging Face's Rust tokenizers (README.md there).
type vectors struct {
	Meta   map[string]any `json:"meta"`
	Encode []struct {
		Text               string   `json:"text"`
		Normalized         string   `json:"normalized"`
		Pretokens          []string `json:"pretokens"`
		IDs                []int    `json:"ids"`
		Tokens             []string `json:"tokens"`
		Decoded            string   `json:"decoded"`
		DecodedSkipSpecial string   `json:"decoded_skip_special"`
	} `json:"encode"`
	Decode []struct {
		IDs                []int   `json:"ids"`
		Decoded            string  `json:"decoded"`
		DecodedSkipSpecial *string `json:"decoded_skip_special"`
	} `json:"decode"`
}

func loadVectors(t *testing.T) vectors {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(synthDir, "vectors.json"))
	if err != nil {
		t.Fatal(err)
	}
	var v vectors
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	if len(v.Encode) < 40 || len(v.Decode) < 10 {
		t.Fatalf("vectors.json has %d encode and %d decode vectors", len(v.Encode), len(v.Decode))
	}
	return v
}

func loadSynth(t *testing.T) *Tokenizer {
	t.Helper()
	tok, err := Load(filepath.Join(synthDir, File))
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// withPairMerges rewrites a tokenizer.json's "a b" merges as [a, b] pairs
// (the form tokenizers 0.20 on saves, Qwen3's).
func withPairMerges(t *testing.T, data []byte) []byte {
	t.Helper()
	var f map[string]any
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	model := f["model"].(map[string]any)
	var pairs [][]string
	for _, m := range model["merges"].([]any) {
		pairs = append(pairs, strings.Split(m.(string), " "))
	}
	model["merges"] = pairs
	out, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestVectors: every reference vector, encoded and decoded, with merges in
// both forms: the ids, the tokens, the pre-tokens, the decoded text with
// and without special tokens.
func TestVectors(t *testing.T) {
	v := loadVectors(t)
	data, err := os.ReadFile(filepath.Join(synthDir, File))
	if err != nil {
		t.Fatal(err)
	}
	for _, form := range []struct {
		name string
		data []byte
	}{{"string merges", data}, {"pair merges", withPairMerges(t, data)}} {
		t.Run(form.name, func(t *testing.T) {
			tok, err := Parse(form.data)
			if err != nil {
				t.Fatal(err)
			}
			passed := 0
			for _, c := range v.Encode {
				ok := true
				ids, err := tok.Encode(c.Text)
				if err != nil {
					t.Errorf("Encode(%q): %v", c.Text, err)
					continue
				}
				if !slices.Equal(ids, c.IDs) && (len(ids) > 0 || len(c.IDs) > 0) {
					t.Errorf("Encode(%q)\n got %v\nwant %v (%q)", c.Text, ids, c.IDs, c.Tokens)
					ok = false
				}
				var toks []string
				for _, id := range ids {
					s, _ := tok.Token(id)
					toks = append(toks, s)
				}
				if !slices.Equal(toks, c.Tokens) && (len(toks) > 0 || len(c.Tokens) > 0) {
					t.Errorf("tokens of %q: %q, want %q", c.Text, toks, c.Tokens)
					ok = false
				}
				pre, err := tok.PreTokenize(c.Text)
				if err != nil || (!slices.Equal(pre, c.Pretokens) && (len(pre) > 0 || len(c.Pretokens) > 0)) {
					t.Errorf("PreTokenize(%q) = %q, %v; want %q", c.Text, pre, err, c.Pretokens)
					ok = false
				}
				if got := tok.Decode(c.IDs, false); got != c.Decoded {
					t.Errorf("Decode(%v) = %q, want %q", c.IDs, got, c.Decoded)
					ok = false
				}
				if got := tok.Decode(c.IDs, true); got != c.DecodedSkipSpecial {
					t.Errorf("Decode(%v, skip special) = %q, want %q", c.IDs, got, c.DecodedSkipSpecial)
					ok = false
				}
				if ok {
					passed++
				}
			}
			for _, c := range v.Decode {
				if got := tok.Decode(c.IDs, false); got != c.Decoded {
					t.Errorf("Decode(%v) = %q, want %q", c.IDs, got, c.Decoded)
				} else {
					passed++
				}
				if c.DecodedSkipSpecial != nil {
					if got := tok.Decode(c.IDs, true); got != *c.DecodedSkipSpecial {
						t.Errorf("Decode(%v, skip special) = %q, want %q", c.IDs, got, *c.DecodedSkipSpecial)
					}
				}
			}
			t.Logf("%d of %d vectors reproduced (%d encode, %d decode)", passed, len(v.Encode)+len(v.Decode), len(v.Encode), len(v.Decode))
		})
	}
}

// TestStream: decoding token by token hands out valid UTF-8 only, and all
// of it, flushed, is Decode of the whole sequence; a character split over
// tokens comes out whole with the token that completes it.
func TestStream(t *testing.T) {
	tok := loadSynth(t)
	v := loadVectors(t)
	var seqs [][]int
	for _, c := range v.Encode {
		seqs = append(seqs, c.IDs)
	}
	for _, c := range v.Decode {
		seqs = append(seqs, c.IDs)
	}
	for _, ids := range seqs {
		for _, skip := range []bool{false, true} {
			s := tok.NewStream(skip)
			var sb strings.Builder
			for _, id := range ids {
				part := s.Next(id)
				if !utf8.ValidString(part) {
					t.Errorf("stream of %v: piece %q is not valid UTF-8", ids, part)
				}
				sb.WriteString(part)
			}
			sb.WriteString(s.Flush())
			if got, want := sb.String(), tok.Decode(ids, skip); got != want {
				t.Errorf("stream of %v (skip special %v) = %q, Decode = %q", ids, skip, got, want)
			}
		}
	}
	// 😀 is F0 9F 98 80: byte tokens one by one.
	s := tok.NewStream(false)
	var parts []string
	for _, b := range []byte("a😀b") {
		id, ok := tok.ID(ByteSymbol(b))
		if !ok {
			t.Fatalf("no byte token for %#x", b)
		}
		parts = append(parts, s.Next(id))
	}
	if want := []string{"a", "", "", "", "😀", "b"}; !slices.Equal(parts, want) {
		t.Errorf("streamed pieces %q, want %q", parts, want)
	}
	if f := s.Flush(); f != "" {
		t.Errorf("Flush = %q, want nothing held back", f)
	}
	s = tok.NewStream(false)
	id, _ := tok.ID(ByteSymbol(0xF0))
	if got := s.Next(id) + s.Flush(); got != "\uFFFD" {
		t.Errorf("an incomplete character flushed = %q, want U+FFFD", got)
	}
}

func TestLossy(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"abc", "abc"},
		{"\xF0\x9F", "\uFFFD"},
		{"\xE2\x82A", "\uFFFDA"},
		{"\x80\x80A", "\uFFFD\uFFFDA"},
		{"\xC0\xAF", "\uFFFD\uFFFD"},
		{"\xED\xA0\x80", "\uFFFD\uFFFD\uFFFD"},
		{"\xEF\xBF\xBD", "\uFFFD"},
		{"é\xE6", "é\uFFFD"},
	} {
		if got := lossy([]byte(c.in)); got != c.want {
			t.Errorf("lossy(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestAddedTokenIDs: added tokens are numbered as the library numbers
// them, from the vocab's size on, and ids are below MaxID + 1.
func TestAddedTokenIDs(t *testing.T) {
	tok := loadSynth(t)
	at := tok.AddedTokens()
	if len(at) != 5 {
		t.Fatalf("%d added tokens, want 5", len(at))
	}
	for i, a := range at {
		if a.ID != 1213+i {
			t.Errorf("added token %q has id %d, want %d", a.Content, a.ID, 1213+i)
		}
	}
	if id, ok := tok.ID("<|im_end|>"); !ok || id != 1215 || !tok.IsSpecial(id) {
		t.Errorf("<|im_end|>: id %d, %v, special %v", id, ok, tok.IsSpecial(id))
	}
	if id, _ := tok.ID("<think>"); tok.IsSpecial(id) {
		t.Errorf("<think> is special")
	}
	if tok.MaxID() != 1217 {
		t.Errorf("MaxID = %d, want 1217", tok.MaxID())
	}
}

// TestAddedTokenOptions: lstrip, rstrip and single_word, and tokens with
// "normalized": true matched after normalisation.
func TestAddedTokenOptions(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(synthDir, File))
	if err != nil {
		t.Fatal(err)
	}
	var f map[string]any
	json.Unmarshal(data, &f)
	f["added_tokens"] = append(f["added_tokens"].([]any),
		map[string]any{"id": 0, "content": "<L>", "lstrip": true, "normalized": false, "special": true},
		map[string]any{"id": 0, "content": "<R>", "rstrip": true, "normalized": false, "special": true},
		map[string]any{"id": 0, "content": "word", "single_word": true, "normalized": false, "special": false},
		map[string]any{"id": 0, "content": "cafe\u0301", "normalized": true, "special": false},
	)
	data, _ = json.Marshal(f)
	tok, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	id := func(s string) int {
		i, ok := tok.ID(s)
		if !ok {
			t.Fatalf("no id for %q", s)
		}
		return i
	}
	enc := func(s string) []int {
		ids, err := tok.Encode(s)
		if err != nil {
			t.Fatal(err)
		}
		return ids
	}
	if got, want := enc("a  <L>"), append(enc("a"), id("<L>")); !slices.Equal(got, want) {
		t.Errorf("lstrip: %v, want %v", got, want)
	}
	if got, want := enc("<R>  b"), append([]int{id("<R>")}, enc("b")...); !slices.Equal(got, want) {
		t.Errorf("rstrip: %v, want %v", got, want)
	}
	if got := enc("a word b"); !slices.Contains(got, id("word")) {
		t.Errorf("single_word: %q gives %v, no token %d", "a word b", got, id("word"))
	}
	if got := enc("swordfish"); slices.Contains(got, id("word")) {
		t.Errorf("single_word: %q gives %v, with the token inside a word", "swordfish", got)
	}
	// The normalised content (NFC: café) matches both spellings.
	cafe := id("cafe\u0301")
	for _, s := range []string{"café", "cafe\u0301"} {
		if got := enc(s); !slices.Equal(got, []int{cafe}) {
			t.Errorf("normalized added token: %q gives %v, want [%d]", s, got, cafe)
		}
	}
	if got, _ := tok.Token(cafe); got != "café" {
		t.Errorf("Token(%d) = %q, want the normalised content", cafe, got)
	}
}

// TestSplitBehaviors: each SplitDelimiterBehavior on "a-b--c" split at "-"
// (the library's own test cases).
func TestSplitBehaviors(t *testing.T) {
	for _, c := range []struct {
		behavior string
		invert   bool
		want     []string
	}{
		{"Removed", false, []string{"a", "b", "c"}},
		{"Isolated", false, []string{"a", "-", "b", "-", "-", "c"}},
		{"MergedWithPrevious", false, []string{"a-", "b-", "-", "c"}},
		{"MergedWithNext", false, []string{"a", "-b", "-", "-c"}},
		{"Contiguous", false, []string{"a", "-", "b", "--", "c"}},
		{"Removed", true, []string{"-", "-", "-"}},
	} {
		for _, pat := range []map[string]string{{"String": "-"}, {"Regex": "-"}} {
			raw, _ := json.Marshal(map[string]any{"type": "Split", "pattern": pat, "behavior": c.behavior, "invert": c.invert})
			p, err := parsePreTokenizer(raw)
			if err != nil {
				t.Fatal(err)
			}
			got, err := p.split([]string{"a-b--c"})
			if err != nil || !slices.Equal(got, c.want) {
				t.Errorf("%s invert %v %v: %q, %v; want %q", c.behavior, c.invert, pat, got, err, c.want)
			}
		}
	}
}

// TestByteLevelRegex: the ByteLevel pre-tokenizer with use_regex splits
// with GPT-2's regex, and add_prefix_space adds the space once.
func TestByteLevelRegex(t *testing.T) {
	p, err := parsePreTokenizer(json.RawMessage(`{"type": "ByteLevel", "add_prefix_space": true}`))
	if err != nil {
		t.Fatal(err)
	}
	got, err := p.split([]string{"Hello world's  end"})
	want := []string{"ĠHello", "Ġworld", "'s", "Ġ", "Ġend"}
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("ByteLevel: %q, %v; want %q", got, err, want)
	}
}

// TestBPEMergeOrder: merges apply lowest rank first, leftmost first among
// equal ranks; a character missing from the vocab is dropped.
func TestBPEMergeOrder(t *testing.T) {
	raw := json.RawMessage(`{"type": "BPE", "vocab": {"a": 0, "b": 1, "aa": 2, "ab": 3, "aab": 4, "aaa": 5},
		"merges": ["a a", "a b", "aa b", "aa a"]}`)
	m, err := parseBPE(raw)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		in   string
		want []int
	}{
		{"aaa", []int{5}},     // a a -> aa, then aa a
		{"aab", []int{4}},     // a a first (rank 0), then aa b
		{"aaaa", []int{2, 2}}, // leftmost pairs first: aa aa
		{"abxa", []int{3, 0}}, // x is not in the vocab: dropped
	} {
		if got := m.tokenize(nil, c.in); !slices.Equal(got, c.want) {
			t.Errorf("tokenize(%q) = %v, want %v", c.in, got, c.want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	base := func(edit func(map[string]any)) []byte {
		data, err := os.ReadFile(filepath.Join(synthDir, File))
		if err != nil {
			t.Fatal(err)
		}
		var f map[string]any
		json.Unmarshal(data, &f)
		edit(f)
		out, _ := json.Marshal(f)
		return out
	}
	for _, c := range []struct {
		name string
		data []byte
		want string
	}{
		{"not json", []byte("{"), "tokenizer.json"},
		{"wordpiece", base(func(f map[string]any) { f["model"].(map[string]any)["type"] = "WordPiece" }), `model type "WordPiece" is not supported`},
		{"dropout", base(func(f map[string]any) { f["model"].(map[string]any)["dropout"] = 0.1 }), "dropout"},
		{"metaspace", base(func(f map[string]any) { f["pre_tokenizer"] = map[string]any{"type": "Metaspace"} }), `pre_tokenizer type "Metaspace"`},
		{"lowercase", base(func(f map[string]any) { f["normalizer"] = map[string]any{"type": "Lowercase"} }), `normalizer type "Lowercase"`},
		{"template", base(func(f map[string]any) { f["post_processor"] = map[string]any{"type": "TemplateProcessing"} }), `post_processor type "TemplateProcessing"`},
		{"bad merge", base(func(f map[string]any) { f["model"].(map[string]any)["merges"] = []any{"a b c"} }), "merge 0"},
		{"merge not in vocab", base(func(f map[string]any) { f["model"].(map[string]any)["merges"] = []any{"zz qq"} }), `"zz" is not in the vocab`},
		{"bad regex", base(func(f map[string]any) {
			f["pre_tokenizer"] = map[string]any{"type": "Split", "pattern": map[string]any{"Regex": "(("}, "behavior": "Isolated"}
		}), "Split"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := Parse(c.data); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Parse: %v, want an error containing %q", err, c.want)
			}
		})
	}
	if _, err := Load(filepath.Join(t.TempDir(), File)); err == nil || !strings.Contains(err.Error(), File) {
		t.Errorf("Load of a missing file: %v", err)
	}
}

// TestInvalidInput: invalid UTF-8 in the text is replaced, not refused.
func TestInvalidInput(t *testing.T) {
	tok := loadSynth(t)
	ids, err := tok.Encode("a\xffb")
	if err != nil {
		t.Fatal(err)
	}
	if got := tok.Decode(ids, false); got != "a\uFFFDb" {
		t.Errorf("round trip of invalid UTF-8: %q", got)
	}
}

func TestConfig(t *testing.T) {
	tok := loadSynth(t)
	c, err := LoadConfig(synthDir, tok)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.EOS, []int{1215}) || !strings.Contains(c.ChatTemplate, "<|im_start|>") {
		t.Errorf("config: EOS %v, template %q", c.EOS, c.ChatTemplate)
	}
	p, err := c.ChatML(tok, "hello")
	if want := "<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n"; err != nil || p != want {
		t.Errorf("ChatML = %q, %v; want %q", p, err, want)
	}
	// generation_config.json adds its ids; an object eos_token is read.
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, ConfigFile), []byte(`{"eos_token": {"content": "<|endoftext|>"}, "chat_template": [{"name": "default", "template": "{{ x }}"}]}`), 0o644)
	os.WriteFile(filepath.Join(dir, GenerationConfigFile), []byte(`{"eos_token_id": [1215, 1213]}`), 0o644)
	c, err = LoadConfig(dir, tok)
	if err != nil || !slices.Equal(c.EOS, []int{1213, 1215}) {
		t.Errorf("config: EOS %v, %v; want [1213 1215]", c.EOS, err)
	}
	if _, err := c.ChatML(tok, "x"); err == nil || !strings.Contains(err.Error(), "ChatML") {
		t.Errorf("ChatML with a non-ChatML template: %v", err)
	}
	os.WriteFile(filepath.Join(dir, GenerationConfigFile), []byte(`{"eos_token_id": 7}`), 0o644)
	if c, err = LoadConfig(dir, tok); err != nil || !slices.Equal(c.EOS, []int{1213, 7}) {
		t.Errorf("config: EOS %v, %v; want [1213 7]", c.EOS, err)
	}
	os.WriteFile(filepath.Join(dir, ConfigFile), []byte(`{"eos_token": "<nope>"}`), 0o644)
	if _, err = LoadConfig(dir, tok); err == nil || !strings.Contains(err.Error(), "<nope>") {
		t.Errorf("unknown eos_token: %v", err)
	}
	// No files: no EOS, no template.
	if c, err = LoadConfig(t.TempDir(), tok); err != nil || len(c.EOS) != 0 || c.ChatTemplate != "" {
		t.Errorf("empty dir: %+v, %v", c, err)
	}
}
