package tokenizer

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/dlclark/regexp2/v2"
)

// preTokenizer splits a piece of normalised text into pre-tokens.
type preTokenizer interface {
	split(pieces []string) ([]string, error)
}

// gpt2Pattern is the ByteLevel pre-tokenizer's own regex (use_regex).
const gpt2Pattern = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`

type preJSON struct {
	Type           string            `json:"type"`
	Pretokenizers  []json.RawMessage `json:"pretokenizers"`
	Pattern        map[string]string `json:"pattern"`
	Behavior       string            `json:"behavior"`
	Invert         bool              `json:"invert"`
	AddPrefixSpace bool              `json:"add_prefix_space"`
	UseRegex       *bool             `json:"use_regex"`
}

func parsePreTokenizer(raw json.RawMessage) (preTokenizer, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var j preJSON
	if err := json.Unmarshal(raw, &j); err != nil {
		return nil, fmt.Errorf("pre_tokenizer: %v", err)
	}
	switch j.Type {
	case "Sequence":
		var seq sequencePre
		for _, r := range j.Pretokenizers {
			p, err := parsePreTokenizer(r)
			if err != nil {
				return nil, err
			}
			if p != nil {
				seq = append(seq, p)
			}
		}
		return seq, nil
	case "Split":
		b, ok := behaviors[j.Behavior]
		if !ok {
			return nil, fmt.Errorf("pre_tokenizer Split: behavior %q is not one of Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous", j.Behavior)
		}
		sp := &splitPre{behavior: b, invert: j.Invert}
		if re, ok := j.Pattern["Regex"]; ok {
			var err error
			if sp.re, err = compile(re); err != nil {
				return nil, fmt.Errorf("pre_tokenizer Split: %v", err)
			}
		} else if lit, ok := j.Pattern["String"]; ok {
			sp.literal = lit
		} else {
			return nil, fmt.Errorf("pre_tokenizer Split: pattern has neither Regex nor String")
		}
		return sp, nil
	case "ByteLevel":
		bl := &byteLevelPre{addPrefixSpace: j.AddPrefixSpace, useRegex: j.UseRegex == nil || *j.UseRegex}
		if bl.useRegex {
			bl.re = gpt2Regex
		}
		return bl, nil
	}
	return nil, fmt.Errorf("pre_tokenizer type %q is not supported (Sequence, Split and ByteLevel are)", j.Type)
}

// compile compiles an Oniguruma pattern of a tokenizer.json with regexp2
// (.NET syntax, which the patterns HF tokenizers use share).
func compile(pattern string) (*regexp2.Regexp, error) {
	return regexp2.Compile(pattern, regexp2.None)
}

var gpt2Regex = regexp2.MustCompile(gpt2Pattern, regexp2.None)

type sequencePre []preTokenizer

func (s sequencePre) split(pieces []string) ([]string, error) {
	var err error
	for _, p := range s {
		if pieces, err = p.split(pieces); err != nil {
			return nil, err
		}
	}
	return pieces, nil
}

// behavior is a SplitDelimiterBehavior: what becomes of the matches.
type behavior int

const (
	removed behavior = iota
	isolated
	mergedWithPrevious
	mergedWithNext
	contiguous
)

var behaviors = map[string]behavior{
	"Removed": removed, "Isolated": isolated, "MergedWithPrevious": mergedWithPrevious,
	"MergedWithNext": mergedWithNext, "Contiguous": contiguous,
}

type splitPre struct {
	re       *regexp2.Regexp
	literal  string
	behavior behavior
	invert   bool
}

// span is a byte range of a piece and whether the pattern matched it.
type span struct {
	lo, hi int
	match  bool
}

// findMatches covers s with the pattern's matches and the gaps between
// them, in order (the library's Pattern::find_matches).
func findMatches(re *regexp2.Regexp, literal string, s string) ([]span, error) {
	if s == "" {
		return []span{{0, 0, false}}, nil
	}
	var locs [][]int
	if re != nil {
		var err error
		if locs, err = re.FindAllStringIndex(s, -1); err != nil {
			return nil, fmt.Errorf("pre_tokenizer: regex %q on %d bytes: %v", re.String(), len(s), err)
		}
	} else if literal != "" {
		for i := 0; i <= len(s); {
			j := strings.Index(s[i:], literal)
			if j < 0 {
				break
			}
			locs = append(locs, []int{i + j, i + j + len(literal)})
			i += j + len(literal)
		}
	}
	var out []span
	prev := 0
	for _, l := range locs {
		if prev != l[0] {
			out = append(out, span{prev, l[0], false})
		}
		out = append(out, span{l[0], l[1], true})
		prev = l[1]
	}
	if prev != len(s) {
		out = append(out, span{prev, len(s), false})
	}
	return out, nil
}

func (p *splitPre) split(pieces []string) ([]string, error) {
	var out []string
	for _, s := range pieces {
		ms, err := findMatches(p.re, p.literal, s)
		if err != nil {
			return nil, err
		}
		if p.invert {
			for i := range ms {
				ms[i].match = !ms[i].match
			}
		}
		for _, sp := range applyBehavior(ms, p.behavior) {
			if sp.hi > sp.lo {
				out = append(out, s[sp.lo:sp.hi])
			}
		}
	}
	return out, nil
}

// applyBehavior turns matches and gaps into the pieces to keep
// (NormalizedString::split).
func applyBehavior(ms []span, b behavior) []span {
	var acc []span
	switch b {
	case isolated:
		return ms
	case removed:
		for _, m := range ms {
			if !m.match {
				acc = append(acc, m)
			}
		}
		return acc
	case contiguous:
		prev := false
		for _, m := range ms {
			if m.match == prev && len(acc) > 0 {
				acc[len(acc)-1].hi = m.hi
			} else {
				acc = append(acc, m)
			}
			prev = m.match
		}
		return acc
	case mergedWithPrevious:
		prev := false
		for _, m := range ms {
			if m.match && !prev && len(acc) > 0 {
				acc[len(acc)-1].hi = m.hi
			} else {
				acc = append(acc, m)
			}
			prev = m.match
		}
		return acc
	case mergedWithNext:
		prev := false
		for i := len(ms) - 1; i >= 0; i-- {
			m := ms[i]
			if m.match && !prev && len(acc) > 0 {
				acc[len(acc)-1].lo = m.lo
			} else {
				acc = append(acc, m)
			}
			prev = m.match
		}
		for i, j := 0, len(acc)-1; i < j; i, j = i+1, j-1 {
			acc[i], acc[j] = acc[j], acc[i]
		}
		return acc
	}
	return ms
}

// byteLevelPre is the ByteLevel pre-tokenizer: optionally a prefix space
// and GPT-2's split, then every byte to its symbol.
type byteLevelPre struct {
	addPrefixSpace, useRegex bool
	re                       *regexp2.Regexp
}

func (p *byteLevelPre) split(pieces []string) ([]string, error) {
	var out []string
	for _, s := range pieces {
		if p.addPrefixSpace && !strings.HasPrefix(s, " ") {
			s = " " + s
		}
		parts := []string{s}
		if p.useRegex {
			ms, err := findMatches(p.re, "", s)
			if err != nil {
				return nil, err
			}
			parts = parts[:0]
			for _, sp := range ms {
				if sp.hi > sp.lo {
					parts = append(parts, s[sp.lo:sp.hi])
				}
			}
		}
		for _, w := range parts {
			out = append(out, byteLevel(w))
		}
	}
	return out, nil
}
