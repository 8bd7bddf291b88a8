package tokenizer

import (
	"container/heap"
	"encoding/json"
	"fmt"
	"strings"
)

// bpe is the BPE model of a tokenizer.json.
type bpe struct {
	vocab  map[string]int
	vocabR map[int]string
	// merges maps a pair of ids to its rank (its index in the merges list)
	// and the id of the merged token.
	merges        map[[2]int]merge
	unk           string // "" : none
	fuseUnk       bool
	byteFallback  bool
	ignoreMerges  bool
	prefix        string // continuing_subword_prefix
	suffix        string // end_of_word_suffix
	maxID, nVocab int
}

type merge struct{ rank, id int }

// bpeJSON is the "model" object of a tokenizer.json.
type bpeJSON struct {
	Type         string          `json:"type"`
	Dropout      *float64        `json:"dropout"`
	UnkToken     *string         `json:"unk_token"`
	Prefix       *string         `json:"continuing_subword_prefix"`
	Suffix       *string         `json:"end_of_word_suffix"`
	FuseUnk      bool            `json:"fuse_unk"`
	ByteFallback bool            `json:"byte_fallback"`
	IgnoreMerges bool            `json:"ignore_merges"`
	Vocab        map[string]int  `json:"vocab"`
	Merges       json.RawMessage `json:"merges"`
}

func parseBPE(raw json.RawMessage) (*bpe, error) {
	var j bpeJSON
	if err := json.Unmarshal(raw, &j); err != nil {
		return nil, fmt.Errorf("model: %v", err)
	}
	if j.Type != "BPE" && j.Type != "" {
		return nil, fmt.Errorf("model type %q is not supported (only BPE)", j.Type)
	}
	if j.Dropout != nil && *j.Dropout != 0 {
		return nil, fmt.Errorf("model: BPE dropout %v is not supported (it merges at random)", *j.Dropout)
	}
	if j.Vocab == nil {
		return nil, fmt.Errorf("model: no vocab")
	}
	m := &bpe{vocab: j.Vocab, vocabR: make(map[int]string, len(j.Vocab)), merges: map[[2]int]merge{},
		fuseUnk: j.FuseUnk, byteFallback: j.ByteFallback, ignoreMerges: j.IgnoreMerges, nVocab: len(j.Vocab), maxID: -1}
	if j.UnkToken != nil {
		m.unk = *j.UnkToken
	}
	if j.Prefix != nil {
		m.prefix = *j.Prefix
	}
	if j.Suffix != nil {
		m.suffix = *j.Suffix
	}
	for tok, id := range j.Vocab {
		if id < 0 {
			return nil, fmt.Errorf("model: token %q has id %d", tok, id)
		}
		m.vocabR[id] = tok
		m.maxID = max(m.maxID, id)
	}
	pairs, err := parseMerges(j.Merges)
	if err != nil {
		return nil, err
	}
	for rank, p := range pairs {
		a, ok := m.vocab[p[0]]
		if !ok {
			return nil, fmt.Errorf("model: merge %d: %q is not in the vocab", rank, p[0])
		}
		b, ok := m.vocab[p[1]]
		if !ok {
			return nil, fmt.Errorf("model: merge %d: %q is not in the vocab", rank, p[1])
		}
		joined := p[0] + strings.TrimPrefix(p[1], m.prefix)
		if len(p[1]) < len(m.prefix) {
			joined = p[0] + p[1]
		}
		id, ok := m.vocab[joined]
		if !ok {
			return nil, fmt.Errorf("model: merge %d: %q is not in the vocab", rank, joined)
		}
		// A later duplicate replaces an earlier one, as in the library.
		m.merges[[2]int{a, b}] = merge{rank: rank, id: id}
	}
	return m, nil
}

// parseMerges reads merges as "a b" strings (older files, Qwen2.5's) or
// as [a, b] pairs (tokenizers 0.20 on).
func parseMerges(raw json.RawMessage) ([][2]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var strs []string
	if err := json.Unmarshal(raw, &strs); err == nil {
		out := make([][2]string, len(strs))
		for i, s := range strs {
			parts := strings.Split(s, " ")
			if len(parts) != 2 {
				return nil, fmt.Errorf("model: merge %d %q is not two tokens separated by one space", i, s)
			}
			out[i] = [2]string{parts[0], parts[1]}
		}
		return out, nil
	}
	var pairs [][]string
	if err := json.Unmarshal(raw, &pairs); err != nil {
		return nil, fmt.Errorf("model: merges are neither \"a b\" strings nor [a, b] pairs: %v", err)
	}
	out := make([][2]string, len(pairs))
	for i, p := range pairs {
		if len(p) != 2 {
			return nil, fmt.Errorf("model: merge %d has %d tokens, want 2", i, len(p))
		}
		out[i] = [2]string{p[0], p[1]}
	}
	return out, nil
}

// symbol is one symbol of a word being merged: a doubly linked list over
// the word's initial characters; a merged-away symbol has n == 0.
type symbol struct {
	id, prev, next, n int
}

// candidate is a possible merge of the symbol at pos with its next one.
type candidate struct{ pos, rank, id int }

type mergeQueue []candidate

func (q mergeQueue) Len() int { return len(q) }
func (q mergeQueue) Less(i, j int) bool {
	if q[i].rank != q[j].rank {
		return q[i].rank < q[j].rank
	}
	return q[i].pos < q[j].pos
}
func (q mergeQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *mergeQueue) Push(x any)   { *q = append(*q, x.(candidate)) }
func (q *mergeQueue) Pop() any {
	old := *q
	x := old[len(old)-1]
	*q = old[:len(old)-1]
	return x
}

// tokenize appends the ids of one pre-token (a "word").
func (m *bpe) tokenize(dst []int, w string) []int {
	if w == "" {
		return dst
	}
	if m.ignoreMerges {
		if id, ok := m.vocab[w]; ok {
			return append(dst, id)
		}
	}
	var syms []symbol
	add := func(id, n int) {
		syms = append(syms, symbol{id: id, prev: len(syms) - 1, next: len(syms) + 1, n: n})
	}
	unkID, unkN := -1, 0
	for i, r := range w {
		n := len(string(r))
		s := w[i : i+n]
		if i > 0 && m.prefix != "" {
			s = m.prefix + s
		}
		if i+n == len(w) && m.suffix != "" {
			s += m.suffix
		}
		if id, ok := m.vocab[s]; ok {
			if unkID >= 0 {
				add(unkID, unkN)
				unkID = -1
			}
			add(id, n)
			continue
		}
		if m.byteFallback {
			ids := make([]int, 0, len(s))
			for j := 0; j < len(s); j++ {
				id, ok := m.vocab[fmt.Sprintf("<0x%02X>", s[j])]
				if !ok {
					ids = nil
					break
				}
				ids = append(ids, id)
			}
			if ids != nil {
				for _, id := range ids {
					add(id, 1)
				}
				continue
			}
		}
		if m.unk != "" {
			id, ok := m.vocab[m.unk]
			if !ok {
				continue // Parse checked it; unreachable
			}
			switch {
			case unkID >= 0 && m.fuseUnk:
				unkN += n
			case unkID >= 0:
				add(unkID, unkN)
				unkID, unkN = id, n
			default:
				unkID, unkN = id, n
			}
		}
		// Without unk_token or byte fallback, a character missing from the
		// vocab is dropped, as in the library.
	}
	if unkID >= 0 {
		add(unkID, unkN)
	}
	if len(syms) == 0 {
		return dst
	}
	syms[len(syms)-1].next = -1
	q := mergeQueue{}
	for i := 0; i+1 < len(syms); i++ {
		if mg, ok := m.merges[[2]int{syms[i].id, syms[i+1].id}]; ok {
			q = append(q, candidate{pos: i, rank: mg.rank, id: mg.id})
		}
	}
	heap.Init(&q)
	for q.Len() > 0 {
		top := heap.Pop(&q).(candidate)
		cur := &syms[top.pos]
		if cur.n == 0 || cur.next == -1 {
			continue
		}
		rp := cur.next
		right := syms[rp]
		if mg, ok := m.merges[[2]int{cur.id, right.id}]; !ok || mg.id != top.id {
			continue // stale: one side was merged since
		}
		cur.id, cur.n, cur.next = top.id, cur.n+right.n, right.next
		syms[rp].n = 0
		if right.next >= 0 {
			syms[right.next].prev = top.pos
		}
		if cur.prev >= 0 {
			p := syms[cur.prev]
			if mg, ok := m.merges[[2]int{p.id, cur.id}]; ok {
				heap.Push(&q, candidate{pos: cur.prev, rank: mg.rank, id: mg.id})
			}
		}
		if cur.next >= 0 {
			nx := syms[cur.next]
			if mg, ok := m.merges[[2]int{cur.id, nx.id}]; ok {
				heap.Push(&q, candidate{pos: top.pos, rank: mg.rank, id: mg.id})
			}
		}
	}
	for i := 0; i >= 0 && i < len(syms); i = syms[i].next {
		dst = append(dst, syms[i].id)
	}
	return dst
}
