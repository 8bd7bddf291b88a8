package kexec

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
)

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7) + seed
	}
	return b
}

func TestDRAMInterleaving(t *testing.T) {
	d := NewDevice(target.Blackhole())
	a, err := d.Alloc(kir.Buffer{Name: "a", Mem: ir.DRAM, DType: ir.BF16, PageSize: 2048, Pages: 10})
	if err != nil {
		t.Fatal(err)
	}
	b, err := d.Alloc(kir.Buffer{Name: "b", Mem: ir.DRAM, DType: ir.BF16, PageSize: 200, Pages: 3})
	if err != nil {
		t.Fatal(err)
	}
	if a != DRAMBase || b != DRAMBase+2*2048 {
		t.Errorf("addresses a=%#x b=%#x, want %#x and %#x (two 2048-byte slots per bank for 10 pages)", a, b, DRAMBase, DRAMBase+2*2048)
	}
	data := pattern(10*2048, 1)
	if err := d.WritePages("a", 0, data); err != nil {
		t.Fatal(err)
	}
	// Page 9 lives in bank 9%8 = 1 at a + (9/8)*2048.
	got := make([]byte, 2048)
	d.dram[1].read(uint64(a)+2048, got)
	if !bytes.Equal(got, data[9*2048:]) {
		t.Error("page 9 is not in bank 1 at the second slot")
	}
	// Row-major pages of 200 bytes are 256 apart in a bank.
	if err := d.WritePages("b", 0, pattern(600, 3)); err != nil {
		t.Fatal(err)
	}
	if db, _ := d.Buffer("b"); db.Stride != 256 {
		t.Errorf("stride of 200-byte pages = %d, want 256", db.Stride)
	}
	back, err := d.ReadPages("a", 0, 10)
	if err != nil || !bytes.Equal(back, data) {
		t.Errorf("ReadPages round trip failed: %v", err)
	}
	if err := d.Free("a"); err != nil {
		t.Fatal(err)
	}
	c, _ := d.Alloc(kir.Buffer{Name: "c", Mem: ir.DRAM, DType: ir.BF16, PageSize: 2048, Pages: 8})
	if c != DRAMBase {
		t.Errorf("after free, c = %#x, want the freed %#x", c, DRAMBase)
	}
	if _, err := d.Alloc(kir.Buffer{Name: "c", Mem: ir.DRAM, PageSize: 64, Pages: 1}); err == nil {
		t.Error("duplicate buffer name accepted")
	}
}

func TestL1Buffers(t *testing.T) {
	bh := target.Blackhole()
	d := NewDevice(bh)
	grid := ir.CoreRange{X0: 1, Y0: 0, X1: 2, Y1: 0}
	s, err := d.Alloc(kir.Buffer{Name: "s", Mem: ir.MemoryConfig{Kind: ir.L1HeightSharded, Shard: &ir.ShardSpec{Grid: grid, Shape: [2]int{64, 32}}},
		DType: ir.BF16, Layout: ir.TileLayout, PageSize: 2048, Pages: 4})
	if err != nil {
		t.Fatal(err)
	}
	if want := uint32(bh.L1Size - 2*2048); s != want {
		t.Errorf("first L1 buffer at %#x, want %#x (top-down)", s, want)
	}
	data := pattern(4*2048, 9)
	if err := d.WritePages("s", 0, data); err != nil {
		t.Fatal(err)
	}
	// Pages 2 and 3 are on the second shard core (2,0).
	got, err := d.ReadL1(kir.Core{X: 2, Y: 0}, s, 2*2048)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data[2*2048:]) {
		t.Error("pages 2..3 are not on core (2,0)")
	}
}

func TestCBPlacement(t *testing.T) {
	bh := target.Blackhole()
	d := NewDevice(bh)
	p := kir.NewProgram("cbs")
	left := []ir.CoreRange{{X0: 0, Y0: 0, X1: 0, Y1: 0}}
	right := []ir.CoreRange{{X0: 1, Y0: 0, X1: 1, Y1: 0}}
	both := []ir.CoreRange{{X0: 0, Y0: 0, X1: 1, Y1: 0}}
	p.AddCB(kir.CB{Index: 2, PageSize: 1000, Pages: 1, Format: ir.BF16, Cores: both})
	p.AddCB(kir.CB{Index: 0, PageSize: 2048, Pages: 2, Format: ir.BF16, Cores: left})
	p.AddCB(kir.CB{Index: 0, PageSize: 1088, Pages: 2, Format: ir.BFP8B, Cores: right})
	r := &run{d: d, p: p, t: bh, bufAddr: map[string]uint32{}, bufDev: map[string]*DeviceBuffer{}, cores: map[kir.Core]*coreState{}}
	if err := r.load(); err != nil {
		t.Fatal(err)
	}
	base := uint64(bh.L1UnreservedBase)
	got := map[string]uint64{
		"c0 left":  r.cores[kir.Core{X: 0}].CBs[0].Base,
		"c0 right": r.cores[kir.Core{X: 1}].CBs[0].Base,
		"c2 left":  r.cores[kir.Core{X: 0}].CBs[2].Base,
		"c2 right": r.cores[kir.Core{X: 1}].CBs[2].Base,
	}
	want := map[string]uint64{
		"c0 left": base, "c0 right": base, // disjoint cores share an address
		"c2 left": base + 4096, "c2 right": base + 4096, // after the larger c_0
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("CB addresses (-want +got):\n%s", diff)
	}
}
