package lower

import (
	"cmp"
	"fmt"
	"strconv"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower/multicore"
	"github.com/tcc-dev/tcc/ir"
)

// Collective family: all_reduce, reduce_scatter and all_gather over the
// devices of a 1xN mesh row, cabled as a ring (target.Ethernet.RingEast /
// RingWest: link l runs from channel RingEast[l] of card d to channel
// RingWest[l] of card d+1 mod N).
//
// # One program for every card
//
// The lowering returns one kir.Program that every card of the row runs as
// one mesh workload (kexec.Cluster.Run, runtime.Executable.RunCollective).
// What differs per card - which chunk it sends and receives at each step -
// is computed by the kernels from the common runtime arg device_id
// (kir.DeviceID, resolved when the program is loaded on a card), so one
// program config per op signature serves all cards.
//
// # Algorithm
//
// The tensor's tiles are cut into chunks (reduce_scatter, all_gather: the
// per-device slices along the axis; all_reduce: N equal runs of tiles, or
// for N = 2 the whole tensor). A step moves one chunk per card to the next
// card; in every step each card sends on its east links and receives on
// its west links.
//
//   - reduce steps (ring reduce-scatter, N-1 steps): at step s card d sends
//     chunk (d-s-1) mod N - its own x at s = 0, afterwards the partial sum
//     it computed in step s-1 - and receives the partial of chunk
//     (d-s-2) mod N, which adder cores add to its own x chunk. After the
//     last step card d holds the full sum of chunk d.
//   - gather steps (ring all-gather, N-1 steps): at step s card d sends
//     chunk (d-s) mod N of the result (its own at s = 0, afterwards the one
//     it received in step s-1) and stores the chunk (d-s-1) mod N it
//     receives.
//
// reduce_scatter is the reduce steps with the output the final chunk,
// all_gather the gather steps (the sender also copies the card's own slice
// into the output), all_reduce both. For N = 2 all_reduce is one reduce
// step on a single chunk: each card sends its whole partial to the other
// and both add - half the steps of reduce-scatter + all-gather for the same
// bytes, which wins at decode sizes where a step is mostly handshake
// latency. Replicated results are identical on every card (a gathered
// chunk is a copy of the values its owner computed; tile padding may
// differ). For N = 2 a reduce is one rounding of the exact sum, as the
// reference, so the result is exact; for N > 2 every hop rounds the partial
// to the dtype.
//
// # Kernels
//
// The ring is a multicore.Ring (its doc states the packet protocol). The
// sender sends tiles it reads from DRAM (x, or a gathered chunk of the
// output) or a forwarding slot; the receiver hands a reduce step's packet
// to the Ring's workers, M adder cores per link (reader, compute, writer),
// and stores a gather step's in the output. Adder m takes tiles m, m+M, ... of a packet, adds the local x
// tile (from DRAM) and the received segments (add_tiles) and writes the
// sum to the sender's forwarding slot s % 2, which the next step sends,
// or in the last step to the output.
//
// Only the rows of a tile that hold data travel (wireSegments): a [1,1,H]
// bf16 tensor sends 64 of every 2,048 bytes. No stale L1 reaches a result:
// the adders zero their received-tile CB once, so the padding rows of a
// received tile add zeros, and gather steps store only the segments that
// arrived (the padding rows of the output in DRAM keep what they held).
//
// # Streaming
//
// A two-card all-reduce (one reduce step, no forwarding) whose link
// share does not fit one packet - a prefill activation, [1,256,5120]
// bf16 is 640 tiles a link against the 179 the staging holds - streams
// (RingPlan.Streaming): the ethernet L1 holds two staging slots of at
// most half the room, the link's tiles go in equal packets, packet k in
// slot k % 2 on both ends. The sender sends packet k, issues the DRAM
// reads of packet k+1 into its other slot and only then waits for the
// receiver's release; the receiver hands packet k to the adders and
// releases it once they are done with packet k-1, whose slot packet k+1
// fills (multicore.Ring's Streaming protocol). So the sender's reads and
// the adders' reads and adds overlap the wire, which carries one packet
// after another with one handshake between them. The adders' results and
// rounding are those of the one-slot ring: the sums are bit for bit the
// same. With a norm tail whose adders hold all their tiles, the adders
// push each packet's sums into the tail cores' L1 as they make them
// (multicore.Push), so a tail core starts once its own tiles are in.
//
// A streaming ring runs every link both ways (RingPlan.Bidirectional):
// the lanes are the ring's links from card d to d+1 and the same links
// back, each carrying its share of the tensor, so a card's bytes leave on
// every link it has (the p150a pair's four, the P300's two) instead of
// half of them. Every ethernet core then holds one lane's sender and the
// other direction's receiver: the senders of the links' first direction
// and their receivers run on ERISC0 (handshake channel 0), the way back on
// ERISC1 (channel 1, kir.EthChannel), so the two directions of a link
// have their own bytes_sent words; the receiver's packets land in its
// three staging slots (BothWaysSlots: the adders may be two packets
// behind the wire before the receiver holds one back) and the sender reads
// its own into two slots after them. RingOptions.OneWay keeps the one-way
// ring (comparisons).
//
// A two-card all_gather of tiles with few live rows whose link share fits
// one packet (the logits at B = 1) takes the worker path of
// collective_gather.go instead: worker cores pack and unpack the wire
// segments and each ethernet core moves one packet.
//
// # Cost
//
// PlanRing estimates the time and picks the adder cores; the plan is
// recorded in the sender's defines (CCL_*). For all_reduce of [1,1,5120]
// bf16 on 1x2 (160 tiles, 2 links of 80 tiles, one packet each) the
// estimate is dominated by the packet's handshake and the adders' tiles:
// with the fused residual (two adds per tile) it picks 40 adders per link,
// 2 tiles each. tt-metal's measured two-card collectives take 16-28 us at
// decode sizes; `tcc perf` predicts tcc's from the kernels.
//
// # Fused collectives
//
// fused_collective.go builds all_reduce_add[_rmsnorm] on the same ring
// with hooks a plain collective leaves unset: cclOp.residual, notify and
// push.

// Semaphore ids: on the ethernet cores id 0 is the sender's "ready" count
// and the receiver's "free" count; on the adders id 0 is "packet arrived",
// id 1 "forwarding slot free"; on the adders and the tail cores id 3
// carries the address of the tail's h CB (cclOp.push); on the tail cores
// id 4 counts the subgroups' sums of a two-level norm exchange
// (multicore.Exchange's SemSub; its SemIn and SemValid are 1 and 2).
const (
	cclSemEth      = 0
	cclSemArrived  = 0
	cclSemFwdFree  = 1
	cclSemPushAddr = 3
	cclSemNormSub  = 4
)

type cclKind uint8

const (
	cclAllReduce cclKind = iota
	cclReduceScatter
	cclAllGather
)

// cclOp is one collective to lower.
type cclOp struct {
	kind   cclKind
	n      int
	x, out *ir.Value
	chunks cclChunks
	segs   []cclSegment
	plan   RingPlan
	// residual, when set, is added by the adders to the reduced sum before
	// it is written: out = r(residual + r(sum)), r rounding to the dtype
	// (fused all_reduce_add; only for an all-reduce of one chunk, which
	// every card reduces in full: withResidual).
	residual *ir.Value
	// notify, when set, is the worker core whose semaphore notifySem every
	// ring kernel that writes out or reads it back increments by one when
	// it has finished with out (notifications() in all), so work that
	// reads out on that card can start (fused_collective.go).
	notify    *kir.Core
	notifySem int
	// push, when set, makes the adders also push each sum tile's live rows
	// into the norm tail's h CB (counted in cclSemTail, the address in
	// cclSemPushAddr), under the write barrier of their DRAM writes.
	push *multicore.Push
	// rows, when set, makes the adders count each completed row of out on
	// the norm tail core that owns it (fused_collective_stream.go).
	rows *rowSignal
}

// pushable reports whether c's adders can push into a tail: a one-step
// all-reduce with a residual whose adders hold all their tiles (batched),
// in one packet per link or streaming (each packet's sums are pushed as
// they are made, so a tail core starts once its own tiles are in).
func (c *cclOp) pushable(ctx *Context) bool {
	return c.residual != nil && c.batchedAdders(ctx) && (c.plan.Packets() == 1 || c.plan.Streaming())
}

// newAllReduce plans the ring all-reduce of x into out over n > 1
// devices: one chunk for two devices (each card reduces the whole tensor,
// so the adders add residual when it is not nil: withResidual), else n
// equal runs of tiles.
func newAllReduce(x, out, residual *ir.Value, n int, ctx *Context) (*cclOp, error) {
	c := &cclOp{kind: cclAllReduce, n: n, x: x, out: out, segs: wireSegments(x.Type.Shape, x.Type.DType)}
	var err error
	if n == 2 {
		c.chunks = cclChunks{Count: 1, Tiles: x.Type.Shape.Tiles(), Run: x.Type.Shape.Tiles(), Stride: x.Type.Shape.Tiles()}
		c.residual = residual
	} else if c.chunks, err = flatChunks(x.Type.Shape.Tiles(), n); err != nil {
		return nil, err
	}
	return c, c.planRing(ctx)
}

// planRing chooses the ring plan for c's kind, devices and chunks.
func (c *cclOp) planRing(ctx *Context) error {
	reduce, gather := c.n-1, c.n-1
	if c.kind == cclAllGather {
		reduce = 0
	}
	if c.kind == cclReduceScatter || c.kind == cclAllReduce && c.n == 2 {
		gather = 0
	}
	workers := maxWorkersPerLink
	if w := ctx.Ring.MaxWorkersPerLink; w > 0 {
		workers = min(w, workers)
	}
	var err error
	c.plan, err = planRing(ctx.Target, c.n, reduce, gather, c.chunks.Tiles, c.x.Type.DType.TileBytes(), multicore.SpanBytes(c.segs), c.residual != nil, workers, ctx.Ring.WorkersPerLink, ctx.Ring.OneWay)
	return err
}

// withResidual reports whether c can fold a residual into its adders:
// an all-reduce in one reduce step over one chunk (two devices), so every
// adder writes final sums of the whole tensor.
func (c *cclOp) withResidual() bool {
	return c.kind == cclAllReduce && c.chunks.Count == 1 && c.plan.ReduceSteps == 1 && c.plan.GatherSteps == 0
}

// notifications is the number of increments c.notify receives: one per
// adder core, and with gather steps one per sender (it reads gathered
// chunks back from out) and per receiver (it writes them).
func (c *cclOp) notifications() int {
	pl := c.plan
	n := 0
	if pl.ReduceSteps > 0 {
		n += pl.Links * pl.WorkersPerLink
	}
	if pl.GatherSteps > 0 {
		n += 2 * pl.Links
	}
	return n
}

// notifyDone declares the common args naming c.notify on kernel kn and
// emits into its builder b the increment of the notify core's semaphore
// (after the kernel's last NoC transfer has completed); nothing when c
// has no notify core.
func (c *cclOp) notifyDone(kn *kir.Kernel, b *kir.Builder) {
	if c.notify == nil {
		return
	}
	x, y := kn.CommonArg("notify_x", kir.NoCX(*c.notify)), kn.CommonArg("notify_y", kir.NoCY(*c.notify))
	b.Comment("Done with out: tell the core that reads it next.")
	b.NoCSemaphoreInc(kir.NoCAddr{X: x, Y: y, Addr: kir.GetSemaphore{ID: kir.Ci(c.notifySem)}}, kir.C(1))
}

func lowerCollective(op *ir.Op, ctx *Context) (*kir.Program, error) {
	x, out := op.Operands[0], op.Result()
	if err := requireTiles(x, out); err != nil {
		return nil, err
	}
	dt := x.Type.DType
	if dt != ir.BF16 && dt != ir.FP32 || out.Type.DType != dt {
		return nil, fmt.Errorf("rule ccl-dtype: collectives move bf16 or fp32 tiles with the operand's dtype; got %s -> %s", dt, out.Type.DType)
	}
	n, ok := op.Attrs["devices"].(int)
	if !ok || n < 1 {
		return nil, fmt.Errorf("rule attr: %s needs an int attribute \"devices\" >= 1", op.Name())
	}
	if n == 1 {
		return cclCopy(op, ctx)
	}
	if op.Kind == ir.OpAllReduce {
		c, err := newAllReduce(x, out, nil, n, ctx)
		if err != nil {
			return nil, err
		}
		return c.program(op, ctx)
	}
	c := &cclOp{n: n, x: x, out: out, segs: wireSegments(x.Type.Shape, dt)}
	full := x.Type.Shape
	switch op.Kind {
	case ir.OpReduceScatter:
		c.kind = cclReduceScatter
	case ir.OpAllGather:
		full, c.kind = out.Type.Shape, cclAllGather
	default:
		return nil, fmt.Errorf("rule ccl-kind: %s is not a collective", op.Name())
	}
	ax, err := axisAttr(op, "axis", full.Rank())
	if err != nil {
		return nil, err
	}
	if c.chunks, err = axisChunks(full, ax, n); err != nil {
		return nil, err
	}
	if err := c.planRing(ctx); err != nil {
		return nil, err
	}
	return c.program(op, ctx)
}

// cclCopy is the collective over one device: the identity, a page copy.
func cclCopy(op *ir.Op, ctx *Context) (*kir.Program, error) {
	x, out := op.Operands[0], op.Result()
	if x.Type.Shape.Tiles() != out.Type.Shape.Tiles() {
		return nil, fmt.Errorf("rule ccl-one-device: over one device the result %s must have the operand's %d tiles", out.Type.Shape, x.Type.Shape.Tiles())
	}
	return pageCopyProgram(op, ctx, x, out)
}

// cclKernels holds what the kernel builders share.
type cclKernels struct {
	*cclOp
	ctx            *Context
	p              *kir.Program
	ring           *multicore.Ring
	xName, outName string
	tb, stride     int
	workerRanges   []ir.CoreRange
	// batched: the adders' CBs hold every tile an adder handles (one
	// reduce step, plan.adderTiles() each), so each packet's reads are
	// all in flight at once, the local tiles before the packet arrives,
	// and its writes share one barrier (see adders).
	batched bool
	// compact (batched, one chunk, and a link's tiles fit the staging
	// area at wire stride): the wire segments travel packed, WireBytes
	// per tile at link-local offsets, in both ethernet cores' staging.
	// The adders write their local tiles' segments into the sender's
	// staging (they read those tiles anyway), the sender waits for all of
	// them and sends each packet with one eth_send_bytes, and the adders
	// read the received segments from the packed staging: no DRAM read
	// and no send per segment on the ethernet core.
	compact bool
}

// maxBatchedAdderBytes bounds the L1 the batched adders' CBs may take.
const maxBatchedAdderBytes = 512 << 10

// program builds c's program for op (the packed gather when it applies),
// or returns the first error.
func (c *cclOp) program(op *ir.Op, ctx *Context) (*kir.Program, error) {
	p, err := newProgram(op, ctx)
	if m, ok := c.packedGather(ctx); ok {
		err = cmp.Or(err, c.buildPackedGather(p, ctx, m))
	} else {
		err = cmp.Or(err, c.build(p, ctx))
	}
	if err != nil {
		return nil, err
	}
	return p, nil
}

// newKernels lays out c's ring in p: the ethernet L1 layout, the links'
// ethernet cores and their semaphore and, with m > 0, m workers per link
// (the first Links*m worker cores).
func (c *cclOp) newKernels(p *kir.Program, ctx *Context, m int) (*cclKernels, error) {
	t, pl := ctx.Target, c.plan
	k := &cclKernels{cclOp: c, ctx: ctx, p: p, xName: ctx.BufferName(c.x), outName: ctx.BufferName(c.out),
		tb: c.x.Type.DType.TileBytes()}
	k.stride = t.DRAMPageSize(k.tb)
	staging, fwd0, fwd1, end := pl.ethLayout(t)
	if end > t.Eth.L1Top {
		return nil, fmt.Errorf("rule ccl-eth-l1: the ethernet L1 layout ends at %d, past the kernel region's top %d", end, t.Eth.L1Top)
	}
	var cores []kir.Core
	if m > 0 {
		cores, k.workerRanges = firstCores(t, pl.Links*m)
	}
	k.ring = multicore.NewRing(t, pl.Links, cores, m, pl.Bidirectional)
	r := k.ring
	r.OutStaging = pl.outStaging(staging)
	r.OutSlots = BothWaysOutSlots
	if pl.Bidirectional {
		r.InFlight = min(BothWaysInFlight, multicore.MaxInFlight, max(pl.Slots-1, 2))
	}
	r.ChunkTiles, r.LinkTiles, r.PacketTiles, r.TileBytes, r.Segs = c.chunks.Tiles, pl.LinkTiles, pl.PacketTiles, k.tb, c.segs
	r.Staging, r.Fwd0, r.Fwd1 = staging, fwd0, fwd1
	r.Slots, r.SlotStride = max(pl.Slots, 1), pl.SlotStride()
	r.SemEth, r.SemArrived, r.SemFwdFree = cclSemEth, cclSemArrived, cclSemFwdFree
	p.AddSemaphore(kir.Semaphore{ID: cclSemEth, Cores: r.EthRanges()})
	return k, nil
}

// build adds the ring's semaphores, CBs and kernels to p, whose buffers
// must include c's x, out (and residual) buffers. The adders take the
// first Links*WorkersPerLink worker cores (none without reduce steps).
func (c *cclOp) build(p *kir.Program, ctx *Context) error {
	if c.residual != nil && !c.withResidual() {
		return fmt.Errorf("rule ccl-residual: a residual is added by the adders only when every card reduces the whole tensor (all-reduce over two devices), not over %d", c.n)
	}
	pl := c.plan
	m := 0
	if pl.ReduceSteps > 0 {
		m = pl.WorkersPerLink
	}
	k, err := c.newKernels(p, ctx, m)
	if err != nil {
		return err
	}
	if pl.ReduceSteps > 0 {
		if err := k.adderResources(); err != nil {
			return err
		}
	}
	for dir := range k.ring.Dirs() {
		k.sender(dir)
		k.receiver(dir)
	}
	if pl.ReduceSteps > 0 {
		k.adders()
	}
	return nil
}

// adderResources adds the adders' CBs and semaphores.
func (k *cclKernels) adderResources() error {
	pl, rs, dt := k.plan, k.workerRanges, k.x.Type.DType
	k.batched = k.batchedAdders(k.ctx)
	if k.push != nil && !k.pushable(k.ctx) {
		return fmt.Errorf("rule fused-ccl-push: the adders push into the tail only in a one-step all-reduce with a residual, all tiles in their CBs and one packet per link or streaming")
	}
	// The adders hold the chunk the sender sends only when the chunk is
	// the whole tensor (one chunk: the two-card all-reduce).
	k.compact = k.batched && k.chunks.Count == 1 && !pl.Streaming() && pl.LinkTiles*pl.WireBytes <= pl.PacketTiles*k.tb
	p, pages := k.p, k.pages()
	p.AddCB(kir.CB{Index: cbIn0, PageSize: k.tb, Pages: pages, Format: dt, Cores: rs, Name: "local"})
	p.AddCB(kir.CB{Index: cbIn1, PageSize: k.tb, Pages: pages, Format: dt, Cores: rs, Name: "received"})
	p.AddCB(kir.CB{Index: cbOut, PageSize: k.tb, Pages: pages, Format: dt, Cores: rs, Name: "sum"})
	if k.residual != nil {
		p.AddCB(kir.CB{Index: cbIn2, PageSize: k.tb, Pages: pages, Format: dt, Cores: rs, Name: "residual"})
		p.AddCB(kir.CB{Index: cbIm0, PageSize: k.tb, Pages: 2, Format: dt, Cores: rs, Name: "reduced"})
	}
	p.AddSemaphore(kir.Semaphore{ID: cclSemArrived, Cores: rs})
	p.AddSemaphore(kir.Semaphore{ID: cclSemFwdFree, Cores: rs})
	if k.push != nil || (k.rows != nil && k.rows.kept > 0) {
		p.AddSemaphore(kir.Semaphore{ID: cclSemPushAddr, Cores: rs})
	}
	return nil
}

// pages is the depth of the adders' CBs: every tile of an adder when
// batched, else two.
func (k *cclKernels) pages() int {
	if k.batched {
		return k.plan.adderTiles()
	}
	return 2
}

// batchedAdders reports whether the adders' CBs can hold every tile an
// adder handles (one reduce step; see cclKernels.batched).
func (c *cclOp) batchedAdders(ctx *Context) bool {
	pl := c.plan
	if pl.ReduceSteps != 1 || pl.GatherSteps != 0 || ctx.Ring.PerTile {
		return false
	}
	streams := 3 // local, received, sum
	if c.residual != nil {
		streams = 4
	}
	return streams*pl.adderTiles()*c.x.Type.DType.TileBytes() <= maxBatchedAdderBytes
}

// chunkIndex is (dev + 2N - s - back) mod N: the chunk a card handles at
// step s (0 when the collective has one chunk).
func (k *cclKernels) chunkIndex(dev kir.Expr, s kir.Expr, back int) kir.Expr {
	if k.chunks.Count == 1 {
		return kir.C(0)
	}
	return kir.Mod(kir.Sub(kir.Add(dev, kir.Ci(2*k.n)), kir.Add(s, kir.Ci(back))), kir.Ci(k.n))
}

// page is the page of tile i of chunk kk of the chunked tensor.
func (k *cclKernels) page(kk, i kir.Expr) kir.Expr {
	c := k.chunks
	if c.Count == 1 {
		return i
	}
	if c.Run == c.Tiles {
		return kir.Add(kir.Mul(kk, kir.Ci(c.Run)), i)
	}
	return kir.Add(kir.Add(kir.Mul(kir.Div(i, kir.Ci(c.Run)), kir.Ci(c.Stride)), kir.Mul(kk, kir.Ci(c.Run))), kir.Mod(i, kir.Ci(c.Run)))
}

func (k *cclKernels) dram(base, page kir.Expr) kir.Expr {
	return kir.InterleavedPageAddr(base, page, k.stride)
}

// cclNoCArgs declares NoC coordinate runtime args name_x, name_y.
func cclNoCArgs(kn *kir.Kernel, name string) (x, y kir.ArgRef) {
	return kn.RuntimeArg(name + "_x"), kn.RuntimeArg(name + "_y")
}

// ethKernel adds the ring's sender (on the East cores, a reader) or
// receiver (on the West cores, a writer) of the lanes of direction dir
// (multicore.Ring.DirLanes), on ERISC dir: its ethernet calls use
// handshake channel dir (kir.EthChannel), TX queue dir (kir.EthTXQ) and
// NoC dir (kir.EthNoC), so the two ERISCs of a core share no word, queue
// or NoC. A sender gets the plan's CCL_* defines with packet
// tiles pk and steps "reduce+gather".
func (k *cclKernels) ethKernel(sender bool, dir, pk int, steps string) *kir.Kernel {
	proc, name := kir.RISCV0, ""
	if dir == 1 {
		proc, name = kir.RISCV1, "_back"
	}
	var cores []kir.Core
	for _, l := range k.ring.DirLanes(dir) {
		if sender {
			cores = append(cores, k.ring.East[l])
		} else {
			cores = append(cores, k.ring.West[l])
		}
	}
	if !sender {
		return k.p.AddKernel(&kir.Kernel{Name: "eth_receiver" + name, Role: kir.RoleWriter, Processor: proc, NoC: kir.EthNoC(proc), TXQ: kir.EthTXQ(proc), Cores: cclRanges(cores)})
	}
	pl := k.plan
	es := k.p.AddKernel(&kir.Kernel{Name: "eth_sender" + name, Role: kir.RoleReader, Processor: proc, NoC: kir.EthNoC(proc), TXQ: kir.EthTXQ(proc), Cores: cclRanges(cores)})
	es.Define("CCL_DEVICES", strconv.Itoa(k.n))
	es.Define("CCL_LINKS", strconv.Itoa(pl.Links))
	es.Define("CCL_WORKERS_PER_LINK", strconv.Itoa(pl.WorkersPerLink))
	es.Define("CCL_PACKET_TILES", strconv.Itoa(pk))
	es.Define("CCL_STEPS", steps)
	es.Define("CCL_WIRE_BYTES_PER_TILE", strconv.Itoa(pl.WireBytes))
	if pl.Streaming() {
		es.Define("CCL_STAGING_SLOTS", strconv.Itoa(pl.Slots))
	}
	if pl.Bidirectional {
		es.Define("CCL_BOTH_WAYS", "1")
	}
	return es
}

// cclKernel is a ring kernel under construction (the sender, an adder's
// reader or writer): its builder, the args it declared and its
// semaphore's address (ready, arrived or fwd_free).
type cclKernel struct {
	*cclKernels
	b                                    *kir.Builder
	staging, fwd0, fwd1, dev, xa, oa, ra kir.ArgRef
	first, count, lane                   kir.ArgRef
	rx, ry, sx, sy                       kir.ArgRef // the receiver's and the sender's NoC coordinates
	out                                  kir.ArgRef // the sender's own slots (Ring.OutStaging)
	adders                               multicore.Peers
	sem                                  kir.Var
	proc                                 kir.Processor // the kernel's ERISC
}

// sender adds the senders of direction dir's lanes.
func (k *cclKernels) sender(dir int) {
	pl, r := k.plan, k.ring
	es := k.ethKernel(true, dir, pl.PacketTiles, fmt.Sprintf("%d+%d", pl.ReduceSteps, pl.GatherSteps))
	es.Define("CCL_EST_CYCLES", strconv.Itoa(pl.Cost))
	s := &cclKernel{cclKernels: k, proc: es.Processor}
	s.staging = es.CompileArg("staging_addr", uint32(r.Staging))
	if r.Both {
		s.out = es.CompileArg("out_staging_addr", uint32(r.OutStaging))
	} else {
		s.out = s.staging
	}
	s.fwd0 = es.CompileArg("fwd0_addr", uint32(r.Fwd0))
	s.fwd1 = es.CompileArg("fwd1_addr", uint32(r.Fwd1))
	s.dev = es.CommonArg("device_id", kir.DeviceID())
	s.xa = es.CommonArg("x_addr", kir.BufferAddr(k.xName, 0))
	s.oa = es.CommonArg("out_addr", kir.BufferAddr(k.outName, 0))
	s.first, s.count = es.RuntimeArg("first_tile"), es.RuntimeArg("num_tiles")
	if pl.ReduceSteps > 0 {
		s.adders = r.DeclarePeers(es, "adder")
	}
	s.b = es.Builder()
	s.sem = s.b.Let("ready_sem", kir.GetEthSemaphore{ID: kir.C(cclSemEth)})
	switch {
	case pl.Streaming():
		s.streamStep()
	case pl.ReduceSteps > 0:
		s.reduceSteps()
	}
	if pl.GatherSteps > 0 {
		s.gatherSteps()
		k.notifyDone(es, s.b)
	}
	for _, l := range r.DirLanes(dir) {
		vals := r.LinkValues(l, -1)
		if pl.ReduceSteps > 0 {
			vals = append(vals, r.PeerValues(l)...)
		}
		es.SetRuntimeArgs(r.East[l], vals...)
	}
}

// readTiles reads tile first+base+t of chunk kk of buffer a (or the
// chunk-local page when kk is nil) into the staging area.
func (s *cclKernel) readTiles(a kir.ArgRef, kk kir.Expr, base, cnt kir.Var) {
	b := s.b
	b.For("t", kir.C(0), cnt, func(t kir.Var) {
		i := kir.Add(kir.Add(s.first, base), t)
		pg := kir.Expr(i)
		if kk != nil {
			pg = s.page(kk, i)
		}
		b.NoCAsyncRead(s.dram(a, pg), kir.Add(s.staging, kir.Mul(t, kir.Ci(s.tb))), kir.Ci(s.tb))
	})
	b.NoCAsyncReadBarrier()
}

// readPacket issues the reads of tile first+base+t (t < cnt) of chunk kk
// of buffer a into dst at tile stride, without a barrier.
func (s *cclKernel) readPacket(a kir.ArgRef, kk kir.Expr, base, cnt kir.Var, dst kir.Expr) {
	b := s.b
	b.For("t", kir.C(0), cnt, func(t kir.Var) {
		pg := s.page(kk, kir.Add(kir.Add(s.first, base), t))
		b.NoCAsyncRead(s.dram(a, pg), kir.Add(dst, kir.Mul(t, kir.Ci(s.tb))), kir.Ci(s.tb))
	})
}

// streamStep emits a streaming sender's one reduce step (Slots = 2): x's
// packet 0 read into slot 0, then per packet k its transmit commands
// from slot k % 2 into the receiver's slot k % 2, the reads of packet
// k+1 into the other slot while it travels, the receiver's release and
// the reads' barrier.
func (s *cclKernel) streamStep() {
	b, pl, r := s.b, s.plan, s.ring
	b.Comment("Streaming reduce step: packet k+1 is read into the other staging slot while packet k travels.")
	kk := b.Let("chunk", s.chunkIndex(s.dev, kir.C(0), 1))
	pk := kir.Ci(pl.PacketTiles)
	np := b.Let("num_packets", kir.Div(kir.Add(s.count, kir.Ci(pl.PacketTiles-1)), pk))
	cntOf := func(base kir.Expr) kir.Var {
		cnt := b.LetT("cnt", kir.U32T, kir.Sub(s.count, base))
		b.If(kir.Gt(cnt, pk), func() { b.Assign(cnt, pk) })
		return cnt
	}
	b.If(kir.Gt(np, kir.C(0)), func() {
		s.readPacket(s.xa, kk, b.Let("base0", kir.C(0)), cntOf(kir.C(0)), s.out)
		b.NoCAsyncReadBarrier()
	})
	if s.pipelined() {
		s.streamInFlight(kk, np, cntOf)
		return
	}
	b.For("pk", kir.C(0), np, func(i kir.Var) {
		base := b.Let("base", kir.Mul(i, pk))
		cnt := cntOf(base)
		slot := b.Let("slot", s.outSlot(i))
		dst := kir.Expr(slot)
		if r.Both {
			dst = b.Let("peer_slot", r.SlotAddr(s.staging, i))
		}
		r.Put(b, slot, false, false, cnt, dst)
		next := b.Let("next", kir.Add(i, kir.C(1)))
		b.If(kir.Lt(next, np), func() {
			nb := b.Let("next_base", kir.Add(base, pk))
			s.readPacket(s.xa, kk, nb, cntOf(nb), s.outSlot(next))
		})
		b.EthWaitForReceiverDone()
		b.NoCAsyncReadBarrier()
	})
}

// pipelined reports whether a streaming ring keeps several packets in
// flight on each lane (streamInFlight): both ways (its receivers hold
// more slots than the packets in flight) with whole tiles on the wire.
func (k *cclKernels) pipelined() bool {
	r := k.ring
	return r.Both && r.InFlight >= 2 && r.Slots > r.InFlight && r.WireTile(false, false) == r.TileBytes
}

// streamInFlight is streamStep's loop with InFlight (N) packets in flight:
// packet k goes on handshake channel PacketChannel(k) once packet k-N's
// release on that channel is in (which also frees the receiver's slot of
// packet k, HandOffStreamOnChannel), without waiting for the packets
// between. The reads of packet k+1 go into packet k-1's slot, whose
// payload has left: its handshake word
// (eth_send_payload_complete_signal_over_channel) is one transmit command,
// which waits for the TX queue until the payload before it is out. They
// are issued between packet k's payload and its word, so they overlap the
// payload. So the link carries the next packets while a packet's
// handshake makes its round trip (its release queues on the receiver's TX
// queue behind the other direction's payloads: one packet in flight more
// than two covers that wait). At the end the sender waits for every
// channel's release.
func (s *cclKernel) streamInFlight(kk kir.Expr, np kir.Var, cntOf func(kir.Expr) kir.Var) {
	b, pl, r := s.b, s.plan, s.ring
	pk := kir.Ci(pl.PacketTiles)
	base0, n := kir.EthChannel(s.proc), r.InFlight
	b.Comment(fmt.Sprintf("%d packets in flight: packet k on its own handshake channel once packet k-%d's is released; packet k+1 read into packet k-1's slot while packet k travels.", n, n))
	b.For("pk", kir.C(0), np, func(i kir.Var) {
		base := b.Let("base", kir.Mul(i, pk))
		cnt := cntOf(base)
		ch := b.Let("ch", multicore.PacketChannel(base0, n, i))
		b.If(kir.Ge(i, kir.Ci(n)), func() { b.EthWaitForReceiverChannelDone(ch) })
		r.PutPayload(b, s.outSlot(i), cnt, b.Let("peer_slot", r.SlotAddr(s.staging, i)))
		next := b.Let("next", kir.Add(i, kir.C(1)))
		b.If(kir.Lt(next, np), func() {
			nb := b.Let("next_base", kir.Add(base, pk))
			s.readPacket(s.xa, kk, nb, cntOf(nb), s.outSlot(next))
		})
		r.SignalOnChannel(b, cnt, ch)
		b.NoCAsyncReadBarrier()
	})
	for j := 0; j < n; j++ {
		b.EthWaitForReceiverChannelDone(kir.Ci(base0 + 2*j))
	}
}

// outSlot is the streaming sender's slot of packet pk: the receiver's
// layout one way (the packet travels to the same address), its own two
// slots both ways (Ring.OutSlotAddr).
func (s *cclKernel) outSlot(pk kir.Expr) kir.Expr {
	if s.ring.Both {
		return s.ring.OutSlotAddr(s.out, pk)
	}
	return s.ring.SlotAddr(s.out, pk)
}

// reduceSteps emits the sender's reduce steps: x's chunk at step 0 (read
// from DRAM, or packed into staging by the adders when compact), then
// the partial sum the adders left in a forwarding slot.
func (s *cclKernel) reduceSteps() {
	b, pl, r, m := s.b, s.plan, s.ring, s.plan.WorkersPerLink
	b.Comment("Reduce steps: send x's chunk at step 0, then the partial sum the adders left in a forwarding slot.")
	b.For("s", kir.C(0), kir.Ci(pl.ReduceSteps), func(st kir.Var) {
		kk := b.Let("chunk", s.chunkIndex(s.dev, st, 1))
		b.If(kir.Gt(st, kir.C(0)), func() { b.EthNoCSemaphoreWaitMin(s.sem, kir.Mul(st, kir.Ci(m))) })
		r.Packets(b, s.count, func(base, cnt kir.Var) {
			b.IfElse(kir.Eq(st, kir.C(0)), func() {
				if s.compact {
					b.Comment("The adders packed this packet's segments into staging: one send.")
					b.EthNoCSemaphoreWaitMin(s.sem, kir.Mul(kir.Add(kir.Div(base, kir.Ci(pl.PacketTiles)), kir.C(1)), kir.Ci(m)))
					at := b.Let("packed", kir.Add(s.staging, kir.Mul(base, kir.Ci(pl.WireBytes))))
					b.EthSendBytes(at, at, kir.Mul(cnt, kir.Ci(pl.WireBytes)))
					b.EthWaitForReceiverDone()
					return
				}
				s.readTiles(s.xa, kk, base, cnt)
				r.Send(b, s.staging, false, false, cnt, s.staging)
			}, func() {
				src := b.Let("src", kir.Add(multicore.FwdSlot(s.fwd0, s.fwd1, kir.Sub(st, kir.C(1))), kir.Mul(base, kir.Ci(pl.WireBytes))))
				r.Send(b, src, true, false, cnt, s.staging)
			})
		})
		b.If(kir.Gt(st, kir.C(0)), func() { s.adders.Inc(b, cclSemFwdFree) })
	})
}

// gatherSteps emits the sender's gather steps: this card's result chunk
// at step 0 (an all-reduce's from the forwarding slot its adders filled
// last, else x's slice, which is also copied to the output), then the
// chunk received in the step before, read back from the output.
func (s *cclKernel) gatherSteps() {
	b, pl, r, m := s.b, s.plan, s.ring, s.plan.WorkersPerLink
	b.Comment("Gather steps: send this card's result chunk at step 0, then the chunk received in the step before.")
	waited := 0
	if s.kind == cclAllReduce {
		final := s.fwd0
		if (pl.ReduceSteps-1)%2 == 1 {
			final = s.fwd1
		}
		b.EthNoCSemaphoreWaitMin(s.sem, kir.Ci(m*pl.ReduceSteps))
		r.Packets(b, s.count, func(base, cnt kir.Var) {
			src := b.Let("src", kir.Add(final, kir.Mul(base, kir.Ci(pl.WireBytes))))
			r.Send(b, src, true, true, cnt, s.staging)
		})
		waited = m * pl.ReduceSteps
	} else {
		r.Packets(b, s.count, func(base, cnt kir.Var) {
			s.readTiles(s.xa, nil, base, cnt)
			b.Comment("This card's own slice of the output.")
			b.For("t", kir.C(0), cnt, func(t kir.Var) {
				i := kir.Add(kir.Add(s.first, base), t)
				b.NoCAsyncWrite(kir.Add(s.staging, kir.Mul(t, kir.Ci(s.tb))), s.dram(s.oa, s.page(s.dev, i)), kir.Ci(s.tb))
			})
			b.NoCAsyncWriteBarrier()
			r.Send(b, s.staging, false, false, cnt, s.staging)
		})
	}
	b.For("s", kir.C(1), kir.Ci(pl.GatherSteps), func(st kir.Var) {
		kk := b.Let("chunk", s.chunkIndex(s.dev, st, 0))
		b.EthNoCSemaphoreWaitMin(s.sem, kir.Add(st, kir.Ci(waited)))
		r.Packets(b, s.count, func(base, cnt kir.Var) {
			s.readTiles(s.oa, kk, base, cnt)
			r.Send(b, s.staging, false, false, cnt, s.staging)
		})
	})
}

// receiver adds the receivers of direction dir's lanes.
func (k *cclKernels) receiver(dir int) {
	pl, r := k.plan, k.ring
	er := k.ethKernel(false, dir, 0, "")
	staging := er.CompileArg("staging_addr", uint32(r.Staging))
	dev := er.CommonArg("device_id", kir.DeviceID())
	oa := er.CommonArg("out_addr", kir.BufferAddr(k.outName, 0))
	first, count := er.RuntimeArg("first_tile"), er.RuntimeArg("num_tiles")
	var adders multicore.Peers
	if pl.ReduceSteps > 0 {
		adders = r.DeclarePeers(er, "adder")
	}
	var sx, sy kir.ArgRef
	if pl.GatherSteps > 1 {
		sx, sy = cclNoCArgs(er, "sender")
	}
	b := er.Builder()
	free := b.Let("free_sem", kir.GetEthSemaphore{ID: kir.C(cclSemEth)})
	wait := func(cnt kir.Var, perTile kir.Expr) { b.EthWaitForBytes(kir.Mul(cnt, perTile)) }
	if pl.Streaming() {
		if k.pipelined() {
			b.Comment(fmt.Sprintf("Streaming reduce step: hand packet k to the adders and release it once they are done with packet k-%d, whose slot packet k+%d fills.", r.Slots-r.InFlight, r.InFlight))
		} else {
			b.Comment("Streaming reduce step: hand packet k to the adders and release it once they are done with packet k-1, whose slot packet k+1 fills.")
		}
		r.Packets(b, count, func(base, cnt kir.Var) {
			if k.pipelined() {
				pk := b.Let("pk", kir.Div(base, kir.Ci(pl.PacketTiles)))
				ch := b.Let("ch", multicore.PacketChannel(kir.EthChannel(er.Processor), r.InFlight, pk))
				b.EthWaitForBytesOnChannel(kir.Mul(cnt, kir.Ci(r.WireTile(false, false))), ch)
				r.HandOffStreamOnChannel(b, free, adders, pk, ch)
				return
			}
			wait(cnt, kir.Ci(r.WireTile(false, false)))
			r.HandOffStream(b, free, adders, kir.Div(base, kir.Ci(pl.PacketTiles)))
		})
	} else if pl.ReduceSteps > 0 {
		b.Comment("Reduce steps: hand every packet to the adders and wait until all have read it.")
		// Step 0 sends x's tiles (packed when compact), later steps the
		// forwarded partial sums segment by segment (sender, Send).
		first, later := r.WireTile(k.compact, k.compact), r.WireTile(true, false)
		b.For("s", kir.C(0), kir.Ci(pl.ReduceSteps), func(s kir.Var) {
			r.Packets(b, count, func(_, cnt kir.Var) {
				perTile := kir.Ci(first)
				if pl.ReduceSteps > 1 && first != later {
					perTile = kir.Add(kir.Ci(later), kir.Mul(kir.Eq(s, kir.C(0)), kir.Ci(first-later)))
				}
				wait(cnt, perTile)
				r.HandOff(b, free, adders, true)
			})
		})
	}
	if pl.GatherSteps > 0 {
		b.Comment("Gather steps: store every packet in the output, then tell the sender the chunk is there.")
		b.For("s", kir.C(0), kir.Ci(pl.GatherSteps), func(s kir.Var) {
			kk := b.Let("chunk", k.chunkIndex(dev, s, 1))
			// store waits for a packet sent with Send's layouts and stores
			// only its segments, so no stale staging L1 (or padding rows
			// sent along) lands in the output's padding rows.
			store := func(base, cnt kir.Var, packed bool) {
				wait(cnt, kir.Ci(r.WireTile(packed, packed)))
				b.For("t", kir.C(0), cnt, func(t kir.Var) {
					i := kir.Add(kir.Add(first, base), t)
					r.EachSegment(func(sg multicore.Span, coff int) {
						at := r.TileAddr(staging, t, sg.Off)
						if packed {
							at = r.PackedAddr(staging, t, coff)
						}
						b.NoCAsyncWrite(at, kir.Add(k.dram(oa, k.page(kk, i)), kir.Ci(sg.Off)), kir.Ci(sg.Size))
					})
				})
				b.NoCAsyncWriteBarrier()
				b.EthReceiverDone()
			}
			r.Packets(b, count, func(base, cnt kir.Var) {
				switch {
				case k.kind != cclAllReduce:
					store(base, cnt, false)
				case pl.GatherSteps == 1:
					store(base, cnt, true)
				default:
					// An all-reduce sends its own sum packed at step 0 and
					// forwards the received chunks from DRAM after.
					b.IfElse(kir.Eq(s, kir.C(0)), func() { store(base, cnt, true) }, func() { store(base, cnt, false) })
				}
			})
			if pl.GatherSteps > 1 {
				b.If(kir.Lt(s, kir.Ci(pl.GatherSteps-1)), func() { r.Signal(b, sx, sy) })
			}
		})
		k.notifyDone(er, b)
	}
	for _, l := range r.DirLanes(dir) {
		c := r.West[l]
		vals := r.LinkValues(l, -1)
		if pl.ReduceSteps > 0 {
			vals = append(vals, r.PeerValues(l)...)
		}
		if pl.GatherSteps > 1 {
			vals = append(vals, multicore.XY(r.East[l])...)
		}
		er.SetRuntimeArgs(c, vals...)
	}
}
