package tokenizer

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// File is the name of the tokenizer in a checkpoint directory.
const File = "tokenizer.json"

// AddedToken is one entry of a tokenizer.json's added_tokens.
type AddedToken struct {
	ID         int    `json:"id"` // as the library numbers it (see the package doc)
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized bool   `json:"normalized"`
	Special    bool   `json:"special"`
}

// Tokenizer is a tokenizer.json's byte-level BPE tokenizer. It is safe for
// concurrent use.
type Tokenizer struct {
	normalize func(string) string // nil: none
	pre       preTokenizer        // nil: none
	model     *bpe
	byteLevel bool // the decoder is ByteLevel (else tokens join with spaces)

	added     []*AddedToken       // by id order of addition
	addedByID map[int]*AddedToken // id -> token
	addedID   map[string]int      // content -> id
	// normalizedAdded is the normalised content of added tokens with
	// "normalized": true whose content the normalizer changes.
	normalizedAdded map[int]string
	raw, normed     *matcher // added tokens matched before / after normalising
}

// Load reads the tokenizer.json at path.
func Load(path string) (*Tokenizer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	t, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

type fileJSON struct {
	Version       string          `json:"version"`
	AddedTokens   []AddedToken    `json:"added_tokens"`
	Normalizer    json.RawMessage `json:"normalizer"`
	PreTokenizer  json.RawMessage `json:"pre_tokenizer"`
	PostProcessor json.RawMessage `json:"post_processor"`
	Decoder       json.RawMessage `json:"decoder"`
	Model         json.RawMessage `json:"model"`
	Truncation    json.RawMessage `json:"truncation"`
	Padding       json.RawMessage `json:"padding"`
}

// component is the "type" of a normalizer, decoder or post-processor.
type component struct {
	Type          string            `json:"type"`
	Normalizers   []json.RawMessage `json:"normalizers"`
	Decoders      []json.RawMessage `json:"decoders"`
	Processors    []json.RawMessage `json:"processors"`
	TrimOffsets   bool              `json:"trim_offsets"`
	AddPrefix     bool              `json:"add_prefix_space"`
	UseRegexField *bool             `json:"use_regex"`
}

// Parse reads a tokenizer.json.
func Parse(data []byte) (*Tokenizer, error) {
	var f fileJSON
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("tokenizer.json: %v", err)
	}
	if f.Version != "" && f.Version != "1.0" {
		return nil, fmt.Errorf("tokenizer.json version %q is not 1.0", f.Version)
	}
	t := &Tokenizer{addedByID: map[int]*AddedToken{}, addedID: map[string]int{}, normalizedAdded: map[int]string{}}
	var err error
	if t.normalize, err = parseNormalizer(f.Normalizer); err != nil {
		return nil, err
	}
	if t.pre, err = parsePreTokenizer(f.PreTokenizer); err != nil {
		return nil, err
	}
	if len(f.Model) == 0 || string(f.Model) == "null" {
		return nil, fmt.Errorf("tokenizer.json has no model")
	}
	if t.model, err = parseBPE(f.Model); err != nil {
		return nil, err
	}
	if u := t.model.unk; u != "" {
		if _, ok := t.model.vocab[u]; !ok {
			return nil, fmt.Errorf("model: unk_token %q is not in the vocab", u)
		}
	}
	if t.byteLevel, err = parseDecoder(f.Decoder); err != nil {
		return nil, err
	}
	if err := checkPostProcessor(f.PostProcessor); err != nil {
		return nil, err
	}
	next := t.model.nVocab
	for _, at := range f.AddedTokens {
		t.addToken(at, &next)
	}
	t.raw, t.normed = newMatcher(), newMatcher()
	for _, at := range t.added {
		if at.Normalized {
			c := at.Content
			if n, ok := t.normalizedAdded[at.ID]; ok {
				c = n
			}
			t.normed.add(c, at.ID)
		} else {
			t.raw.add(at.Content, at.ID)
		}
	}
	return t, nil
}

// addToken adds an added token as the library's AddedVocabulary.add_tokens
// does: a content the added tokens or the model already have keeps its id,
// a new one takes *next, which counts on from the model vocab's size.
func (t *Tokenizer) addToken(at AddedToken, next *int) {
	if at.Content == "" {
		return
	}
	id, ok := t.addedID[at.Content]
	if ok {
		if old := t.addedByID[id]; old != nil {
			cp := at
			cp.ID = id
			if *old == cp {
				return
			}
		}
	} else if id, ok = t.model.vocab[at.Content]; !ok {
		id = *next
		*next++
	}
	at.ID = id
	delete(t.normalizedAdded, id)
	if at.Normalized && t.normalize != nil {
		if n := t.normalize(at.Content); n != at.Content {
			t.normalizedAdded[id] = n
		}
	}
	t.addedID[at.Content] = id
	if old := t.addedByID[id]; old == nil {
		t.added = append(t.added, &at)
	} else {
		for i, a := range t.added {
			if a == old {
				t.added[i] = &at
			}
		}
	}
	t.addedByID[id] = &at
}

func parseNormalizer(raw json.RawMessage) (func(string) string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var c component
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, fmt.Errorf("normalizer: %v", err)
	}
	switch c.Type {
	case "NFC":
		return norm.NFC.String, nil
	case "NFD":
		return norm.NFD.String, nil
	case "NFKC":
		return norm.NFKC.String, nil
	case "NFKD":
		return norm.NFKD.String, nil
	case "Sequence":
		var fs []func(string) string
		for _, r := range c.Normalizers {
			f, err := parseNormalizer(r)
			if err != nil {
				return nil, err
			}
			if f != nil {
				fs = append(fs, f)
			}
		}
		return func(s string) string {
			for _, f := range fs {
				s = f(s)
			}
			return s
		}, nil
	}
	return nil, fmt.Errorf("normalizer type %q is not supported (NFC, NFD, NFKC, NFKD and Sequence are)", c.Type)
}

// parseDecoder accepts the ByteLevel decoder (true) or none (false).
func parseDecoder(raw json.RawMessage) (bool, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return false, nil
	}
	var c component
	if err := json.Unmarshal(raw, &c); err != nil {
		return false, fmt.Errorf("decoder: %v", err)
	}
	if c.Type == "ByteLevel" {
		return true, nil
	}
	return false, fmt.Errorf("decoder type %q is not supported (ByteLevel is)", c.Type)
}

// checkPostProcessor accepts post-processors that add nothing to a single
// sequence: none, or ByteLevel (it only trims offsets).
func checkPostProcessor(raw json.RawMessage) error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var c component
	if err := json.Unmarshal(raw, &c); err != nil {
		return fmt.Errorf("post_processor: %v", err)
	}
	if c.Type == "ByteLevel" {
		return nil
	}
	return fmt.Errorf("post_processor type %q is not supported (ByteLevel is: it adds no tokens)", c.Type)
}

// Encode returns the token ids of text (invalid UTF-8 is first replaced
// as Decode replaces it). The error is the pre-tokenizer regex's (its
// backtracking limit on pathological input).
func (t *Tokenizer) Encode(text string) ([]int, error) {
	text = validString(text)
	var ids []int
	for _, p := range t.raw.split(text, t.addedByID) {
		if p.id >= 0 {
			ids = append(ids, p.id)
			continue
		}
		s := p.text
		if t.normalize != nil {
			s = t.normalize(s)
		}
		for _, q := range t.normed.split(s, t.addedByID) {
			if q.id >= 0 {
				ids = append(ids, q.id)
				continue
			}
			words, err := t.preTokenize(q.text)
			if err != nil {
				return nil, err
			}
			for _, w := range words {
				ids = t.model.tokenize(ids, w)
			}
		}
	}
	return ids, nil
}

// preTokenize splits normalised text into the words BPE runs on.
func (t *Tokenizer) preTokenize(s string) ([]string, error) {
	if s == "" {
		return nil, nil
	}
	if t.pre == nil {
		return []string{s}, nil
	}
	return t.pre.split([]string{s})
}

// PreTokenize returns the pre-tokens of text as the pre-tokenizer splits
// it after normalisation, without splitting off added tokens (a test's
// view of the pipeline).
func (t *Tokenizer) PreTokenize(text string) ([]string, error) {
	s := validString(text)
	if t.normalize != nil {
		s = t.normalize(s)
	}
	return t.preTokenize(s)
}

// Token returns the token of id: an added token's content (normalised when
// the token is) or the model vocab's token.
func (t *Tokenizer) Token(id int) (string, bool) {
	if at, ok := t.addedByID[id]; ok {
		if n, ok := t.normalizedAdded[id]; ok {
			return n, true
		}
		return at.Content, true
	}
	s, ok := t.model.vocabR[id]
	return s, ok
}

// ID returns the id of token s (an added token's content or a vocab token).
func (t *Tokenizer) ID(s string) (int, bool) {
	if id, ok := t.addedID[s]; ok {
		return id, true
	}
	id, ok := t.model.vocab[s]
	return id, ok
}

// IsSpecial reports whether id is a special added token.
func (t *Tokenizer) IsSpecial(id int) bool {
	at, ok := t.addedByID[id]
	return ok && at.Special
}

// AddedTokens returns the added tokens by id.
func (t *Tokenizer) AddedTokens() []AddedToken {
	out := make([]AddedToken, 0, len(t.added))
	for _, at := range t.added {
		out = append(out, *at)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// MaxID is the largest token id: a model's vocab_size must exceed it.
func (t *Tokenizer) MaxID() int {
	m := t.model.maxID
	for id := range t.addedByID {
		m = max(m, id)
	}
	return m
}

// tokenText is what Decode joins for id: its token, or "" and false when
// the id is unknown or skipped.
func (t *Tokenizer) tokenText(id int, skipSpecial bool) (string, bool) {
	s, ok := t.Token(id)
	if !ok {
		return "", false
	}
	if skipSpecial {
		if aid, ok := t.addedID[s]; ok && t.IsSpecial(aid) {
			return "", false
		}
	}
	return s, true
}

// Decode returns the text of ids. Unknown ids are skipped, and so are
// special tokens when skipSpecial (the library's decode).
func (t *Tokenizer) Decode(ids []int, skipSpecial bool) string {
	if !t.byteLevel {
		var toks []string
		for _, id := range ids {
			if s, ok := t.tokenText(id, skipSpecial); ok {
				toks = append(toks, s)
			}
		}
		return strings.Join(toks, " ")
	}
	var b []byte
	for _, id := range ids {
		if s, ok := t.tokenText(id, skipSpecial); ok {
			b = tokenBytes(b, s)
		}
	}
	return lossy(b)
}

// Stream decodes a generated sequence token by token. Next returns the
// text that the tokens so far add, in whole characters: the bytes of a
// character that the next tokens complete are held back. The
// concatenation of every Next and the final Flush is Decode of all the
// ids (skipSpecial as given).
type Stream struct {
	t           *Tokenizer
	skipSpecial bool
	pending     []byte
	first       bool
}

// NewStream starts a stream.
func (t *Tokenizer) NewStream(skipSpecial bool) *Stream {
	return &Stream{t: t, skipSpecial: skipSpecial, first: true}
}

// Next adds one token and returns the text it completes.
func (s *Stream) Next(id int) string {
	tok, ok := s.t.tokenText(id, s.skipSpecial)
	if !ok {
		return ""
	}
	if !s.t.byteLevel {
		if !s.first {
			tok = " " + tok
		}
		s.first = false
		return tok
	}
	s.pending = tokenBytes(s.pending, tok)
	out, n := lossyPrefix(s.pending, false)
	s.pending = append(s.pending[:0], s.pending[n:]...)
	return out
}

// Flush returns what is held back (an incomplete character, as U+FFFD).
func (s *Stream) Flush() string {
	out := lossy(s.pending)
	s.pending = s.pending[:0]
	return out
}

// matcher finds added tokens in text: at the leftmost position where any
// token starts, the longest one (the library's leftmost-longest
// Aho-Corasick).
type matcher struct {
	byFirst map[byte][]matchEntry // by first byte, longest first
}

type matchEntry struct {
	content string
	id      int
}

func newMatcher() *matcher { return &matcher{byFirst: map[byte][]matchEntry{}} }

func (m *matcher) add(content string, id int) {
	l := append(m.byFirst[content[0]], matchEntry{content, id})
	sort.SliceStable(l, func(i, j int) bool { return len(l[i].content) > len(l[j].content) })
	m.byFirst[content[0]] = l
}

// piece is a part of the text: an added token (id >= 0) or text to
// tokenize (id -1).
type piece struct {
	text string
	id   int
}

// split cuts s at the added tokens it holds (AddedVocabulary::find_matches
// with single_word, lstrip and rstrip); empty pieces are dropped.
func (m *matcher) split(s string, byID map[int]*AddedToken) []piece {
	if len(m.byFirst) == 0 {
		if s == "" {
			return nil
		}
		return []piece{{s, -1}}
	}
	var out []piece
	start := 0 // end of the last piece emitted
	for i := 0; i < len(s); {
		var hit *matchEntry
		for k, e := range m.byFirst[s[i]] {
			if strings.HasPrefix(s[i:], e.content) {
				hit = &m.byFirst[s[i]][k]
				break
			}
		}
		if hit == nil {
			i++
			continue
		}
		lo, hi := i, i+len(hit.content)
		at := byID[hit.id]
		if at.SingleWord {
			startSpace := lo == 0 || !endsWithWord(s[:lo])
			stopSpace := hi == len(s) || !startsWithWord(s[hi:])
			if !startSpace || !stopSpace {
				i = hi // the match is consumed, as the automaton's iterator does
				continue
			}
		}
		if at.LStrip {
			lo = max(len(strings.TrimRightFunc(s[:lo], unicode.IsSpace)), start)
		}
		if at.RStrip {
			hi = len(s) - len(strings.TrimLeftFunc(s[hi:], unicode.IsSpace))
		}
		if start < lo {
			out = append(out, piece{s[start:lo], -1})
		}
		out = append(out, piece{s[lo:hi], hit.id})
		start = hi
		i = max(hi, i+len(hit.content))
	}
	if start < len(s) {
		out = append(out, piece{s[start:], -1})
	}
	return out
}

// isWord is Rust regex's \w: Unicode letters, marks, digits, connector
// punctuation and Join_Control.
func isWord(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsMark(r) || unicode.IsDigit(r) || unicode.Is(unicode.Nd, r) ||
		unicode.Is(unicode.Pc, r) || unicode.Is(unicode.Join_Control, r)
}

func endsWithWord(s string) bool {
	r, _ := utf8.DecodeLastRuneInString(s)
	return s != "" && isWord(r)
}

func startsWithWord(s string) bool {
	r, _ := utf8.DecodeRuneInString(s)
	return s != "" && isWord(r)
}
