package blackhole

import (
	"encoding/binary"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestERISC1Trampoline checks the trampoline's machine code against GNU
// as: the words below are riscv64-unknown-elf-as -march=rv32i's encoding
// of "lui gp, 0xffb01; addi gp, gp, -272; lui t0, 0xf; addi t0, t0, 0x3a0;
// jalr ra, 0(t0); lui t0, 0; addi t0, t0, 0x108; sb zero, 0(t0); j ."
// (gp 0xFFB00EF0: a low part >= 0x800 borrows from the high one; the
// kernel at 0xF3A0; the done byte at 0x108).
func TestERISC1Trampoline(t *testing.T) {
	want := []uint32{0xffb011b7, 0xef018193, 0x0000f2b7, 0x3a028293, 0x000280e7, 0x000002b7, 0x10828293, 0x00028023, 0x0000006f}
	b := erisc1Trampoline(0xFFB00EF0, 0xF3A0, 0x108)
	var got []uint32
	for i := 0; i+4 <= len(b); i += 4 {
		got = append(got, binary.LittleEndian.Uint32(b[i:]))
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("trampoline words (-as +got):\n%s", diff)
	}
}
