package blackhole

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tcc-dev/tcc/codegen/hostcfg"
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/runtime/blackhole/access/fake"
)

// mapMemory is a reference device of placed buffers with their bytes.
type mapMemory map[string]struct {
	p    Placement
	data []byte
}

func (m mapMemory) Placement(name string) (Placement, bool) {
	b, ok := m[name]
	return b.p, ok
}

func (m mapMemory) ReadPages(name string, first, n int) ([]byte, error) {
	b, ok := m[name]
	if !ok || first+n > b.p.Pages {
		return nil, fmt.Errorf("no pages %d+%d of %q", first, n, name)
	}
	return b.data[first*b.p.PageSize : (first+n)*b.p.PageSize], nil
}

// Upload puts every page where its Placement says, Download reads the
// pages back in order, through the program's names for the buffers.
func TestReferencePlacement(t *testing.T) {
	cores := []kir.Core{{X: 0, Y: 0}, {X: 1, Y: 0}, {X: 2, Y: 3}}
	for _, c := range []struct {
		name string
		p    Placement
		// where page i must be: a DRAM bank or a worker core, and its address
		at func(i int) (dram int, core kir.Core, addr uint64)
	}{
		{"dram_interleaved", Placement{Kind: ir.DRAMInterleaved, Pages: 11, PageSize: 64, Addr: 0x1000, Stride: 128},
			func(i int) (int, kir.Core, uint64) { return i % 8, kir.Core{}, 0x1000 + uint64(i/8*128) }},
		{"l1_interleaved", Placement{Kind: ir.L1Interleaved, Pages: 7, PageSize: 32, Addr: 0x20000, Stride: 32, Cores: cores},
			func(i int) (int, kir.Core, uint64) { return -1, cores[i%3], 0x20000 + uint64(i/3*32) }},
		{"l1_sharded", Placement{Kind: ir.L1HeightSharded, Pages: 6, PageSize: 32, Addr: 0x30000, Stride: 64, Cores: cores, PerCore: 2},
			func(i int) (int, kir.Core, uint64) { return -1, cores[i/2], 0x30000 + uint64(i%2*64) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			d, err := Open(Options{Backend: "fake", Fake: fake.New()}, fwOnly{})
			require.NoError(t, err)
			data := make([]byte, c.p.Pages*c.p.PageSize)
			for i := range data {
				data[i] = byte(i*7 + 1)
			}
			ref := Reference{Mem: mapMemory{"dev_x": {c.p, data}}, Binding: map[string]string{"x": "dev_x"}}
			require.NoError(t, d.Upload(&hostcfg.ProgramConfig{Program: "p", Buffers: []hostcfg.BufferConfig{{Name: "x"}}}, ref))
			for i := 0; i < c.p.Pages; i++ {
				bank, core, addr := c.at(i)
				at := d.Chip.DRAM[max(bank, 0)]
				if bank < 0 {
					at, err = d.Chip.Worker(core)
					require.NoError(t, err)
				}
				page := make([]byte, c.p.PageSize)
				require.NoError(t, d.Chip.Read(at, addr, page))
				if want := data[i*c.p.PageSize : (i+1)*c.p.PageSize]; !bytes.Equal(page, want) {
					t.Errorf("page %d is not at %v %#x", i, at, addr)
				}
			}
			got, err := d.Download("x", ref)
			require.NoError(t, err)
			if !bytes.Equal(got, data) {
				t.Error("Download does not return the uploaded pages")
			}
		})
	}
}

func TestReferenceMissingBuffer(t *testing.T) {
	ref := Reference{Mem: mapMemory{}, Binding: map[string]string{"x": "dev_x"}}
	if _, _, err := ref.Buffer("x"); err == nil || !strings.Contains(err.Error(), `"x" ("dev_x") is not allocated`) {
		t.Errorf("Buffer of a missing buffer: %v", err)
	}
}
