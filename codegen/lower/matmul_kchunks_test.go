package lower

import (
	"fmt"
	"testing"

	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/ir/longtest"
)

// chunkL1 is smallGrid with kib KiB of L1 per core for CBs.
func chunkL1(kib int) *target.Target {
	t := smallGrid()
	t.L1Size = t.L1UnreservedBase + kib<<10
	return t
}

// TestKChunksOnSim runs resident matmuls whose activation rows do not fit
// next to the weights on the simulator: the act CB must be a ring of two
// K chunks (kChunk), the results bit for bit the reference's (the partial
// sums reloaded into DEST between chunks add K in the one-loop order), the
// weights read once (resident, not once per row) and the activation once
// per column group. Without K chunks these programs stream their weights
// per row.
func TestKChunksOnSim(t *testing.T) {
	cases := []struct {
		name  string
		tgt   *target.Target
		build func(b *ir.Builder) []*ir.Value
		chunk int  // the act CB's pages per chunk
		held  bool // the sums held in DEST over a row's chunks (kChunkHeld): no partials CB
		long  bool // a TCC_LONG case
	}{
		// 145 KiB: a 64 KiB activation row (K 1024) does not fit next to
		// a core's 70 KiB slice of two bfp8_b weight columns and the other
		// CBs, a ring of two 8-page chunks does; the two columns are one
		// sub-block, whose sums stay in DEST.
		{"matmul_add_bfp8", chunkL1(145), func(b *ir.Builder) []*ir.Value {
			return one(b.MatmulAdd(fcIn(b, "a", ir.BF16, 1, 64, 1024), fcW(b, "w", ir.BFP8B, 1024, 128), fcIn(b, "r", ir.BF16, 1, 64, 128)))
		}, 8, true, false},
		// 460 KiB, K 2048: five columns a core (sub-blocks of 4 and 1),
		// weights on SrcB (each sum transposed in DEST after its last
		// chunk only), chunks of 16 pages, the partial sums reloaded.
		{"matmul_bfp8_srcb_two_subblocks", chunkL1(460), func(b *ir.Builder) []*ir.Value {
			return one(b.Matmul(fcIn(b, "a", ir.BF16, 1, 96, 2048), fcWT(b, "w", ir.BFP8B, 2048, 320)))
		}, 16, false, true},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.long {
				longtest.Skip(t, "a further K-chunk variant on the simulator")
			}
			op := fcBuild(t, tc.build)
			ctx := NewContext(tc.tgt)
			args := fcArgs(op, uint64(1700+i))
			want := refEval(t, op, args)
			p, err := Lower(op, ctx)
			if err != nil {
				t.Fatal(err)
			}
			pages := map[string]int{}
			for _, cb := range p.CBs {
				pages[cb.Name] = cb.Pages
			}
			if pages["act"] != 2*tc.chunk || (pages["partials"] == 0) != tc.held {
				t.Errorf("the act CB holds %d pages and the partials %d, want a ring of two %d-page chunks and partials unless the sums stay in DEST (%v)", pages["act"], pages["partials"], tc.chunk, tc.held)
			}
			got, st := residentExec(t, ctx, op, p, args)
			info := fmt.Sprintf("%d cores, %d NoC bytes read", len(p.Cores()), st.NoCReadBytes)
			for j, r := range op.Results {
				fcCompare(t, fmt.Sprintf("%s result %d %s", op.Name(), j, r.Type.Shape), want[j].Data, got[j], info)
			}
			if want := residentReads(t, ctx, op, p, false); st.NoCReadBytes != want {
				t.Errorf("the program reads %d bytes over the NoC, want %d (resident); %s", st.NoCReadBytes, want, info)
			}
		})
	}
}
