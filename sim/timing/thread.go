package timing

import (
	"fmt"

	"github.com/tcc-dev/tcc/codegen/kir"
)

// instr executes one flat instruction and returns the next pc, or -1 when
// the thread blocked (it is then on a waiter list and th.blocked is set).
type instr func(th *thread) int

// cexpr evaluates a compiled expression.
type cexpr func(th *thread) uint64

// thread is one kernel on one core: the statements it runs and its clock.
type thread struct {
	id      int
	m       *machine
	core    *core
	k       *kir.Kernel
	code    []instr
	pc      int
	vars    []uint64
	args    []uint64
	t       float64
	done    bool
	blocked bool
	// readDone and writeDone are the completion times of the NoC reads and
	// writes issued since the last barrier.
	readDone, writeDone float64
	// ethSignalled: the pending eth_wait_for_receiver_done has sent its word.
	ethSignalled bool
	waitingFor   string
	// waits accumulates the cycles the thread stalled, by what it waited
	// on; waited is their sum.
	waits  map[string]float64
	waited float64
	// busy[pc] accumulates the cycles spent executing code[pc] (stalls
	// excluded), labels[pc] names it (compiler.labels).
	busy   []float64
	labels []string
	// bytesRead and bytesWritten count NoC traffic (multicast once per
	// destination); dramRead and dramWritten the part that is DRAM.
	bytesRead, bytesWritten, dramRead, dramWritten int64
	ethSent                                        int64
	// compute configuration
	mathPasses float64
	fp32       bool
}

func newThread(m *machine, r kir.Resolver, cs *core, k *kir.Kernel, code []instr, slots int) (*thread, error) {
	th := &thread{id: len(m.threads), m: m, core: cs, k: k, code: code, vars: make([]uint64, slots), args: make([]uint64, len(k.Args)), waits: map[string]float64{}}
	rt := k.RuntimeValuesOn(cs.c)
	for i, a := range k.Args {
		v := a.Value
		if a.Kind == kir.RuntimeArg {
			if a.Index >= len(rt) {
				return nil, fmt.Errorf("program %q: kernel %s on %s: no value for runtime arg %q", m.prog.Name, k.Name, cs.c, a.Name)
			}
			v = rt[a.Index]
		}
		x, err := v.Resolve(r)
		if err != nil {
			return nil, fmt.Errorf("program %q: kernel %s on %s: arg %q: %v", m.prog.Name, k.Name, cs.c, a.Name, err)
		}
		th.args[i] = uint64(x)
	}
	th.fp32 = k.Compute.FP32DestAccEn
	th.mathPasses = float64(max(int(k.Compute.MathFidelity), 1))
	return th, nil
}

// advance spends c busy cycles.
func (th *thread) advance(c float64) { th.t += c }

// waitUntil moves the clock to at least t, booking the stall under why.
func (th *thread) waitUntil(t float64, why string) {
	if t > th.t {
		th.waits[why] += t - th.t
		th.waited += t - th.t
		th.t = t
	}
}

// block puts the thread to sleep on list.
func (th *thread) block(list *[]*thread, why string) int {
	th.blocked = true
	th.waitingFor = why
	*list = append(*list, th)
	return -1
}

func (th *thread) cb(idx int, call string) *cbq {
	q, ok := th.core.cbs[idx]
	if !ok {
		th.m.failf(th, "%s names CB c_%d, which is not configured on this core", call, idx)
		return nil
	}
	return q
}

func cbName(call string, idx int) string { return fmt.Sprintf("%s c_%d", call, idx) }

// cbAcquire is cb_reserve_back (producer side: free pages) or
// cb_wait_front (consumer side: available pages): n pages of the queue
// times must exist, else the thread sleeps on waiters; the clock moves to
// when the n-th became ready.
func (th *thread) cbAcquire(call string, idx, n int, producer bool) int {
	q := th.cb(idx, call)
	if q == nil {
		return -1
	}
	if n <= 0 || n > q.pages {
		th.m.failf(th, "%s(c_%d, %d): the count must be 1..%d", call, idx, n, q.pages)
		return -1
	}
	times, waiters := &q.avail, &q.cons
	if producer {
		times, waiters = &q.free, &q.prod
	}
	if len(*times) < n {
		return th.block(waiters, cbName(call, idx))
	}
	th.waitUntil((*times)[n-1], cbName(call, idx))
	th.advance(th.m.p.CBCycles)
	if !producer {
		q.consumer = th
	}
	return th.pc + 1
}

// cbRelease is cb_push_back (n reserved pages become available) or
// cb_pop_front (n available pages become free), stamped with the clock,
// waking the other side.
func (th *thread) cbRelease(call string, idx, n int, producer bool) int {
	q := th.cb(idx, call)
	if q == nil {
		return -1
	}
	from, to, waiters := &q.avail, &q.free, &q.prod
	if producer {
		from, to, waiters = &q.free, &q.avail, &q.cons
		q.producer = th
	}
	if n <= 0 || n > len(*from) {
		th.m.failf(th, "%s(c_%d, %d) with %d pages", call, idx, n, len(*from))
		return -1
	}
	th.advance(th.m.p.CBCycles)
	*from = (*from)[n:]
	for i := 0; i < n; i++ {
		*to = append(*to, th.t)
	}
	th.m.wake(waiters)
	return th.pc + 1
}

// ---- NoC ----

// endpoint is what a NoC address names on the thread's device.
type endpoint struct {
	bank int // DRAM bank, or -1
	core *core
	x, y int
}

func (th *thread) endpoint(a uint64) (endpoint, bool) {
	_, _, _, x, y, _ := decode(a)
	if b, ok := th.m.t.DRAMBankAt(x, y); ok {
		return endpoint{bank: b, x: x, y: y}, true
	}
	if cs := th.m.coreAt(th.core.dev, x, y); cs != nil {
		return endpoint{bank: -1, core: cs, x: x, y: y}, true
	}
	th.m.failf(th, "NoC address %#x names no DRAM bank or core (NoC %d,%d)", a, x, y)
	return endpoint{}, false
}

func (th *thread) hops(x, y int) int { return abs(x-th.core.nx) + abs(y-th.core.ny) }

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

func (th *thread) nocRead(src, size uint64) { th.nocTransfer(src, size, false) }

func (th *thread) nocWrite(dst, size uint64) { th.nocTransfer(dst, size, true) }

// nocTransfer issues one NoC read from (or write to) the remote address:
// the issue cost, then completion after the measured round trip for its
// size and distance and no earlier than the remote end (DRAM bank, or the
// remote core's port) and this core's port allow.
func (th *thread) nocTransfer(remote, size uint64, write bool) {
	p := th.m.p
	e, ok := th.endpoint(remote)
	if !ok {
		return
	}
	n := float64(size)
	th.advance(p.NoCIssueCycles)
	hops := th.hops(e.x, e.y)
	table := p.L1ReadLatency
	switch {
	case e.bank >= 0 && write:
		table = p.DRAMWriteLatency
	case e.bank >= 0:
		table = p.DRAMReadLatency
	case write:
		table = p.L1WriteLatency
	}
	lat, lat0 := p.latency(table, n, hops), p.latency(table, 0, hops)
	var fin float64
	switch {
	case e.bank >= 0:
		fin = th.core.dev.banks[e.bank].serve(th.t, n)
	case write:
		fin = e.core.in.serve(th.t, n)
	default:
		fin = e.core.out.serve(th.t, n)
	}
	own := th.core.in
	if write {
		own = th.core.out
	}
	fin = max(fin, own.serve(th.t, n))
	done := max(th.t+lat, fin+lat0)
	if write {
		th.writeDone = max(th.writeDone, done)
		th.bytesWritten += int64(size)
		if e.bank >= 0 {
			th.dramWritten += int64(size)
		}
		return
	}
	th.readDone = max(th.readDone, done)
	th.bytesRead += int64(size)
	if e.bank >= 0 {
		th.dramRead += int64(size)
	}
}

// rect lists the cores of device d in the NoC rectangle of a multicast
// address, except the sender.
func (th *thread) rect(a uint64) []*core {
	_, x0, y0, x1, y1, _ := decode(a)
	if x0 > x1 {
		x0, x1 = x1, x0
	}
	if y0 > y1 {
		y0, y1 = y1, y0
	}
	var out []*core
	for y := y0; y <= y1; y++ {
		for x := x0; x <= x1; x++ {
			if _, _, ok := th.m.t.WorkerAt(x, y); !ok {
				continue
			}
			if cs := th.m.coreAt(th.core.dev, x, y); cs != nil && cs != th.core {
				out = append(out, cs)
			}
		}
	}
	return out
}

func (th *thread) nocMulticast(dst, size uint64) {
	p := th.m.p
	n := float64(size)
	th.advance(p.NoCIssueCycles)
	fin := th.core.out.serve(th.t, n)
	done := th.t
	for _, cs := range th.rect(dst) {
		hops := th.hops(cs.nx, cs.ny)
		f := max(fin, cs.in.serve(th.t, n))
		done = max(done, th.t+p.latency(p.L1WriteLatency, n, hops), f+p.latency(p.L1WriteLatency, 0, hops))
		th.bytesWritten += int64(size)
	}
	th.writeDone = max(th.writeDone, done)
}

// remoteWord is the word at a (unicast) NoC address and when a small write
// issued now reaches it.
func (th *thread) remoteWord(a uint64) (*word, float64, bool) {
	e, ok := th.endpoint(a)
	if !ok {
		return nil, 0, false
	}
	if e.core == nil {
		th.m.failf(th, "semaphore address %#x is in DRAM", a)
		return nil, 0, false
	}
	_, _, _, _, _, addr := decode(a)
	arrive := th.t + th.m.p.NoCIssueCycles + th.m.p.latency(th.m.p.L1WriteLatency, 4, th.hops(e.x, e.y))
	if e.core == th.core {
		arrive = th.t
	}
	return e.core.word(uint32(addr)), arrive, true
}

// setWord stores v into w at time t and wakes its waiters.
func (th *thread) setWord(w *word, v uint32, t float64) {
	w.v = v
	w.t = max(w.t, t)
	th.m.wake(&w.waiters)
}

// ---- ethernet ----

func (th *thread) peer() (*core, bool) {
	if !th.core.eth {
		th.m.failf(th, "ethernet call on a worker core")
		return nil, false
	}
	end := ethEnd{th.core.dev.idx, th.core.c.X}
	pe, ok := th.m.peers[end]
	if !ok {
		th.m.failf(th, "ethernet channel %d of device %d is not cabled", end.ch, end.dev)
		return nil, false
	}
	cs, err := th.m.core(th.m.devs[pe.dev], kir.EthCore(pe.ch))
	if err != nil {
		th.m.fail(err)
		return nil, false
	}
	return cs, true
}

// ethSend issues cmds transmit commands of per bytes each on this ethernet
// core's TX queue (internal_::eth_send_packet) and returns when the last of
// them has reached the peer, no earlier than anything sent before on the
// link. The queue takes one command at a time: each holds it for
// EthCommandCycles (the queue poll, register writes and the MAC's
// per-command work) plus per / EthBytesPerCycle on the wire; the kernel
// spins until the queue has accepted its last command, and the data lands
// EthLatencyCycles after that command ends. The spin is booked under why.
func (th *thread) ethSend(cmds uint64, per float64, why string) (arrive float64) {
	p := th.m.p
	if cmds == 0 {
		return max(th.core.linkArrival, th.t)
	}
	cmd := p.EthCommandCycles + per/p.EthBytesPerCycle
	fin := th.core.link.serve(th.t, float64(cmds)*cmd*p.EthBytesPerCycle)
	th.waitUntil(fin-cmd, why)
	th.core.linkArrival = max(th.core.linkArrival, fin+p.EthLatencyCycles)
	return th.core.linkArrival
}
