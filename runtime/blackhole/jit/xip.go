package jit

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
)

// RISC-V relocation types and opcodes XIP handles.
const (
	rRISCV32         = 1
	rRISCVJAL        = 17
	rRISCVCall       = 18
	rRISCVCallPLT    = 19
	rRISCVPCRelHi20  = 23
	rRISCVPCRelLo12I = 24
	rRISCVPCRelLo12S = 25
	rRISCVHi20       = 26
	rRISCVLo12I      = 27
	rRISCVLo12S      = 28
	opLUI            = 0x37
	opAUIPC          = 0x17
)

type sym32 struct {
	name  string
	value uint32
	info  uint8
	shndx uint16
}

type elfFile struct {
	f     *elf.File
	data  []byte // the file; XIP patches a copy
	loads []*elf.Prog
}

func parseELF(data []byte) (*elfFile, error) {
	f, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	if f.Class != elf.ELFCLASS32 || f.Data != elf.ELFDATA2LSB {
		return nil, fmt.Errorf("not a little-endian ELF32")
	}
	e := &elfFile{f: f, data: data}
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD {
			e.loads = append(e.loads, p)
		}
	}
	if len(e.loads) == 0 {
		return nil, fmt.Errorf("no PT_LOAD segment")
	}
	return e, nil
}

// segOf is the PT_LOAD segment section shndx lies in, nil for none
// (undefined, absolute, non-alloc).
func (e *elfFile) segOf(shndx uint16) *elf.Prog {
	if shndx == 0 || int(shndx) >= len(e.f.Sections) {
		return nil
	}
	s := e.f.Sections[shndx]
	if s.Flags&elf.SHF_ALLOC == 0 {
		return nil
	}
	for _, p := range e.loads {
		if uint64(uint32(s.Addr+s.Size-p.Vaddr)) <= p.Memsz {
			return p
		}
	}
	return nil
}

func (e *elfFile) symbols(symtab *elf.Section) ([]sym32, error) {
	if int(symtab.Offset+symtab.Size) > len(e.data) || int(symtab.Link) >= len(e.f.Sections) {
		return nil, fmt.Errorf("bad symbol table")
	}
	str := e.f.Sections[symtab.Link]
	strs := e.data[str.Offset : str.Offset+str.Size]
	raw := e.data[symtab.Offset : symtab.Offset+symtab.Size]
	syms := make([]sym32, len(raw)/16)
	for i := range syms {
		r := raw[16*i:]
		nm := binary.LittleEndian.Uint32(r)
		var name string
		if int(nm) < len(strs) {
			name = string(strs[nm:])
			if j := strings.IndexByte(name, 0); j >= 0 {
				name = name[:j]
			}
		}
		syms[i] = sym32{name: name, value: binary.LittleEndian.Uint32(r[4:]), info: r[12], shndx: binary.LittleEndian.Uint16(r[14:])}
	}
	return syms, nil
}

type rela struct {
	off    uint32
	typ    uint32
	sym    uint32
	addend int32
}

type hiSlot struct {
	r  rela
	lo []rela
}

// XIP makes a kernel ELF (linked with -Wl,--emit-relocs) execute in place
// and packs it: a port of tt-metal's Elf::XIPify (llrt/tt_elffile.cpp) and
// the CONTIGUOUS_XIP memory layout (llrt/tt_memory.cpp). Text moves to
// wherever the firmware copies it, data stays at its local-memory
// address, so absolute HI20/LO12 pairs that point into text become
// auipc-relative and PCREL pairs from text to data become absolute. The
// result is the text segment followed by each later PT_LOAD's file bytes,
// each padded to 4 bytes.
func XIP(elfData []byte) ([]byte, error) {
	e, err := parseELF(elfData)
	if err != nil {
		return nil, err
	}
	d := append([]byte(nil), elfData...)
	text := e.loads[0]
	nrel := 0
	for _, rs := range e.f.Sections {
		if rs.Type != elf.SHT_RELA || int(rs.Info) >= len(e.f.Sections) || int(rs.Link) >= len(e.f.Sections) {
			continue
		}
		sec := e.f.Sections[rs.Info]
		if sec.Flags&elf.SHF_ALLOC == 0 || sec.Type == elf.SHT_NOBITS {
			continue
		}
		seg := e.segOf(uint16(rs.Info))
		if seg == nil {
			continue
		}
		nrel++
		syms, err := e.symbols(e.f.Sections[rs.Link])
		if err != nil {
			return nil, err
		}
		if err := xipSection(e, d, sec, seg == text, text, rs, syms); err != nil {
			return nil, err
		}
	}
	if nrel == 0 {
		return nil, fmt.Errorf("no relocation sections (link with -Wl,--emit-relocs)")
	}
	lma := text.Paddr
	var img []byte
	for _, p := range e.loads {
		if p.Paddr != lma {
			return nil, fmt.Errorf("inconsistent load addresses for packing: segment at %#x, expected %#x", p.Paddr, lma)
		}
		blob := append([]byte(nil), d[p.Off:p.Off+p.Filesz]...)
		for len(blob)%4 != 0 {
			blob = append(blob, 0)
		}
		img = append(img, blob...)
		lma += uint64(len(blob))
	}
	return img, nil
}

func xipSection(e *elfFile, d []byte, sec *elf.Section, fromText bool, text *elf.Prog, rs *elf.Section, syms []sym32) error {
	at := func(addr uint32) (int, error) {
		o := int(sec.Offset) + int(addr) - int(sec.Addr)
		if addr < uint32(sec.Addr) || o+4 > int(sec.Offset+sec.Size) {
			return 0, fmt.Errorf("relocation at %#x outside section %s", addr, sec.Name)
		}
		return o, nil
	}
	toText := func(si uint32) bool { return int(si) < len(syms) && e.segOf(syms[si].shndx) == text }
	raw := d[rs.Offset : rs.Offset+rs.Size]
	hi := [2]map[uint32]*hiSlot{{}, {}} // 0 absolute, 1 pc-relative; by offset
	var lo [2][]rela
	for i := 0; i+12 <= len(raw); i += 12 {
		info := binary.LittleEndian.Uint32(raw[i+4:])
		r := rela{off: binary.LittleEndian.Uint32(raw[i:]), typ: info & 0xff, sym: info >> 8, addend: int32(binary.LittleEndian.Uint32(raw[i+8:]))}
		if int(r.sym) >= len(syms) {
			return fmt.Errorf("relocation at %#x: symbol %d out of range", r.off, r.sym)
		}
		tt := toText(r.sym)
		switch r.typ {
		case rRISCVLo12I, rRISCVLo12S:
			if tt {
				lo[0] = append(lo[0], r)
			}
		case rRISCVPCRelLo12I, rRISCVPCRelLo12S:
			lo[1] = append(lo[1], r)
		case rRISCVHi20, rRISCVPCRelHi20:
			kind := 0
			if r.typ == rRISCVPCRelHi20 {
				kind = 1
			}
			if tt && !fromText {
				return fmt.Errorf("segment-crossing hi20 relocation at %#x", r.off)
			}
			if kind == 0 && !tt {
				continue
			}
			hi[kind][r.off] = &hiSlot{r: r}
		case rRISCV32:
			if tt {
				return fmt.Errorf("R_RISCV_32 to text at %#x needs a dynamic relocation (unsupported)", r.off)
			}
		case rRISCVJAL, rRISCVCall, rRISCVCallPLT:
			if fromText != tt {
				return fmt.Errorf("segment-crossing call at %#x", r.off)
			}
		}
	}
	// pair each lo12 with its hi20
	for _, r := range lo[1] { // the lo's symbol is the auipc's label
		o := syms[r.sym].value + uint32(r.addend)
		s := hi[1][o]
		if s == nil {
			return fmt.Errorf("PCREL_LO12 at %#x has no PCREL_HI20", r.off)
		}
		s.lo = append(s.lo, r)
	}
	for _, r := range lo[0] { // nearest preceding lui of the same symbol
		var best *hiSlot
		for o, s := range hi[0] {
			if o < r.off && s.r.sym == r.sym && (best == nil || o > best.r.off) {
				best = s
			}
		}
		if best == nil {
			return fmt.Errorf("LO12 at %#x has no HI20", r.off)
		}
		best.lo = append(best.lo, r)
	}
	for kind := 1; kind >= 0; kind-- {
		offs := make([]uint32, 0, len(hi[kind]))
		for o := range hi[kind] {
			offs = append(offs, o)
		}
		sort.Slice(offs, func(i, j int) bool { return offs[i] < offs[j] })
		for _, off := range offs {
			s := hi[kind][off]
			if kind == 1 && toText(s.r.sym) == fromText {
				continue // intra-segment pc-relative: position independent already
			}
			if len(s.lo) == 0 {
				return fmt.Errorf("HI20 at %#x has no LO12", off)
			}
			value := syms[s.r.sym].value + uint32(s.r.addend)
			want := uint32(opAUIPC)
			if kind == 0 {
				value -= off
				want = opLUI
			}
			o, err := at(off)
			if err != nil {
				return err
			}
			insn := binary.LittleEndian.Uint32(d[o:])
			if insn&0x7f != want {
				return fmt.Errorf("instruction %#08x at %#x is not lui/auipc", insn, off)
			}
			insn = (insn & 0xfff) ^ (opAUIPC ^ opLUI)
			insn |= ((value + 0x800) >> 12 << 12) & 0xfffff000
			binary.LittleEndian.PutUint32(d[o:], insn)
			for _, l := range s.lo {
				lo, err := at(l.off)
				if err != nil {
					return err
				}
				li := binary.LittleEndian.Uint32(d[lo:])
				if l.typ == rRISCVLo12I || l.typ == rRISCVPCRelLo12I {
					li = li&0x000fffff | (value&0xfff)<<20
				} else {
					li = li&0x01fff07f | (value&0x1f)<<7 | ((value&0xfff)>>5)<<25
				}
				binary.LittleEndian.PutUint32(d[lo:], li)
			}
		}
	}
	return nil
}

// weakenArgs are objcopy's arguments making the weakened firmware copy
// (tt_elffile.cpp WeakenDataSymbols with strong __fw_export_* and
// __global_pointer$): every global or weak symbol becomes local, except
// data-like symbols (NOTYPE, OBJECT, COMMON, TLS) in a non-text segment,
// which become weak.
func weakenArgs(elfData []byte) ([]string, error) {
	e, err := parseELF(elfData)
	if err != nil {
		return nil, err
	}
	kind := map[string]string{}
	for _, s := range e.f.Sections {
		if s.Type != elf.SHT_SYMTAB {
			continue
		}
		syms, err := e.symbols(s)
		if err != nil {
			return nil, err
		}
		for _, y := range syms {
			bind, typ := y.info>>4, y.info&0xf
			if y.name == "" || (bind != 1 && bind != 2) || strings.HasPrefix(y.name, "__fw_export_") || y.name == "__global_pointer$" {
				continue
			}
			seg := e.segOf(y.shndx)
			if (typ == 0 || typ == 1 || typ == 5 || typ == 6) && seg != nil && seg != e.loads[0] {
				kind[y.name] = "--weaken-symbol="
			} else {
				kind[y.name] = "--localize-symbol="
			}
		}
	}
	var args []string
	for _, n := range slices.Sorted(maps.Keys(kind)) {
		args = append(args, kind[n]+n)
	}
	return args, nil
}

// hasCompressed reports whether text holds a 16-bit (RVC) instruction:
// every 32-bit instruction has its low two bits set.
func hasCompressed(text []byte) bool {
	for i := 0; i+2 <= len(text); i += 4 {
		if text[i]&3 != 3 {
			return true
		}
	}
	return false
}
