package firmware

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/tcc-dev/tcc/codegen/target"
)

// Segment is bytes to place at a link address.
type Segment struct {
	Addr uint32
	Data []byte
}

// Image is one processor's firmware.
type Image struct {
	Processor int // index into target.ProcessorNames
	Path      string
	Entry     uint32
	Segments  []Segment
	// Symbols are the ELF's defined symbols, by name (kernels link against
	// the firmware's data symbols).
	Symbols map[string]uint32
}

// ReadELF reads the firmware of processor proc from path: a 32-bit
// little-endian RISC-V executable without compressed instructions.
func ReadELF(path string, proc int) (*Image, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("firmware: %w", err)
	}
	f, err := elf.NewFile(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("firmware %s: not an ELF file: %w", path, err)
	}
	if err := checkHeader(path, f, binary.LittleEndian.Uint32(b[36:])); err != nil {
		return nil, err
	}
	im := &Image{Processor: proc, Path: path, Entry: uint32(f.Entry), Symbols: map[string]uint32{}}
	for _, p := range f.Progs {
		if p.Type != elf.PT_LOAD || p.Memsz == 0 {
			continue
		}
		data := make([]byte, p.Memsz)
		if _, err := io.ReadFull(p.Open(), data[:p.Filesz]); err != nil {
			return nil, fmt.Errorf("firmware %s: segment at %#x: %w", path, p.Vaddr, err)
		}
		im.Segments = append(im.Segments, Segment{Addr: uint32(p.Vaddr), Data: data})
	}
	if len(im.Segments) == 0 {
		return nil, fmt.Errorf("firmware %s: no loadable segments", path)
	}
	syms, _ := f.Symbols()
	for _, s := range syms {
		if s.Section != elf.SHN_UNDEF && s.Name != "" {
			im.Symbols[s.Name] = uint32(s.Value)
		}
	}
	return im, nil
}

// checkHeader rejects files that cannot run on a Tensix processor.
func checkHeader(path string, f *elf.File, flags uint32) error {
	switch {
	case f.Class != elf.ELFCLASS32 || f.Data != elf.ELFDATA2LSB:
		return fmt.Errorf("firmware %s: %s %s ELF; Tensix processors run 32-bit little-endian code", path, f.Class, f.Data)
	case f.Machine != elf.EM_RISCV:
		return fmt.Errorf("firmware %s: machine %s, want RISC-V", path, f.Machine)
	case f.Type != elf.ET_EXEC:
		return fmt.Errorf("firmware %s: ELF type %s, want an executable", path, f.Type)
	}
	const efRVC = 0x1 // EF_RISCV_RVC
	if flags&efRVC != 0 {
		return fmt.Errorf("firmware %s: built with compressed instructions (EF_RISCV_RVC); Tensix processors have none: build without the C extension (-march=rv32im...)", path)
	}
	return nil
}

// Set is the firmware of the five Tensix processors.
type Set [5]*Image

// Files names the firmware ELFs of a set inside a firmware directory:
// tt-metal's firmware build layout <proc>/<proc>.elf, or <proc>.elf.
func Files(dir string) ([5]string, error) {
	var out [5]string
	for i, n := range target.ProcessorNames {
		for _, p := range []string{filepath.Join(dir, n, n+".elf"), filepath.Join(dir, n+".elf")} {
			if _, err := os.Stat(p); err == nil {
				out[i] = p
				break
			}
		}
		if out[i] == "" {
			return out, fmt.Errorf("firmware directory %s has no %s firmware (%s/%s.elf or %s.elf)", dir, n, n, n, n)
		}
	}
	return out, nil
}

// ReadSet reads the five firmware ELFs of dir (Files).
func ReadSet(dir string) (Set, error) {
	var s Set
	files, err := Files(dir)
	if err != nil {
		return s, err
	}
	for i, p := range files {
		if s[i], err = ReadELF(p, i); err != nil {
			return s, err
		}
	}
	return s, nil
}

// Placement returns im's segments at the L1 addresses the host writes
// them to: L1-linked segments at their address, which must lie in the
// processor's firmware region; core-local segments in its init scratch.
func (im *Image) Placement(l *target.Layout) ([]Segment, error) {
	fw, scratch := l.Firmware[im.Processor], l.InitScratch[im.Processor]
	var out []Segment
	for _, s := range im.Segments {
		n := uint32(len(s.Data))
		switch {
		case s.Addr >= l.LocalBase:
			off := s.Addr - l.LocalBase
			if off+n > scratch.Size {
				return nil, fmt.Errorf("firmware %s: core-local segment [%#x, %#x) exceeds %s's %d B local memory", im.Path, s.Addr, s.Addr+n, target.ProcessorNames[im.Processor], scratch.Size)
			}
			out = append(out, Segment{Addr: scratch.Base + off, Data: s.Data})
		case s.Addr >= fw.Base && s.Addr+n <= fw.End():
			out = append(out, s)
		default:
			return nil, fmt.Errorf("firmware %s: segment [%#x, %#x) is outside %s's firmware region [%#x, %#x) of the pinned release (%s); was it built for another tt-metal release?", im.Path, s.Addr, s.Addr+n, target.ProcessorNames[im.Processor], fw.Base, fw.End(), target.TTMetalRelease)
		}
	}
	return out, nil
}
