package timing_test

import (
	"strings"
	"testing"

	"github.com/tcc-dev/tcc/ir"
	model "github.com/tcc-dev/tcc/models/qwen27b"
	"github.com/tcc-dev/tcc/sim/timing"
)

// TestFloorCountsGatheredRows: the DRAM floor of the qwen27b decode build
// (fused, mesh 1x2, no position) is every weight once, the embedding
// table only for the rows the step gathers (its results' own bytes, though
// their buffers are shared with larger values by codegen's liveness
// reuse), every state other than the KV caches read and written once, and
// the KV caches in full.
func TestFloorCountsGatheredRows(t *testing.T) {
	b := fusedBuild(t, model.DefaultOptions(), ir.Mesh{Rows: 1, Cols: 2})
	tables := map[*ir.Value]bool{}
	var gathered int64
	for _, p := range b.Programs {
		if !strings.Contains(p.Op.Name(), "embedding") {
			continue
		}
		for _, v := range p.Op.Operands {
			if v.Kind == ir.KindWeight {
				tables[v] = true
			}
		}
		for _, r := range p.Op.Results {
			ps, pages, err := r.Type.PageLayout()
			if err != nil {
				t.Fatal(err)
			}
			gathered += int64(ps) * int64(pages)
		}
	}
	if len(tables) != 1 || gathered == 0 {
		t.Fatalf("%d embedding tables, %d bytes gathered; want one table and its rows", len(tables), gathered)
	}
	var want, table int64
	for _, s := range b.Buffers {
		if !s.Mem.Kind.IsDRAM() || s.Value == nil {
			continue
		}
		bytes := int64(s.PageSize) * int64(s.Pages)
		switch {
		case tables[s.Value]:
			table = bytes
		case s.Value.Kind == ir.KindWeight, s.KV:
			want += bytes
		case s.Value.Kind == ir.KindState:
			want += 2 * bytes
		}
	}
	want += gathered
	if got := timing.FloorBytes(b); got != want {
		t.Errorf("floor %d bytes, want %d (the table's gathered rows %d bytes, not the table's %d)", got, want, gathered, table)
	}
}
