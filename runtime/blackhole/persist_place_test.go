package blackhole

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tcc-dev/tcc/codegen"
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/persist"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/models/tinymlp"
	"github.com/tcc-dev/tcc/passes"
	"github.com/tcc-dev/tcc/runtime/blackhole/access/fake"
)

// imagesOnly "builds" every merged kernel as 64-byte images.
type imagesOnly struct{}

func (imagesOnly) PersistentKernel(*kir.Program, *kir.Kernel) (map[int][]byte, error) {
	out := map[int][]byte{}
	for p := 0; p < 5; p++ {
		out[p] = make([]byte, 64)
	}
	return out, nil
}

// TestPersistentCBsEarly: the tables pages the runtime writes place a
// phase's CBs where the simulator does (kir.PlaceCBs): an early begin's CBs
// from the phase's CBBase, above the CBs of the phase before, not from the
// unreserved base where those still live.
func TestPersistentCBsEarly(t *testing.T) {
	g := tinymlp.BuildGraph(tinymlp.Sizes{Layers: 2, Hidden: 128, Intermediate: 256, Vocab: 512, Batch: 1})
	_, err := passes.Run(g, passes.Options{})
	require.NoError(t, err)
	b, err := codegen.Compile(g, target.Blackhole())
	require.NoError(t, err)
	p, _, err := persist.Build(b)
	require.NoError(t, err)
	require.NotEmpty(t, p.Persist.Early)
	require.NoError(t, persist.WithTables(p, b))
	tables, err := p.Persist.Tables()
	require.NoError(t, err)
	d, err := Open(Options{Backend: "fake", Fake: fake.New()}, fwOnly{})
	require.NoError(t, err)
	// Every buffer somewhere: DRAM buffers low, L1 buffers at the top.
	mem := mapMemory{}
	for i, buf := range p.Buffers {
		pl := Placement{Kind: buf.Mem.Kind, Pages: buf.Pages, PageSize: buf.PageSize, Addr: uint32(0x100000 + 0x1000*i), Stride: buf.PageSize}
		if !buf.Mem.Kind.IsDRAM() {
			pl.Addr = uint32(d.Chip.Layout.L1Size) - 0x1000
		}
		mem[buf.Name] = struct {
			p    Placement
			data []byte
		}{pl, nil}
	}
	lp, err := d.persistentProgram(p, imagesOnly{}, Reference{Mem: mem})
	require.NoError(t, err)
	checked := 0
	for _, c := range lp.Cores {
		offs := tables.Offsets(p.Persist, c.Core)
		for q, ph := range p.Persist.Phases {
			off, ok := offs[q]
			if !ok || len(ph.EarlyCBs) == 0 {
				continue
			}
			want := kir.PlaceCBs(ph.CBs, uint64(d.Chip.Layout.Unreserved), ph.EarlyCBs, uint64(ph.CBBase))
			for j, cb := range ph.CBs {
				if cb.Backing != "" || !kir.InRanges(cb.Cores, c.Core) {
					continue
				}
				checked++
				m := tables.CBMap[q][cb.Index]
				if got := binary.LittleEndian.Uint32(c.Page[off+8+16*m:]); uint64(got) != want[j] {
					t.Errorf("core %s phase %d CB c_%d (merged %d) at %#x in the tables page, the simulator places it at %#x", c.Core, q, cb.Index, m, got, want[j])
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no CB of a phase with early CBs checked")
	}
}
