package codegen

import (
	"strings"
	"testing"

	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
)

// TestDRAMCapacity: a build whose buffers exceed the device's DRAM is an
// error saying by how much; one that fits is not.
func TestDRAMCapacity(t *testing.T) {
	b := &Build{Graph: ir.NewGraph("big"), Target: target.Blackhole()}
	b.Buffers = []BufferSpec{
		{Name: "lm_head.weight", Mem: ir.DRAM, PageSize: 1 << 20, Pages: 40 << 10}, // 40 GiB
		{Name: "x", Mem: ir.DRAM, PageSize: 2048, Pages: 4},
	}
	err := b.checkDRAM()
	if err == nil || !strings.Contains(err.Error(), "rule dram-capacity") || !strings.Contains(err.Error(), "over by 8.00 GiB") || !strings.Contains(err.Error(), `"lm_head.weight"`) {
		t.Fatalf("err = %v", err)
	}
	b.Buffers[0].Pages = 1 << 10 // 1 GiB
	if err := b.checkDRAM(); err != nil {
		t.Errorf("1 GiB: %v", err)
	}
}
