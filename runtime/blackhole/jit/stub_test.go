package jit

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestStubTensixWords assembles Tensix instructions through sfpi_stub.h
// with the stock RISC-V compiler (skipped when it is not installed): each
// ".ttinsn x" must become the word rotl(x, 2), which the TRISC issues to
// the Tensix as x; two LTO units in one link must not define the assembler
// macro twice; and ttreplay must compile to a store of the REPLAY word.
func TestStubTensixWords(t *testing.T) {
	gxx, err := exec.LookPath(DefaultStockGCC)
	if err != nil {
		t.Skipf("%s not installed: %v", DefaultStockGCC, err)
	}
	objdump := strings.TrimSuffix(gxx, "g++") + "objdump"
	dir := t.TempDir()
	stub := filepath.Join(dir, "sfpi_stub.h")
	if err := os.WriteFile(stub, []byte(sfpiStub), 0o644); err != nil {
		t.Fatal(err)
	}
	units := map[string]string{
		"a.cc": `__attribute__((used)) void a() { __asm__ __volatile__(".ttinsn %0" : : "i"(0x12345678)); }
extern "C" void replay(volatile unsigned int* b, unsigned int s) { __builtin_rvtt_ttreplay(b, 16, 0, 0, s, true, true); }`,
		"b.cc": `__attribute__((used)) void b() { __asm__ __volatile__(".ttinsn %0" : : "i"(0x92345678)); }`,
	}
	for name, src := range units {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run := func(args ...string) string {
		t.Helper()
		c := exec.Command(args[0], args[1:]...)
		c.Dir = dir
		out, err := c.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	flags := []string{gxx, "-O2", "-std=c++17", "-march=rv32im_zicsr_zifencei_zba_zbb", "-mabi=ilp32", "-include", stub}
	run(append(flags, "-c", "a.cc", "-o", "a.o")...)
	run(append(flags, "-flto", "-c", "a.cc", "-o", "a.lto.o")...)
	run(append(flags, "-flto", "-c", "b.cc", "-o", "b.lto.o")...)
	run(append(flags, "-flto", "-flinker-output=nolto-rel", "-nostdlib", "-r", "a.lto.o", "b.lto.o", "-o", "ab.o")...)
	dis := run(objdump, "-d", "a.o") + run(objdump, "-d", "ab.o")
	for _, w := range []string{"48d159e0", "48d159e2"} { // rotl(0x12345678, 2), rotl(0x92345678, 2)
		if !strings.Contains(dis, w) {
			t.Errorf("no word %s in the disassembly:\n%s", w, dis)
		}
	}
	// REPLAY start s, len 16, exec and load: 0x04<<24 | s<<14 | 16<<4 | 2 | 1
	// = 0x04000103 | s<<14; the constant part is built with lui 0x4000.
	if !strings.Contains(dis, "0x4000") {
		t.Errorf("replay does not build the REPLAY opcode (0x04 << 24):\n%s", dis)
	}
}
