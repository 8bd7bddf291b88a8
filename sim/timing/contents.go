package timing

import (
	"fmt"
	"sort"

	"github.com/tcc-dev/tcc/codegen/kir"
)

// knownBuf is a DRAM buffer of known contents (Options.Contents) as the
// model placed it: its synthetic base address, which is the same in every
// bank, the bytes it spans in a bank, and its page layout.
type knownBuf struct {
	name             string
	base, span       uint64
	stride, pageSize uint64
	pages            uint64
	words            []uint32
}

// Synthetic DRAM and L1 buffer addresses: distinct, and far enough apart
// that no buffer's pages in a bank reach into the next buffer's.
const (
	bufBase  = 0x100000
	bufAlign = 0x10000
)

// place gives every buffer of the program a synthetic address: the
// buffers of known contents first, then the others, each after the bytes
// the previous one spans in a bank (so a read of another buffer never
// lands in a known one). Only the known buffers' addresses matter: the
// model moves no other data.
func (m *machine) place() error {
	p := m.prog
	m.bufAddr = map[string]uint32{}
	for name := range m.contents {
		if p.Buffer(name) == nil {
			return fmt.Errorf("program %q: known contents of buffer %q, which the program does not declare", p.Name, name)
		}
	}
	next := uint64(bufBase)
	add := func(b *kir.Buffer) error {
		stride := uint64(m.t.DRAMPageSize(b.PageSize))
		span := uint64(b.PageSize) * uint64(b.Pages)
		if b.Mem.Kind.IsDRAM() {
			span = uint64(b.DRAMBytesPerBank(m.t.DRAMBanks, int(stride)))
		}
		m.bufAddr[b.Name] = uint32(next)
		if words, ok := m.contents[b.Name]; ok {
			if !b.Mem.Kind.IsDRAM() || b.Blocks != nil || b.PageSize <= 0 || b.PageSize%4 != 0 {
				return fmt.Errorf("program %q: known contents of buffer %q (%s, pages of %d bytes): only a DRAM-interleaved buffer not placed in blocks, with pages of a multiple of 4 bytes, can have them",
					p.Name, b.Name, b.Mem, b.PageSize)
			}
			m.known = append(m.known, &knownBuf{name: b.Name, base: next, span: span, stride: stride,
				pageSize: uint64(b.PageSize), pages: uint64(b.Pages), words: words})
		}
		next += (max(span, 1) + bufAlign - 1) / bufAlign * bufAlign
		return nil
	}
	for pass := 0; pass < 2; pass++ {
		for i := range p.Buffers {
			b := &p.Buffers[i]
			if _, ok := m.contents[b.Name]; ok == (pass == 0) {
				if err := add(b); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// dataWord is one known 32-bit value at an offset of a transfer.
type dataWord struct {
	off uint64
	v   uint32
}

// knownWords are the words of the known buffers that a read of size bytes
// from DRAM bank bank at address addr covers, by offset in the read.
func (m *machine) knownWords(bank int, addr, size uint64) []dataWord {
	var out []dataWord
	banks := uint64(m.t.DRAMBanks)
	for _, kb := range m.known {
		lo, hi := max(addr, kb.base), min(addr+size, kb.base+kb.span)
		if lo >= hi {
			continue
		}
		// the first word boundary of the buffer's data at or after lo
		rel := lo - kb.base
		rel += (4 - rel%4) % 4
		for ; kb.base+rel+4 <= hi; rel += 4 {
			slot, in := rel/kb.stride, rel%kb.stride
			page := slot*banks + uint64(bank)
			if in >= kb.pageSize || page >= kb.pages {
				continue
			}
			var v uint32
			if w := (page*kb.pageSize + in) / 4; w < uint64(len(kb.words)) {
				v = kb.words[w]
			}
			out = append(out, dataWord{kb.base + rel - addr, v})
		}
	}
	return out
}

// dataWords are the data words (core.data) of c in the size bytes at
// addr, by offset, in address order.
func dataWords(c *core, addr, size uint64) []dataWord {
	var out []dataWord
	for a := range c.data {
		if uint64(a) >= addr && uint64(a)+4 <= addr+size {
			out = append(out, dataWord{uint64(a) - addr, c.word(a).v})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].off < out[j].off })
	return out
}

// land is the data side of a transfer of size bytes into core c's L1 at
// dst completing at time at: the data words it overwrites are no longer
// known (they read 0 again), and the known words it carries (ws, by
// offset) are stored.
func (th *thread) land(c *core, dst, size uint64, ws []dataWord, at float64) {
	if c == nil {
		return
	}
	for _, w := range dataWords(c, dst, size) {
		a := uint32(dst + w.off)
		delete(c.data, a)
		c.word(a).v = 0
	}
	for _, w := range ws {
		a := uint32(dst + w.off)
		c.data[a] = true
		th.setWord(c.word(a), w.v, at)
	}
}
