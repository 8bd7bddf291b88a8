package jit

import (
	"bytes"
	"encoding/binary"
	"reflect"
	"strings"
	"testing"
)

type tSec struct {
	name                     string
	typ, flags, addr         uint32
	link, info, align, entsz uint32
	data                     []byte
}

type tSeg struct{ vaddr, paddr, sec uint32 } // sec: index of the section it holds

// buildELF32 lays out a little-endian RISC-V ELF32 executable: header,
// program headers, section data, section headers.
func buildELF32(secs []tSec, segs []tSeg) []byte {
	le := binary.LittleEndian
	secs = append(secs, tSec{name: ".shstrtab", typ: 3})
	var shstr bytes.Buffer
	shstr.WriteByte(0)
	names := make([]uint32, len(secs))
	for i, s := range secs {
		names[i] = uint32(shstr.Len())
		shstr.WriteString(s.name + "\x00")
	}
	secs[len(secs)-1].data = shstr.Bytes()
	phoff := uint32(52)
	off := phoff + 32*uint32(len(segs))
	offs := make([]uint32, len(secs))
	var body bytes.Buffer
	for i, s := range secs {
		for (off+uint32(body.Len()))%4 != 0 {
			body.WriteByte(0)
		}
		offs[i] = off + uint32(body.Len())
		body.Write(s.data)
	}
	for (off+uint32(body.Len()))%4 != 0 {
		body.WriteByte(0)
	}
	shoff := off + uint32(body.Len())
	out := make([]byte, 52)
	copy(out, "\x7fELF\x01\x01\x01")
	le.PutUint16(out[16:], 2)   // ET_EXEC
	le.PutUint16(out[18:], 243) // EM_RISCV
	le.PutUint32(out[20:], 1)
	le.PutUint32(out[28:], phoff)
	le.PutUint32(out[32:], shoff)
	le.PutUint16(out[40:], 52)
	le.PutUint16(out[42:], 32)
	le.PutUint16(out[44:], uint16(len(segs)))
	le.PutUint16(out[46:], 40)
	le.PutUint16(out[48:], uint16(len(secs)+1))
	le.PutUint16(out[50:], uint16(len(secs))) // shstrtab index (after the null section)
	for _, g := range segs {
		s := secs[g.sec-1]
		ph := make([]byte, 32)
		le.PutUint32(ph[0:], 1)
		le.PutUint32(ph[4:], offs[g.sec-1])
		le.PutUint32(ph[8:], g.vaddr)
		le.PutUint32(ph[12:], g.paddr)
		le.PutUint32(ph[16:], uint32(len(s.data)))
		le.PutUint32(ph[20:], uint32(len(s.data)))
		le.PutUint32(ph[24:], 5)
		le.PutUint32(ph[28:], 4)
		out = append(out, ph...)
	}
	out = append(out, body.Bytes()...)
	out = append(out, make([]byte, 40)...) // null section
	for i, s := range secs {
		sh := make([]byte, 40)
		for j, v := range []uint32{names[i], s.typ, s.flags, s.addr, offs[i], uint32(len(s.data)), s.link, s.info, s.align, s.entsz} {
			le.PutUint32(sh[4*j:], v)
		}
		out = append(out, sh...)
	}
	return out
}

func words(v ...uint32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], x)
	}
	return b
}

func sym(name, value uint32, info uint8, shndx uint16) []byte {
	b := make([]byte, 16)
	binary.LittleEndian.PutUint32(b, name)
	binary.LittleEndian.PutUint32(b[4:], value)
	b[12] = info
	binary.LittleEndian.PutUint16(b[14:], shndx)
	return b
}

func rel(off, typ, sym uint32, addend int32) []byte {
	return words(off, sym<<8|typ, uint32(addend))
}

// testKernelELF: text at 0x1000 (section 1), data at 0xffb00000 (section
// 2) loaded right after text (LMA 0x1010).
//
//	0x1000 lui   a0, %hi(tfunc+0x1900)     R_RISCV_HI20      -> auipc
//	0x1004 addi  a0, a0, %lo(tfunc+0x1900) R_RISCV_LO12_I
//	0x1008 auipc a1, %pcrel_hi(dvar+8)     R_RISCV_PCREL_HI20 -> lui
//	0x100c sw    a2, %pcrel_lo(.L0)(a1)    R_RISCV_PCREL_LO12_S
func testKernelELF() []byte {
	strtab := []byte("\x00tfunc\x00dvar\x00.L0\x00__fw_export_x\x00")
	var symtab []byte
	symtab = append(symtab, sym(0, 0, 0, 0)...)
	symtab = append(symtab, sym(1, 0x1008, 0x12, 1)...)     // GLOBAL FUNC in .text
	symtab = append(symtab, sym(7, 0xffb00000, 0x11, 2)...) // GLOBAL OBJECT in .data
	symtab = append(symtab, sym(12, 0x1008, 0x00, 1)...)    // LOCAL label
	symtab = append(symtab, sym(16, 0x1000, 0x10, 1)...)    // GLOBAL NOTYPE, strong
	var relas []byte
	relas = append(relas, rel(0x1000, rRISCVHi20, 1, 0x1900)...)
	relas = append(relas, rel(0x1004, rRISCVLo12I, 1, 0x1900)...)
	relas = append(relas, rel(0x1008, rRISCVPCRelHi20, 2, 8)...)
	relas = append(relas, rel(0x100c, rRISCVPCRelLo12S, 3, 0)...)
	secs := []tSec{
		{name: ".text", typ: 1, flags: 6, addr: 0x1000, align: 4, data: words(0x00000537, 0x00050513, 0x00000597, 0x00c5a023)},
		{name: ".data", typ: 1, flags: 3, addr: 0xffb00000, align: 4, data: words(0xdeadbeef)},
		{name: ".symtab", typ: 2, link: 4, info: 4, align: 4, entsz: 16, data: symtab},
		{name: ".strtab", typ: 3, data: strtab},
		{name: ".rela.text", typ: 4, flags: 0x40, link: 3, info: 1, align: 4, entsz: 12, data: relas},
	}
	return buildELF32(secs, []tSeg{{0x1000, 0x1000, 1}, {0xffb00000, 0x1010, 2}})
}

func TestXIP(t *testing.T) {
	img, err := XIP(testKernelELF())
	if err != nil {
		t.Fatal(err)
	}
	// lui -> auipc: value = 0x2908 - 0x1000 = 0x1908; hi = (0x1908+0x800)>>12 = 2,
	// lo = 0x908 (-0x6f8): 0x1000 + 0x2000 - 0x6f8 = 0x2908.
	// auipc -> lui: value = 0xffb00008; hi 0xffb00, lo 8 split into the S immediate.
	want := words(0x00002517, 0x90850513, 0xffb005b7, 0x00c5a423, 0xdeadbeef)
	if !bytes.Equal(img, want) {
		t.Errorf("XIP image\n got % x\nwant % x", img, want)
	}
	if hasCompressed(img[:16]) {
		t.Error("hasCompressed on 32-bit instructions")
	}
	if !hasCompressed([]byte{0x01, 0x00, 0x13, 0x00}) {
		t.Error("hasCompressed missed c.nop")
	}
}

func TestXIPErrors(t *testing.T) {
	noRel := buildELF32([]tSec{{name: ".text", typ: 1, flags: 6, addr: 0x1000, data: words(0x13)}}, []tSeg{{0x1000, 0x1000, 1}})
	badLMA := testKernelELF()
	// move the data segment's paddr (second program header, offset 52+32+12)
	binary.LittleEndian.PutUint32(badLMA[52+32+12:], 0x2000)
	for _, tc := range []struct {
		name string
		elf  []byte
		want string
	}{
		{"not elf", bytes.Repeat([]byte("nope"), 16), "bad magic"},
		{"no relocs", noRel, "--emit-relocs"},
		{"bad lma", badLMA, "inconsistent load addresses"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := XIP(tc.elf); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("XIP error %v, want %q", err, tc.want)
			}
		})
	}
}

func TestWeakenArgs(t *testing.T) {
	args, err := weakenArgs(testKernelELF())
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"--weaken-symbol=dvar", "--localize-symbol=tfunc"}
	if !reflect.DeepEqual(args, want) {
		t.Errorf("weakenArgs = %v, want %v", args, want)
	}
}
