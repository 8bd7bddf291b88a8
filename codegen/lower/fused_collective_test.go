package lower

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/tcc-dev/tcc/codegen/cpp"
	"github.com/tcc-dev/tcc/codegen/hostcfg"
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/ir/longtest"
	"github.com/tcc-dev/tcc/ir/numerics"
	"github.com/tcc-dev/tcc/sim/kexec"
	"github.com/tcc-dev/tcc/sim/ref"
)

// fusedCCLCase is one fused collective on a 1xN mesh.
type fusedCCLCase struct {
	name   string
	n      int
	dt     ir.DType
	shape  []int
	norm   bool
	offset float64
	// tail is whether the program has the tail kernels; adders whether
	// the ring folds the residual into its adders.
	tail, fold bool
	// long: run only with TCC_LONG=1 (ir/longtest).
	long bool
	// topology, when set, cables the ring as that topology
	// (target.WithTopology; else the default's).
	topology string
	// stream: the ring streams through two staging slots, several
	// packets a link (RingPlan.Streaming), and with the norm its adders
	// push the sums into the tail packet by packet.
	stream bool
	// rowStream: the adders count each row of h on the tail core that
	// norms it (rowSignal), instead of pushing it or notifying at the end.
	rowStream bool
	// small: built for smallRing's target.
	small bool
	// oneWay: the ring keeps its links one way (RingOptions.OneWay); a
	// streaming ring otherwise runs them both ways (eth_sender_back).
	oneWay bool
	// keptMax, when > 0, caps the rows a row-stream tail core's h CB
	// keeps for the adders (keptRowsMax): the rest it reads from DRAM.
	keptMax int
}

var fusedCCLCases = []fusedCCLCase{
	{name: "add 1x1", n: 1, dt: ir.BF16, shape: []int{1, 1, 256}, tail: true},
	{name: "add hidden 1x2", n: 2, dt: ir.BF16, shape: []int{1, 1, 5120}, fold: true},
	{name: "add full tiles 1x2", n: 2, dt: ir.BF16, shape: []int{64, 96}, fold: true},
	{name: "add hidden 1x4", n: 4, dt: ir.BF16, shape: []int{1, 1, 5120}, tail: true},
	{name: "add fp32 20 rows 1x4", n: 4, dt: ir.FP32, shape: []int{20, 256}, tail: true},
	{name: "add+norm 1x1", n: 1, dt: ir.BF16, shape: []int{1, 1, 256}, norm: true, offset: 1, tail: true},
	{name: "add+norm hidden 1x2", n: 2, dt: ir.BF16, shape: []int{1, 1, 5120}, norm: true, offset: 1, tail: true, fold: true},
	{name: "add+norm rows 1x2", n: 2, dt: ir.BF16, shape: []int{96, 128}, norm: true, tail: true, fold: true},
	{name: "add+norm hidden 1x4", n: 4, dt: ir.BF16, shape: []int{1, 1, 5120}, norm: true, offset: 1, tail: true, long: true}, // ~1.2 CPU-s; add+norm rows 1x4 and add hidden 1x4 cover four cards by default
	{name: "add+norm rows 1x4", n: 4, dt: ir.BF16, shape: []int{2, 32, 128}, norm: true, tail: true},
	// 32 packed users' rows: whole tiles on the wire, several packets per
	// link, the last too short for every adder lane.
	{name: "add+norm 32 users 1x2", n: 2, dt: ir.BF16, shape: []int{1, 32, 5120}, norm: true, offset: 1, tail: true, fold: true, long: true}, // ~1 CPU-s; the prefill row stream below sends whole tiles in several packets by default
	// a prefill chunk's activation: 240 tiles a link stream through two
	// staging slots in 3 packets of 80 tiles (RingPlan.Streaming)
	{name: "add+norm prefill rows 1x2", n: 2, dt: ir.BF16, shape: []int{1, 96, 5120}, norm: true, offset: 1, tail: true, fold: true, stream: true, long: true}, // ~2 s; the row-stream cases below cover the norm tail by default
	{name: "add prefill rows 1x2", n: 2, dt: ir.BF16, shape: []int{1, 96, 5120}, fold: true, stream: true, long: true},                                         // ~2.5 CPU-s; the row-stream cases below stream by default
	// more tile rows than tail cores (on a 22-core grid with 8-tile
	// packets, 4 adders a link): the adders count each row of h on its
	// tail core, which norms it while the ring runs on (rowStream)
	// a P300's two links, one each way: the ring of one link a card
	{name: "add+norm hidden 1x2 p300", n: 2, dt: ir.BF16, shape: []int{1, 1, 5120}, norm: true, offset: 1, tail: true, fold: true, topology: "p300"},
	{name: "add+norm prefill rows 1x2 p300", n: 2, dt: ir.BF16, shape: []int{1, 96, 5120}, norm: true, offset: 1, tail: true, fold: true, stream: true, topology: "p300", long: true},
	{name: "add+norm prefill row stream 1x2", n: 2, dt: ir.BF16, shape: []int{1, 512, 512}, norm: true, offset: 1, tail: true, fold: true, stream: true, rowStream: true, small: true},
	{name: "add+norm prefill row stream 1x2 one way", n: 2, dt: ir.BF16, shape: []int{1, 512, 512}, norm: true, offset: 1, tail: true, fold: true, stream: true, rowStream: true, small: true, oneWay: true, long: true, keptMax: 1}, // two rows on some tail cores: the second from DRAM
}

// smallRing is the target and context of the small cases: an 11x2 grid,
// ethernet L1 for 8-tile bf16 staging slots (two, or both ways four) and
// adders moving one tile per barrier (as a 4,096-token prefill's do:
// their tiles do not fit their CBs), 4 a link one way, 2 a lane both ways
// (so that the tail keeps three cores a lane).
func smallRing(oneWay bool) (*target.Target, *Context) {
	t := target.Blackhole()
	t.GridY = 2
	eth := *t.Eth
	slots, m := 4, 2
	if oneWay {
		slots, m = 2, 4
	}
	eth.L1Top = eth.L1UnreservedBase + slots*8*ir.BF16.TileBytes()
	t.Eth = &eth
	ctx := NewContext(t)
	ctx.Ring.WorkersPerLink, ctx.Ring.PerTile, ctx.Ring.OneWay = m, true, oneWay
	return t, ctx
}

// fusedCCLGraph builds the one-op graph of tc on a 1xN mesh: x and the
// residual are inputs, the norm weight a weight.
func fusedCCLGraph(t *testing.T, tc fusedCCLCase) (*ir.Graph, *ir.Op) {
	t.Helper()
	b := ir.NewBuilder("fused_ccl")
	b.G.Mesh = ir.Mesh{Rows: 1, Cols: tc.n}
	x := b.Input("x", ir.T(tc.dt, tc.shape...))
	r := b.Input("residual", ir.T(tc.dt, tc.shape...))
	var w *ir.Value
	if tc.norm {
		w = b.Weight("norm.weight", ir.T(ir.BF16, tc.shape[len(tc.shape)-1]))
	}
	b.Region("ccl", 0)
	if tc.norm {
		b.Output(b.AllReduceAddRMSNorm(x, r, w, tc.n, 1e-6, tc.offset)...)
	} else {
		b.Output(b.AllReduceAdd(x, r, tc.n))
	}
	g, err := b.Finish()
	if err != nil {
		t.Fatalf("building the graph: %v", err)
	}
	ops := g.Ops()
	return g, ops[len(ops)-1]
}

// randBF16 returns n bf16-exact normal values scaled by scale around mean.
func randBF16(rng *rand.Rand, n int, mean, scale float64) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = numerics.RoundBF16(float32(mean + scale*rng.NormFloat64()))
	}
	return out
}

func TestFusedCollectivesOnCluster(t *testing.T) {
	sources := map[string]cpp.Source{}
	dir := t.TempDir()
	for ci, tc := range fusedCCLCases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.long {
				longtest.Skip(t, "a further streaming ring on the simulator (the P300 ring ~7 s, the others ~1-2 s)")
			}
			tgt := target.Blackhole()
			ctx := NewContext(tgt)
			if tc.small {
				tgt, ctx = smallRing(tc.oneWay)
			}
			if tc.topology != "" {
				tp, err := target.LookupTopology(tc.topology)
				require.NoError(t, err)
				tgt, err = tgt.WithTopology(tp, tc.n)
				require.NoError(t, err)
				ctx = NewContext(tgt)
			}
			g, op := fusedCCLGraph(t, tc)
			old := keptRowsMax
			keptRowsMax = tc.keptMax
			p, err := Lower(op, ctx)
			keptRowsMax = old
			if err != nil {
				t.Fatal(err)
			}
			if err := kir.Validate(p, tgt); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			if tl := p.Kernel("tail_reader"); tl != nil && tc.rowStream && tl.LookupArg("kept_rows") == nil {
				t.Errorf("the row stream's adders do not write h into the tail cores' CBs (no kept_rows arg on tail_reader)")
			}
			cfg, err := hostcfg.Config(p, tgt)
			if err != nil {
				t.Fatalf("host config: %v", err)
			}
			js, err := cfg.JSON()
			if err != nil {
				t.Fatal(err)
			}
			var back hostcfg.ProgramConfig
			if err := json.Unmarshal(js, &back); err != nil {
				t.Fatalf("host config JSON does not read back: %v", err)
			}
			// DeepEqual first: cmp.Diff of a whole ring's config costs ~3 CPU-s.
			if !reflect.DeepEqual(cfg, &back) {
				t.Errorf("host config JSON round trip (-want +got):\n%s", cmp.Diff(cfg, &back))
			}
			if got := p.Kernel("tail_compute") != nil; got != tc.tail {
				t.Errorf("tail kernels present: %t, want %t", got, tc.tail)
			}
			if got := p.Kernel("compute") != nil && len(p.CBs) > 0 && hasCB(p, "residual", p.Kernel("compute").Cores); got != tc.fold {
				t.Errorf("residual folded into the adders: %t, want %t", got, tc.fold)
			}

			if es := p.Kernel("eth_sender"); es != nil {
				if both := p.Kernel("eth_sender_back") != nil; both != (tc.stream && !tc.oneWay) {
					t.Errorf("senders on both ends of every link: %t, want %t (a streaming ring runs its links both ways)", both, tc.stream && !tc.oneWay)
				}
				slots, pushes := es.Defines["CCL_STAGING_SLOTS"] >= "2", false
				if w := p.Kernel("writer"); w != nil {
					for _, a := range w.Args {
						pushes = pushes || a.Name == "push0_x"
					}
				}
				rowCounts := false
				if w := p.Kernel("writer"); w != nil {
					for _, a := range w.Args {
						rowCounts = rowCounts || a.Name == "row_owner0_x"
					}
				}
				if slots != tc.stream || tc.stream && pushes != (tc.norm && !tc.rowStream) || rowCounts != tc.rowStream {
					t.Errorf("two staging slots %t (want %t), adders push into the tail %t (want %t), count its rows %t (want %t)",
						slots, tc.stream, pushes, tc.stream && tc.norm && !tc.rowStream, rowCounts, tc.rowStream)
				}
			}
			rng := rand.New(rand.NewPCG(uint64(ci)+31, 5))
			x, r := op.Operands[0], op.Operands[1]
			numel := x.Type.Shape.Numel()
			var w []float32
			if tc.norm {
				w = randBF16(rng, op.Operands[2].Type.Shape.Numel(), 0, 0.5)
			}
			xs, rs := make([][]float32, tc.n), make([][]float32, tc.n)
			envs := make([]map[*ir.Value]ref.Tensor, tc.n)
			for d := range xs {
				xs[d] = randBF16(rng, numel, float64(d)/4, 1)
				rs[d] = randBF16(rng, numel, 0, 2) // each card's own residual
				envs[d] = map[*ir.Value]ref.Tensor{x: {Shape: x.Type.Shape, Data: xs[d]}, r: {Shape: r.Type.Shape, Data: rs[d]}}
				if tc.norm {
					wv := op.Operands[2]
					envs[d][wv] = ref.Tensor{Shape: wv.Type.Shape, Data: w}
				}
			}
			want, err := ref.EvalMesh(g, envs, ref.DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}

			links, err := kexec.TargetLinks(tgt, tc.n)
			require.NoError(t, err)
			if es := p.Kernel("eth_sender"); es != nil {
				// The sender sits on every ring link's east channel of
				// chip 0: the topology's links, one a card for a P300.
				var want []ir.CoreRange
				for _, ch := range tgt.Eth.RingEast {
					want = append(want, kir.EthCore(ch).Range())
				}
				if diff := cmp.Diff(want, es.Cores); diff != "" {
					t.Errorf("eth_sender cores (-want +got):\n%s", diff)
				}
			}
			c, err := kexec.NewCluster(tgt, tc.n, links)
			if err != nil {
				t.Fatal(err)
			}
			bt, rows, cols := cclMatrix(x.Type.Shape)
			for d, dev := range c.Devices {
				for _, buf := range p.Buffers {
					if _, err := dev.Alloc(buf); err != nil {
						t.Fatal(err)
					}
				}
				writes := map[*ir.Value][]float32{x: xs[d], r: rs[d]}
				if tc.norm {
					writes[op.Operands[2]] = w
				}
				for v, data := range writes {
					vb, vr, vc := cclMatrix(v.Type.Shape)
					if err := dev.WriteTiles(ctx.BufferName(v), numerics.TilizeBatch(data, vb, vr, vc)); err != nil {
						t.Fatal(err)
					}
				}
			}
			stats, err := c.RunAll(p, kexec.RunOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for ri, res := range op.Results {
				exact := ri == 0 && tc.n <= 2 && tc.dt == ir.BF16
				worst := 1.0
				for d, dev := range c.Devices {
					tiles, err := dev.ReadTiles(ctx.BufferName(res))
					if err != nil {
						t.Fatal(err)
					}
					got := numerics.UntilizeBatch(tiles, bt, rows, cols)
					wv := want[d][res].Data
					if exact {
						if !slices.Equal(wv, got) { // cmp.Diff only to report: it costs ~1 CPU-s a ring
							t.Fatalf("device %d result %d differs from the reference (exact expected) (-want +got):\n%s", d, ri, cmp.Diff(wv, got))
						}
						continue
					}
					pcc, rel := numerics.PCC(wv, got), numerics.MaxRelErr(wv, got)
					worst = min(worst, pcc)
					if pcc < 0.9999 {
						t.Errorf("device %d result %d: PCC %.6f (want >= 0.9999), max rel err %.3g", d, ri, pcc, rel)
					}
				}
				if !exact {
					t.Logf("%s: result %d worst PCC over devices %.6f", tc.name, ri, worst)
				} else {
					t.Logf("%s: result %d exact on every device", tc.name, ri)
				}
			}
			tailCores := 0
			if k := p.Kernel("tail_compute"); k != nil {
				tailCores = len(kir.CoresOf(k.Cores))
			}
			t.Logf("%s: %d kernels, %d tail cores; device 0 ran %d steps, sent %d B over ethernet", tc.name, len(p.Kernels), tailCores, stats[0].Steps, stats[0].EthBytes)
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
		longtest.Skip(t, "the g++ syntax check of every fused collective kernel (~3 CPU-s)")
		checkKernelSyntax(t, "fused collective kernels", t.TempDir(), sources, false)
	})
}

// hasCB reports whether p has a CB called name on cores rs.
func hasCB(p *kir.Program, name string, rs []ir.CoreRange) bool {
	for _, cb := range p.CBs {
		if cb.Name == name && cmp.Equal(cb.Cores, rs) {
			return true
		}
	}
	return false
}

// TestFusedCollectiveStructure checks what the lowering builds for the two
// decode shapes at TP=2 and TP=4: which kernels exist, how many
// notifications the tail waits for and that all cards run one program
// (device_id is the only per-card value).
func TestFusedCollectiveStructure(t *testing.T) {
	ctx := NewContext(target.Blackhole())
	for _, tc := range []struct {
		c       fusedCCLCase
		kernels []string
		wait    int // ring notifications the tail leader waits for
		// pushed: the adders push h into the tail, whose cores each wait
		// for their own tile count (runtime arg count) instead of wait.
		pushed bool
	}{
		// 1x2: 2 links x 40 adders fold the residual; no tail.
		{fusedCCLCases[1], []string{"eth_sender", "eth_receiver", "reader", "compute", "writer"}, 0, false},
		// 1x2 with the norm: the adders push h into the norm tail.
		{fusedCCLCases[6], []string{"eth_sender", "eth_receiver", "reader", "compute", "writer", "tail_reader", "tail_compute", "tail_writer"}, 0, true},
		// 1x4: 2 links x 20 adders + 2 senders + 2 receivers notify.
		{fusedCCLCases[3], []string{"eth_sender", "eth_receiver", "reader", "compute", "writer", "tail_reader", "tail_compute", "tail_writer"}, 44, false},
		// 1x1: no ring, no wait.
		{fusedCCLCases[0], []string{"tail_reader", "tail_compute", "tail_writer"}, 0, false},
	} {
		t.Run(tc.c.name, func(t *testing.T) {
			_, op := fusedCCLGraph(t, tc.c)
			p, err := Lower(op, ctx)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, k := range p.Kernels {
				names = append(names, k.Name)
			}
			if diff := cmp.Diff(tc.kernels, names); diff != "" {
				t.Errorf("kernels (-want +got):\n%s", diff)
			}
			rd := p.Kernel("tail_reader")
			if rd == nil {
				return
			}
			first := kir.CoresOf(rd.Cores)[0]
			var waits []kir.Expr
			kir.Inspect(rd.Body, func(s kir.Stmt) bool {
				if w, ok := s.(kir.NoCSemaphoreWait); ok {
					waits = append(waits, w.Value)
				}
				return true
			})
			if tc.pushed {
				checkPushed(t, p, rd, waits)
				return
			}
			if tc.wait == 0 {
				if len(waits) != 0 {
					t.Errorf("the tail waits (%v) with nothing to wait for", waits)
				}
				return
			}
			if len(waits) != 1 {
				t.Fatalf("tail reader has %d semaphore waits, want 1", len(waits))
			}
			// The leader's wait target is a constant or its sem_target arg.
			target := waits[0]
			if ref, ok := target.(kir.ArgRef); ok {
				vals := rd.RuntimeValuesOn(first)
				for _, a := range rd.ArgsOfKind(kir.RuntimeArg) {
					if a.Name == ref.Name {
						target = kir.C(vals[a.Index].Const)
					}
				}
			}
			if target != kir.Ci(tc.wait) {
				t.Errorf("the tail leader waits for %v, want %d notifications", target, tc.wait)
			}
			// Every notifying ring kernel names the leader.
			for _, k := range p.Kernels {
				for _, a := range k.ArgsOfKind(kir.CommonRuntimeArg) {
					if a.Name == "notify_x" && a.Value != kir.NoCX(first) {
						t.Errorf("kernel %s notifies %v, want the tail leader %s", k.Name, a.Value, first)
					}
				}
			}
		})
	}
}

// checkPushed checks a tail fed by the adders' pushes: every tail core
// waits once, for its own tile count; no ring kernel notifies; and the
// adders' push arguments name every tail tile exactly once, at its
// owner and its page offset in the owner's chunk.
func checkPushed(t *testing.T, p *kir.Program, rd *kir.Kernel, waits []kir.Expr) {
	t.Helper()
	if len(waits) != 1 || waits[0] != kir.Expr(kir.ArgRef{Name: "count"}) {
		t.Fatalf("tail reader waits %v, want one wait for its runtime arg count", waits)
	}
	argOf := func(k *kir.Kernel, c kir.Core, name string) kir.ArgValue {
		for _, a := range k.ArgsOfKind(kir.RuntimeArg) {
			if a.Name == name {
				return k.RuntimeValuesOn(c)[a.Index]
			}
		}
		t.Fatalf("kernel %s has no runtime arg %s", k.Name, name)
		return kir.ArgValue{}
	}
	// want: tail tile page -> (owner, byte offset), from the tail's args.
	type dest struct {
		X, Y kir.ArgValue
		Off  uint32
	}
	want := map[uint32]dest{}
	tb := uint32(ir.BF16.TileBytes())
	for _, c := range kir.CoresOf(rd.Cores) {
		start, count := argOf(rd, c, "start").Const, argOf(rd, c, "count").Const
		for s := uint32(0); s < count; s++ {
			want[start+s] = dest{kir.NoCX(c), kir.NoCY(c), s * tb}
		}
	}
	got := map[uint32]dest{}
	wr := p.Kernel("writer")
	for _, c := range kir.CoresOf(wr.Cores) {
		first, n, lane := argOf(wr, c, "first_tile").Const, argOf(wr, c, "num_tiles").Const, argOf(wr, c, "lane").Const
		m := uint32(0) // adders per link: the lanes of the first link
		for _, c2 := range kir.CoresOf(wr.Cores) {
			if argOf(wr, c2, "first_tile").Const == first {
				m++
			}
		}
		for j := uint32(0); lane+j*m < n; j++ {
			pg := first + lane + j*m
			if _, dup := got[pg]; dup {
				t.Errorf("tile %d is pushed twice", pg)
			}
			js := strconv.Itoa(int(j))
			got[pg] = dest{argOf(wr, c, "push"+js+"_x"), argOf(wr, c, "push"+js+"_y"), argOf(wr, c, "push"+js+"_offset").Const}
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("pushed tiles, page -> (owner NoC x, y, offset) (-want +got):\n%s", diff)
	}
	for _, k := range p.Kernels {
		for _, a := range k.ArgsOfKind(kir.CommonRuntimeArg) {
			if a.Name == "notify_x" {
				t.Errorf("kernel %s notifies although the adders push", k.Name)
			}
		}
	}
}

func TestFusedCollectiveErrors(t *testing.T) {
	ctx := NewContext(target.Blackhole())
	build := func(t *testing.T, shape []int, n int, mut func(x *ir.TensorType), norm bool) error {
		b := ir.NewBuilder("bad")
		b.G.Mesh = ir.Mesh{Rows: 1, Cols: n}
		xt := ir.T(ir.BF16, shape...)
		if mut != nil {
			mut(&xt)
		}
		x, r := b.Input("x", xt), b.Input("residual", xt)
		b.Region("ccl", 0)
		if norm {
			b.Output(b.AllReduceAddRMSNorm(x, r, b.Weight("w", ir.T(ir.BF16, shape[len(shape)-1])), n, 1e-6, 0)...)
		} else {
			b.Output(b.AllReduceAdd(x, r, n))
		}
		g, err := b.Finish()
		if err != nil {
			t.Fatal(err)
		}
		ops := g.Ops()
		_, err = Lower(ops[len(ops)-1], ctx)
		return err
	}
	for _, tc := range []struct {
		name  string
		err   error
		wants []string
	}{
		{"norm hidden", build(t, []int{1, 1, 80}, 2, nil, true), []string{"op all_reduce_add_rmsnorm", "rule rmsnorm-hidden", "80"}},
		{"tiles per device", build(t, []int{1, 1, 96}, 4, nil, false), []string{"op all_reduce_add", "rule ccl-chunks", "3 tiles"}},
		{"l1 placement", build(t, []int{1, 1, 64}, 2, func(x *ir.TensorType) { x.Mem = ir.MemoryConfig{Kind: ir.L1Interleaved} }, false),
			[]string{"rule ccl-placement", "l1_interleaved"}},
		// 60 tile rows keep one core per row (too many to split): 400 tiles per core.
		{"norm too wide", build(t, []int{1, 60 * 32, 32 * 400}, 1, nil, true), []string{"rule l1-budget"}},
		{"h aliases the residual", aliased(t, ctx), []string{"rule fused-ccl-alias"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.err == nil {
				t.Fatal("Lower succeeded, want an error")
			}
			for _, w := range tc.wants {
				if !strings.Contains(tc.err.Error(), w) {
					t.Errorf("error %q does not mention %q", tc.err, w)
				}
			}
		})
	}
}

// aliased lowers a 1x4 all_reduce_add whose result is written into the
// residual's buffer (ctx.Alias), which the ring cannot do.
func aliased(t *testing.T, ctx *Context) error {
	_, op := fusedCCLGraph(t, fusedCCLCases[3])
	actx := *ctx
	actx.Alias = map[*ir.Value]*ir.Value{op.Result(): op.Operands[1]}
	_, err := Lower(op, &actx)
	return err
}
