// Package fwtest writes small firmware ELFs for the runtime's tests: real
// 32-bit RISC-V executables whose segments sit where the pinned release's
// firmware does, with recognisable contents.
package fwtest

import (
	"encoding/binary"
	"os"
	"path/filepath"

	"github.com/tcc-dev/tcc/codegen/target"
)

// Segment is one PT_LOAD segment.
type Segment struct {
	Addr uint32
	Data []byte
	// Memsz, when larger than len(Data), zero-fills the rest (bss).
	Memsz uint32
}

// ELF returns an ELF32 little-endian executable for machine (243 = RISC-V)
// with e_flags flags, entry and segs.
func ELF(machine uint16, flags, entry uint32, segs []Segment) []byte {
	const ehsize, phsize = 52, 32
	b := make([]byte, ehsize+phsize*len(segs))
	copy(b, []byte{0x7f, 'E', 'L', 'F', 1, 1, 1})
	le := binary.LittleEndian
	le.PutUint16(b[16:], 2) // ET_EXEC
	le.PutUint16(b[18:], machine)
	le.PutUint32(b[20:], 1)
	le.PutUint32(b[24:], entry)
	le.PutUint32(b[28:], ehsize) // e_phoff
	le.PutUint32(b[36:], flags)
	le.PutUint16(b[40:], ehsize)
	le.PutUint16(b[42:], phsize)
	le.PutUint16(b[44:], uint16(len(segs)))
	le.PutUint16(b[46:], 40) // e_shentsize
	for i, s := range segs {
		ph := b[ehsize+phsize*i:]
		memsz := max(s.Memsz, uint32(len(s.Data)))
		le.PutUint32(ph[0:], 1) // PT_LOAD
		le.PutUint32(ph[4:], uint32(len(b)))
		le.PutUint32(ph[8:], s.Addr)
		le.PutUint32(ph[12:], s.Addr)
		le.PutUint32(ph[16:], uint32(len(s.Data)))
		le.PutUint32(ph[20:], memsz)
		le.PutUint32(ph[24:], 7)
		le.PutUint32(ph[28:], 4)
		b = append(b, s.Data...)
	}
	return b
}

// Pattern is the recognisable content of processor proc's firmware text.
func Pattern(proc, n int) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(0x10*(proc+1) + i%16)
	}
	return p
}

// WriteSet writes a firmware set into dir in tt-metal's layout
// (<proc>/<proc>.elf): per processor a 64-byte text segment at its firmware
// base (Pattern) and a 16-byte data segment plus 16 bytes of bss in
// core-local memory.
func WriteSet(dir string) error {
	l := target.BlackholeLayout()
	for i, n := range target.ProcessorNames {
		segs := []Segment{
			{Addr: l.Firmware[i].Base, Data: Pattern(i, 64)},
			{Addr: l.LocalBase, Data: Pattern(i+8, 16), Memsz: 32},
		}
		if err := os.MkdirAll(filepath.Join(dir, n), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, n, n+".elf"), ELF(243, 0, l.Firmware[i].Base, segs), 0o644); err != nil {
			return err
		}
	}
	return nil
}
