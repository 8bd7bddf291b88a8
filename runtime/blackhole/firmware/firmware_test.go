package firmware_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/runtime/blackhole/access"
	"github.com/tcc-dev/tcc/runtime/blackhole/access/fake"
	"github.com/tcc-dev/tcc/runtime/blackhole/chip"
	"github.com/tcc-dev/tcc/runtime/blackhole/firmware"
	"github.com/tcc-dev/tcc/runtime/blackhole/firmware/fwtest"
)

func TestJAL(t *testing.T) {
	// "j 0x38c0" at address 0 (the BRISC firmware base), as riscv64-unknown-elf-as
	// 2.40 assembles it.
	got, err := firmware.JAL(0x38c0)
	if err != nil {
		t.Fatal(err)
	}
	if want := uint32(0x0c10306f); got != want {
		t.Errorf("JAL(0x38c0) = %#08x, want %#08x", got, want)
	}
	if _, err := firmware.JAL(1 << 20); err == nil {
		t.Error("JAL past the jal range: no error")
	}
}

func TestReadELFRejects(t *testing.T) {
	l := target.BlackholeLayout()
	dir := t.TempDir()
	seg := []fwtest.Segment{{Addr: l.Firmware[0].Base, Data: []byte{1, 2, 3, 4}}}
	for _, c := range []struct {
		name, want string
		file       []byte
	}{
		{"compressed", "compressed instructions", fwtest.ELF(243, 1, 0, seg)},
		{"x86", "want RISC-V", fwtest.ELF(62, 0, 0, seg)},
		{"not elf", "not an ELF", []byte("#!/bin/sh\n")},
		{"no segments", "no loadable segments", fwtest.ELF(243, 0, 0, nil)},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(dir, c.name+".elf")
			if err := os.WriteFile(p, c.file, 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := firmware.ReadELF(p, 0)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), p) {
				t.Errorf("error %v: want one naming %s and saying %q", err, p, c.want)
			}
		})
	}
}

func TestPlacement(t *testing.T) {
	l := target.BlackholeLayout()
	dir := t.TempDir()
	p := filepath.Join(dir, "ncrisc.elf")
	os.WriteFile(p, fwtest.ELF(243, 0, 0, []fwtest.Segment{
		{Addr: l.Firmware[1].Base, Data: []byte{9, 9, 9, 9}},
		{Addr: l.LocalBase + 0x100, Data: []byte{7, 7}, Memsz: 8},
	}), 0o644)
	im, err := firmware.ReadELF(p, 1)
	if err != nil {
		t.Fatal(err)
	}
	segs, err := im.Placement(l)
	if err != nil {
		t.Fatal(err)
	}
	if len(segs) != 2 || segs[0].Addr != l.Firmware[1].Base || segs[1].Addr != l.InitScratch[1].Base+0x100 || !bytes.Equal(segs[1].Data, []byte{7, 7, 0, 0, 0, 0, 0, 0}) {
		t.Errorf("placement %+v: want text at %#x and data (zero-filled bss) at the NCRISC scratch %#x+0x100", segs, l.Firmware[1].Base, l.InitScratch[1].Base)
	}
	// The same image as BRISC's lies outside BRISC's firmware region.
	im.Processor = 0
	if _, err := im.Placement(l); err == nil || !strings.Contains(err.Error(), "outside brisc's firmware region") {
		t.Errorf("misplaced segment: %v", err)
	}
}

func openFake(t *testing.T) (*fake.Chip, *chip.Chip) {
	t.Helper()
	f := fake.New()
	c, err := chip.Open(access.NewBARDevice(f), nil)
	if err != nil {
		t.Fatal(err)
	}
	return f, c
}

func TestBootOnFakeChip(t *testing.T) {
	dir := t.TempDir()
	if err := fwtest.WriteSet(dir); err != nil {
		t.Fatal(err)
	}
	fw, err := firmware.ReadSet(dir)
	if err != nil {
		t.Fatal(err)
	}
	f, c := openFake(t)
	cores := []kir.Core{{X: 0, Y: 0}, {X: 10, Y: 9}}
	if err := firmware.Boot(c, cores, fw, time.Second); err != nil {
		t.Fatal(err)
	}
	if len(f.Errors) > 0 {
		t.Fatalf("fake chip saw protocol errors: %v", f.Errors)
	}
	l := c.Layout
	want := []fake.XY{{X: 1, Y: 2}, {X: 13, Y: 11}} // logical (10,9) is NoC column 13 (columns 8, 9 are not Tensix)
	if len(f.Boots) != 2 || f.Boots[0] != want[0] || f.Boots[1] != want[1] {
		t.Fatalf("booted %v, want %v", f.Boots, want)
	}
	for _, at := range want {
		mem := f.L1(at.X, at.Y)
		for p := range 5 {
			if got := mem[l.Firmware[p].Base : l.Firmware[p].Base+64]; !bytes.Equal(got, fwtest.Pattern(p, 64)) {
				t.Errorf("core %v: %s firmware text not at %#x", at, target.ProcessorNames[p], l.Firmware[p].Base)
			}
			if got := mem[l.InitScratch[p].Base : l.InitScratch[p].Base+16]; !bytes.Equal(got, fwtest.Pattern(p+8, 16)) {
				t.Errorf("core %v: %s local data not in its init scratch at %#x", at, target.ProcessorNames[p], l.InitScratch[p].Base)
			}
		}
		ci := mem[l.Mailbox.Base+uint32(l.Msg.CoreInfo):]
		if at == want[1] && (ci[l.Msg.CoreInfoLogicalX] != 10 || ci[l.Msg.CoreInfoLogicalX+1] != 9) {
			t.Errorf("core %v: core_info logical coordinate (%d,%d), want (10,9)", at, ci[l.Msg.CoreInfoLogicalX], ci[l.Msg.CoreInfoLogicalX+1])
		}
		// dram_bank_to_noc_xy[0][1] is bank 1's NoC0 endpoint, translated (18,15).
		if got := uint16(mem[l.BankToNoC.Base+2]) | uint16(mem[l.BankToNoC.Base+3])<<8; got != 15<<6|18 {
			t.Errorf("core %v: bank table entry for DRAM bank 1 = %#x, want %#x", at, got, 15<<6|18)
		}
	}
}

func TestBootTimeoutNamesCore(t *testing.T) {
	dir := t.TempDir()
	fwtest.WriteSet(dir)
	fw, _ := firmware.ReadSet(dir)
	f, c := openFake(t)
	f.Dead(2, 2) // logical (1,0)
	err := firmware.Boot(c, []kir.Core{{X: 0, Y: 0}, {X: 1, Y: 0}}, fw, 50*time.Millisecond)
	var te *chip.TimeoutError
	if !errors.As(err, &te) || !strings.Contains(err.Error(), "core (1,0) (2,2)") || strings.Contains(err.Error(), "core (0,0)") {
		t.Fatalf("error %v: want a timeout naming core (1,0) only", err)
	}
}

func TestReadSetMissing(t *testing.T) {
	_, err := firmware.ReadSet(t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "no brisc firmware") {
		t.Errorf("error %v", err)
	}
}
