package lower

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tcc-dev/tcc/codegen/cpp"
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/ir/longtest"
	"github.com/tcc-dev/tcc/ir/numerics"
	"github.com/tcc-dev/tcc/sim/kexec"
	"github.com/tcc-dev/tcc/sim/ref"
)

// cclCase is one collective on a 1xN mesh.
type cclCase struct {
	name  string
	n     int
	dt    ir.DType
	shape []int
	build func(b *ir.Builder, x *ir.Value, n int) *ir.Value
}

func allReduce(b *ir.Builder, x *ir.Value, n int) *ir.Value { return b.AllReduce(x, n) }

func reduceScatter(axis int) func(b *ir.Builder, x *ir.Value, n int) *ir.Value {
	return func(b *ir.Builder, x *ir.Value, n int) *ir.Value { return b.ReduceScatter(x, axis, n) }
}

func allGather(axis int) func(b *ir.Builder, x *ir.Value, n int) *ir.Value {
	return func(b *ir.Builder, x *ir.Value, n int) *ir.Value { return b.AllGather(x, axis, n) }
}

var cclCases = []cclCase{
	{"all_reduce 1x1", 1, ir.BF16, []int{1, 1, 256}, allReduce},
	{"all_reduce hidden 1x2", 2, ir.BF16, []int{1, 1, 5120}, allReduce},
	{"all_reduce hidden 1x4", 4, ir.BF16, []int{1, 1, 5120}, allReduce},
	{"all_reduce hidden 1x8", 8, ir.BF16, []int{1, 1, 5120}, allReduce},
	{"all_reduce full tiles 1x2", 2, ir.BF16, []int{64, 96}, allReduce},
	// a prefill activation: 240 tiles a link, more than the staging holds,
	// so several packets and no forwarding slots (a two-card all-reduce)
	{"all_reduce prefill rows 1x2", 2, ir.BF16, []int{1, 96, 5120}, allReduce},
	{"all_reduce fp32 20 rows 1x4", 4, ir.FP32, []int{20, 256}, allReduce},
	{"reduce_scatter hidden 1x2", 2, ir.BF16, []int{1, 1, 5120}, reduceScatter(-1)},
	{"reduce_scatter hidden 1x4", 4, ir.BF16, []int{1, 1, 5120}, reduceScatter(2)},
	{"reduce_scatter hidden 1x8", 8, ir.BF16, []int{1, 1, 5120}, reduceScatter(-1)},
	{"reduce_scatter rows 1x2", 2, ir.BF16, []int{64, 64}, reduceScatter(0)},
	{"all_gather logits 1x2", 2, ir.BF16, []int{4, 1, 1024}, allGather(-1)},
	{"all_gather logits 1x4", 4, ir.BF16, []int{4, 1, 512}, allGather(2)},
	{"all_gather logits 1x8", 8, ir.BF16, []int{2, 1, 256}, allGather(-1)},
	{"all_gather leading 1x4", 4, ir.FP32, []int{2, 3, 64}, allGather(0)},
	// the one-tile-per-barrier adders (RingOptions.PerTile, ringOptions)
	{"all_reduce hidden 1x2 per tile", 2, ir.BF16, []int{1, 1, 5120}, allReduce},
	{"reduce_scatter rows 1x2 per tile", 2, ir.BF16, []int{64, 64}, reduceScatter(0)},
	// streaming (two staging slots) with the one-tile-per-barrier adders
	{"all_reduce prefill rows 1x2 per tile", 2, ir.BF16, []int{1, 96, 5120}, allReduce},
}

// longCCLCases run only with TCC_LONG=1 (ir/longtest): further variants
// of a path another default case covers (~1 s each).
var longCCLCases = map[string]bool{
	"all_reduce prefill rows 1x2 per tile": true, // "all_reduce prefill rows 1x2" streams by default
}

// ringOptions are the cases lowered with adder constraints (the structure
// the timing model's all-reduce calibration row uses).
var ringOptions = map[string]RingOptions{
	"all_reduce hidden 1x2 per tile":       {MaxWorkersPerLink: 4, PerTile: true},
	"reduce_scatter rows 1x2 per tile":     {MaxWorkersPerLink: 4, PerTile: true},
	"all_reduce prefill rows 1x2 per tile": {MaxWorkersPerLink: 8, PerTile: true},
}

// cclGraph builds the one-op graph of tc on a 1xN mesh.
func cclGraph(t *testing.T, tc cclCase) (*ir.Graph, *ir.Op) {
	t.Helper()
	b := ir.NewBuilder("ccl")
	b.G.Mesh = ir.Mesh{Rows: 1, Cols: tc.n}
	x := b.Input("x", ir.T(tc.dt, tc.shape...))
	b.Region("ccl", 0)
	b.Output(tc.build(b, x, tc.n))
	g, err := b.Finish()
	if err != nil {
		t.Fatalf("building the graph: %v", err)
	}
	ops := g.Ops()
	return g, ops[len(ops)-1]
}

// cclMatrix is the (batch, rows, cols) view tile layout uses.
func cclMatrix(s ir.Shape) (int, int, int) {
	switch s.Rank() {
	case 0:
		return 1, 1, 1
	case 1:
		return 1, 1, s[0]
	}
	return s.Numel() / (s[s.Rank()-1] * s[s.Rank()-2]), s[s.Rank()-2], s[s.Rank()-1]
}

// cclCluster returns a ring of tc.n devices with every ring link of tgt
// cabled and the program's buffers allocated, x of device d set to xs[d].
func cclCluster(t *testing.T, tgt *target.Target, p *kir.Program, op *ir.Op, ctx *Context, xs [][]float32) *kexec.Cluster {
	t.Helper()
	n := len(xs)
	c, err := kexec.NewCluster(tgt, n, kexec.RingLinks(n, tgt.Eth.RingEast, tgt.Eth.RingWest))
	if err != nil {
		t.Fatal(err)
	}
	x := op.Operands[0]
	for d, dev := range c.Devices {
		for _, buf := range p.Buffers {
			if _, err := dev.Alloc(buf); err != nil {
				t.Fatal(err)
			}
		}
		bt, r, cl := cclMatrix(x.Type.Shape)
		if err := dev.WriteTiles(ctx.BufferName(x), numerics.TilizeBatch(xs[d], bt, r, cl)); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

func TestCollectivesOnCluster(t *testing.T) {
	tgt := target.Blackhole()
	ctx := NewContext(tgt)
	sources := map[string]cpp.Source{}
	dir := t.TempDir()
	for ci, tc := range cclCases {
		t.Run(tc.name, func(t *testing.T) {
			if longCCLCases[tc.name] {
				longtest.Skip(t, "a further collective variant on the simulator")
			}
			g, op := cclGraph(t, tc)
			cctx := *ctx
			cctx.Ring = ringOptions[tc.name]
			p, err := Lower(op, &cctx)
			if err != nil {
				t.Fatal(err)
			}
			// Device data: bf16-exact values around a per-device offset.
			rng := rand.New(rand.NewPCG(uint64(ci)+7, 11))
			x := op.Operands[0]
			xs := make([][]float32, tc.n)
			envs := make([]map[*ir.Value]ref.Tensor, tc.n)
			for d := range xs {
				xs[d] = make([]float32, x.Type.Shape.Numel())
				for i := range xs[d] {
					xs[d][i] = numerics.RoundBF16(float32(rng.NormFloat64()) + float32(d)/4)
				}
				envs[d] = map[*ir.Value]ref.Tensor{x: {Shape: x.Type.Shape, Data: xs[d]}}
			}
			want, err := ref.EvalMesh(g, envs, ref.DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			c := cclCluster(t, tgt, p, op, ctx, xs)
			res := op.Result()
			// The output's padding rows keep what DRAM held (never-written
			// DRAM is NaN garbage in the simulator): give them a finite
			// sentinel, so that a NaN there can only come from stale L1.
			for _, dev := range c.Devices {
				tiles, err := dev.ReadTiles(ctx.BufferName(res))
				if err != nil {
					t.Fatal(err)
				}
				for i := range tiles {
					tiles[i] = 1234
				}
				if err := dev.WriteTiles(ctx.BufferName(res), tiles); err != nil {
					t.Fatal(err)
				}
			}
			stats, err := c.RunAll(p, kexec.RunOptions{})
			if err != nil {
				t.Fatal(err)
			}
			exact := tc.n <= 2 || op.Kind == ir.OpAllGather
			var first []float32
			for d, dev := range c.Devices {
				tiles, err := dev.ReadTiles(ctx.BufferName(res))
				if err != nil {
					t.Fatal(err)
				}
				bt, r, cl := cclMatrix(res.Type.Shape)
				got := numerics.UntilizeBatch(tiles, bt, r, cl)
				w := want[d][res].Data
				if op.Kind != ir.OpAllGather {
					// Padding rows of reduced tiles must not have added stale
					// L1 (never-written L1 reads as NaN in the simulator); they
					// hold the sentinel or what the program wrote.
					for i, v := range tiles {
						if v != v {
							t.Fatalf("device %d: element %d of the result's tiles (a padding row) is NaN: stale L1 was added", d, i)
						}
					}
				}
				if exact {
					if !slices.Equal(w, got) { // cmp.Diff only to report: it costs ~1 CPU-s a ring
						t.Fatalf("device %d result differs from the reference (exact expected) (-want +got):\n%s", d, cmp.Diff(w, got))
					}
				} else if pcc, rel := numerics.PCC(w, got), numerics.MaxRelErr(w, got); pcc < 0.9999 {
					t.Errorf("device %d: PCC %.6f (want >= 0.9999), max rel err %.3g", d, pcc, rel)
				}
				if op.Kind == ir.OpAllReduce || op.Kind == ir.OpAllGather {
					if first == nil {
						first = got
					} else if !slices.Equal(first, got) {
						t.Errorf("device %d's replicated result differs from device 0's (-dev0 +dev%d):\n%s", d, d, cmp.Diff(first, got))
					}
				}
			}
			if tc.n == 2 && op.Kind == ir.OpAllGather {
				// One live row per tile: the workers pack it, one send per link.
				if got := p.Kernel("eth_sender").Defines["CCL_PACKED_GATHER"]; got != "1" {
					t.Errorf("two-card all_gather of one-row tiles does not take the packed path (CCL_PACKED_GATHER %q)", got)
				}
			}
			if tc.n > 1 {
				pl := p.Kernel("eth_sender").Defines
				t.Logf("%s: links %s, adders/link %s, packet %s tiles, steps %s, wire %s B/tile, est %s cycles; device 0 sent %d B over ethernet in %d steps",
					tc.name, pl["CCL_LINKS"], pl["CCL_WORKERS_PER_LINK"], pl["CCL_PACKET_TILES"], pl["CCL_STEPS"], pl["CCL_WIRE_BYTES_PER_TILE"],
					pl["CCL_EST_CYCLES"], stats[0].EthBytes, stats[0].Steps)
			}
			for _, k := range p.Kernels {
				src, err := cpp.PrintKernel(p, k)
				if err != nil {
					t.Fatal(err)
				}
				f := filepath.Join(dir, fmt.Sprintf("case%d.%s.%s.cpp", ci, p.Name, k.Name))
				if err := os.WriteFile(f, src, 0o644); err != nil {
					t.Fatal(err)
				}
				sources[f] = cpp.Source{Processor: k.Processor, Defines: k.Defines}
			}
		})
	}
	t.Run("kernels compile", func(t *testing.T) {
		longtest.Skip(t, "the g++ syntax check of every collective kernel (~3 CPU-s)")
		checkKernelSyntax(t, "collective kernels", t.TempDir(), sources, false)
	})
}

// TestCollectiveDeadlock breaks the 1x2 all_reduce: card 0's sender never
// sends, so card 1's receiver waits forever; the error names the card, the
// ethernet core and the transfer it waits for.
func TestCollectiveDeadlock(t *testing.T) {
	tgt := target.Blackhole()
	ctx := NewContext(tgt)
	_, op := cclGraph(t, cclCases[1])
	good, err := Lower(op, ctx)
	if err != nil {
		t.Fatal(err)
	}
	broken, _ := Lower(op, ctx)
	broken.Kernel("eth_sender").Body = nil
	xs := [][]float32{make([]float32, 5120), make([]float32, 5120)}
	c := cclCluster(t, tgt, good, op, ctx, xs)
	_, err = c.Run([]*kir.Program{broken, good}, kexec.RunOptions{})
	var de *kexec.DeadlockError
	if !errors.As(err, &de) {
		t.Fatalf("got %v (%T), want a *kexec.DeadlockError", err, err)
	}
	recv := fmt.Sprintf("device 1 core eth%d kernel \"eth_receiver\": eth_wait_for_bytes waits for %d bytes from device 0 eth%d, has 0",
		tgt.Eth.RingWest[0], 80*64, tgt.Eth.RingEast[0])
	if !strings.Contains(err.Error(), recv) {
		t.Errorf("the deadlock does not name the waiting receiver:\n%s\nwant a line containing:\n%s", err, recv)
	}
	for _, b := range de.Blocked {
		if b.Device != 1 {
			t.Errorf("card %d is blocked (%s); only card 1 waits for the missing transfer", b.Device, b)
		}
	}
}

func TestCollectiveGeometry(t *testing.T) {
	t.Run("chunks", func(t *testing.T) {
		for _, tc := range []struct {
			shape ir.Shape
			axis  int
			n     int
			want  cclChunks
			pages []int // pageOf(1, i) for i = 0..
		}{
			// [4,1,1024] gathered from 2 cards: 4 tile rows of 32 tiles,
			// card 1's slice is tiles 16..31 of every row.
			{ir.Shape{4, 1, 1024}, 2, 2, cclChunks{Count: 2, Tiles: 64, Run: 16, Stride: 32}, []int{16, 17}},
			// Rows split: [64, 64] over 2 cards, card 1 has tile row 1.
			{ir.Shape{64, 64}, 0, 2, cclChunks{Count: 2, Tiles: 2, Run: 2, Stride: 4}, []int{2, 3}},
			// Leading dim: [8, 3, 64] over 4 cards, 2 matrices of 2 tiles each.
			{ir.Shape{8, 3, 64}, 0, 4, cclChunks{Count: 4, Tiles: 4, Run: 4, Stride: 16}, []int{4, 5, 6, 7}},
		} {
			got, err := axisChunks(tc.shape, tc.axis, tc.n)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("axisChunks(%s, %d, %d) = %+v, want %+v", tc.shape, tc.axis, tc.n, got, tc.want)
			}
			for i, w := range tc.pages {
				if p := got.pageOf(1, i); p != w {
					t.Errorf("%s: tile %d of chunk 1 is page %d, want %d", tc.shape, i, p, w)
				}
			}
		}
		if _, err := axisChunks(ir.Shape{1, 1, 96}, 2, 2); err == nil || !strings.Contains(err.Error(), "ccl-tile-split") {
			t.Errorf("a split into 48-column slices was accepted: %v", err)
		}
		if _, err := flatChunks(10, 4); err == nil {
			t.Error("10 tiles split into 4 equal chunks")
		}
	})
	t.Run("wire segments", func(t *testing.T) {
		for _, tc := range []struct {
			shape ir.Shape
			dt    ir.DType
			want  []cclSegment
		}{
			{ir.Shape{1, 1, 64}, ir.BF16, []cclSegment{{Off: 0, Size: 32}, {Off: 512, Size: 32}}},
			{ir.Shape{4, 64}, ir.FP32, []cclSegment{{Off: 0, Size: 256}, {Off: 1024, Size: 256}}},
			{ir.Shape{20, 64}, ir.BF16, []cclSegment{{Off: 0, Size: 1024}, {Off: 1024, Size: 128}, {Off: 1536, Size: 128}}},
			{ir.Shape{64, 64}, ir.BF16, []cclSegment{{Off: 0, Size: 2048}}},
		} {
			if diff := cmp.Diff(tc.want, wireSegments(tc.shape, tc.dt)); diff != "" {
				t.Errorf("wireSegments(%s %s) (-want +got):\n%s", tc.shape, tc.dt, diff)
			}
		}
	})
	t.Run("plan", func(t *testing.T) {
		tgt := target.Blackhole()
		// all_reduce [1,1,5120] bf16 on 1x2: one reduce step over 160 tiles.
		p, err := PlanRing(tgt, 2, 1, 0, 160, 2048, 64, false)
		if err != nil {
			t.Fatal(err)
		}
		if p.Links != 2 || p.LinkTiles != 80 || p.PacketTiles != 80 || p.Packets() != 1 {
			t.Errorf("plan %+v: want 2 links of 80 tiles in one packet", p)
		}
		// A link's forwarding slots must fit next to one staging tile.
		if _, err := PlanRing(tgt, 4, 3, 3, 1<<20, 2048, 2048, false); err == nil {
			t.Error("a plan whose forwarding slots exceed the ethernet L1 was accepted")
		}
		// Only a step that sends what an earlier one computed needs
		// forwarding slots: a two-card all-reduce writes its sums to the
		// output, so a prefill-size activation ([1,128,5120] bf16: 640
		// tiles of live rows) plans in several packets per link instead of
		// failing rule ccl-eth-l1 on slots it never uses.
		for _, tc := range []struct {
			name                   string
			devices, reduce, gathr int
			slots                  bool
		}{
			{"all_reduce 2 cards", 2, 1, 0, false},
			{"reduce_scatter 2 cards", 2, 1, 0, false},
			{"all_gather 4 cards", 4, 0, 3, false},
			{"reduce_scatter 4 cards", 4, 3, 0, true},
			{"all_reduce 4 cards", 4, 3, 3, true},
		} {
			p, err := PlanRing(tgt, tc.devices, tc.reduce, tc.gathr, 640, 2048, 2048, false)
			if err != nil {
				if tc.slots {
					continue // slots for 640 wire tiles do not fit: the rule stands
				}
				t.Errorf("%s: %v", tc.name, err)
				continue
			}
			_, fwd0, fwd1, end := p.ethLayout(tgt)
			if got := fwd1 > fwd0 || end > fwd1; got != tc.slots {
				t.Errorf("%s: forwarding slots %v (fwd0 %d, fwd1 %d, end %d), want %v", tc.name, got, fwd0, fwd1, end, tc.slots)
			}
			if !tc.slots && p.Packets() < 2 {
				t.Errorf("%s: %d packet(s) per link for 320 tiles; want several (the staging holds fewer)", tc.name, p.Packets())
			}
		}
		if p, err := PlanRing(tgt, 4, 3, 3, 160, 2048, 64, false); err != nil {
			t.Error(err)
		} else if _, fwd0, fwd1, _ := p.ethLayout(tgt); fwd1 == fwd0 {
			t.Error("a four-card all-reduce has no forwarding slots")
		}
	})
	t.Run("streaming", func(t *testing.T) {
		tgt := target.Blackhole()
		for _, tc := range []struct {
			name                            string
			devices, reduce, gathr, tiles   int
			wantSlots, wantPacket, wantPkts int
		}{
			// decode [1,1,5120]: one packet a link, one slot (unchanged)
			{"all_reduce decode 2 cards", 2, 1, 0, 160, 1, 80, 1},
			// prefill [1,256,5120]: both ways, 320 tiles a lane in 13
			// packets of 25 through the receiver's five slots (the
			// sender's two: at most a seventh of the 367,392-byte room each)
			{"all_reduce 256 rows 2 cards", 2, 1, 0, 1280, 5, 25, 13},
			// [1,96,5120]: 120 tiles a lane, 5 equal packets
			{"all_reduce 96 rows 2 cards", 2, 1, 0, 480, 5, 24, 5},
			// steps that forward keep one slot
			{"all_reduce 4 cards", 4, 3, 3, 640, 1, 0, 0},
		} {
			p, err := PlanRing(tgt, tc.devices, tc.reduce, tc.gathr, tc.tiles, 2048, 2048, false)
			if err != nil {
				if tc.wantSlots == 1 && tc.wantPacket == 0 {
					continue // its forwarding slots do not fit; PlanRing says so
				}
				t.Fatalf("%s: %v", tc.name, err)
			}
			got := []int{p.Slots, p.PacketTiles, p.Packets()}
			want := []int{tc.wantSlots, tc.wantPacket, tc.wantPkts}
			if tc.wantPacket == 0 {
				got, want = got[:1], want[:1]
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s: slots, packet tiles, packets (-want +got):\n%s", tc.name, diff)
			}
			staging, fwd0, _, _ := p.ethLayout(tgt)
			slots := p.Slots
			if p.Bidirectional {
				slots += BothWaysOutSlots // the sender's
			}
			if fwd0-staging != slots*p.SlotStride() || fwd0 > tgt.Eth.L1Top {
				t.Errorf("%s: staging %d..%d for %d slots of %d bytes, past the ethernet L1 top %d?", tc.name, staging, fwd0, p.Slots, p.SlotStride(), tgt.Eth.L1Top)
			}
		}
	})
	t.Run("adder tiles", func(t *testing.T) {
		// An adder's CB holds lane 0's tiles of every packet: 4 packets of
		// 80 tiles over 14 lanes give lane 0 6 tiles each, 24, not
		// ceil(320/14) = 23.
		for _, tc := range []struct{ link, packet, m, want int }{
			{320, 80, 14, 24},
			{80, 80, 40, 2},
			{240, 80, 8, 30},
			{103, 80, 10, 11},
		} {
			p := RingPlan{LinkTiles: tc.link, PacketTiles: tc.packet, WorkersPerLink: tc.m}
			if got := p.adderTiles(); got != tc.want {
				t.Errorf("adderTiles(link %d, packet %d, M %d) = %d, want %d", tc.link, tc.packet, tc.m, got, tc.want)
			}
		}
	})
}

// pageOf is the page of tile i of chunk k (the kernels' cclKernels.page).
func (c cclChunks) pageOf(k, i int) int { return (i/c.Run)*c.Stride + k*c.Run + i%c.Run }
