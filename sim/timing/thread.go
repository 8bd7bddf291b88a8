package timing

import (
	"fmt"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/sim/interp"
)

// thread is one kernel on one core: the core's thread (statements,
// variables, clock) plus what the model tracks of it.
type thread struct {
	interp.Thread[*thread]
	id      int
	m       *machine
	core    *core
	k       *kir.Kernel
	done    bool
	blocked bool
	// readDone and writeDone are the completion times of the NoC reads and
	// writes issued since the last barrier; writeSent is when those writes
	// have departed this core (their last flit accepted at the destination
	// ports, before the flight and the acknowledgement that writeDone
	// includes): what noc_async_writes_flushed waits for.
	readDone, writeDone, writeSent float64
	// ethSignalled: the pending eth_wait_for_receiver_done has sent its word.
	ethSignalled bool
	waitingFor   string
	// waits accumulates the cycles the thread stalled, by what it waited
	// on; waited is their sum.
	waits  map[string]float64
	waited float64
	// busy[pc] accumulates the cycles spent executing instruction pc
	// (stalls excluded), labels[pc] names it (compileKernel).
	busy   []float64
	labels []string
	// bytesRead and bytesWritten count NoC traffic (multicast once per
	// destination); dramRead and dramWritten the part that is DRAM.
	bytesRead, bytesWritten, dramRead, dramWritten int64
	ethSent                                        int64
	// compute configuration
	mathPasses float64
	fp32       bool
	// phaseRelease is when the phase barrier the thread waited at
	// released it (cycles).
	phaseRelease float64
}

func newThread(m *machine, r kir.Resolver, cs *core, k *kir.Kernel, code *interp.Code[*thread], labels []string) (*thread, error) {
	args, err := interp.ResolveArgs(k, cs.C, r)
	if err != nil {
		return nil, fmt.Errorf("program %q: kernel %s on %s: %v", m.prog.Name, k.Name, cs.C, err)
	}
	th := &thread{id: len(m.threads), m: m, core: cs, k: k, waits: map[string]float64{}, labels: labels, busy: make([]float64, len(code.Instrs))}
	th.Start(code, &cs.Core, args, th)
	th.fp32 = k.Compute.FP32DestAccEn
	th.mathPasses = float64(max(int(k.Compute.MathFidelity), 1))
	return th, nil
}

// advance spends c busy cycles.
func (th *thread) advance(c float64) { th.Clock += c }

// waitUntil moves the clock to at least t, booking the stall under why.
func (th *thread) waitUntil(t float64, why string) {
	if t > th.Clock {
		th.waits[why] += t - th.Clock
		th.waited += t - th.Clock
		th.Clock = t
	}
}

// block puts the thread to sleep on list and returns true (an op's wait).
func (th *thread) block(list *[]*thread, why string) bool {
	th.blocked = true
	th.waitingFor = why
	*list = append(*list, th)
	return true
}

// move moves n page times from the front of from to the end of to,
// stamped with the clock: pages pushed (free to filled) or popped.
func (th *thread) move(from, to *[]float64, n int) {
	*from = (*from)[n:]
	for i := 0; i < n; i++ {
		*to = append(*to, th.Clock)
	}
}

// ---- NoC ----

// endpoint is what a NoC address names on the thread's device.
type endpoint struct {
	bank int // DRAM bank, or -1
	core *core
	x, y int
}

func (th *thread) endpoint(a uint64) (endpoint, bool) {
	d := interp.DecodeNoC(a)
	x, y := d.X1, d.Y1
	if b, ok := th.m.t.DRAMBankAt(x, y); ok {
		return endpoint{bank: b, x: x, y: y}, true
	}
	if cs := th.m.coreAt(th.core.dev, x, y); cs != nil {
		return endpoint{bank: -1, core: cs, x: x, y: y}, true
	}
	th.m.failf(th, "NoC address %#x names no DRAM bank or core (NoC %d,%d)", a, x, y)
	return endpoint{}, false
}

func (th *thread) hops(x, y int) int { return abs(x-th.core.NX) + abs(y-th.core.NY) }

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

func (th *thread) nocRead(src, dst, size uint64) { th.nocTransfer(src, dst, size, false) }

func (th *thread) nocWrite(src, dst, size uint64) { th.nocTransfer(dst, src, size, true) }

// nocTransfer issues one NoC read from (or write to) the remote address
// into (or from) L1 address local: the issue cost, then completion after
// the measured round trip for its size and distance and no earlier than
// the remote end (DRAM bank, or the remote core's port) and this core's
// port allow. The known words it carries (Options.Contents) land then.
func (th *thread) nocTransfer(remote, local, size uint64, write bool) {
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
	case e.bank >= 0 && write:
		fin = th.core.dev.banks[e.bank].data.serve(th.Clock, n)
	case e.bank >= 0:
		fin = th.core.dev.banks[e.bank].read(p, th.Clock, n, th.k.NoC)
	case write:
		fin = e.core.in.serve(th.Clock, n)
	default:
		fin = e.core.out.serve(th.Clock, n)
	}
	own := th.core.in
	if write {
		own = th.core.out
	}
	fin = max(fin, own.serve(th.Clock, n))
	if write {
		th.writeSent = max(th.writeSent, fin)
	}
	done := max(th.Clock+lat, fin+lat0)
	addr := interp.DecodeNoC(remote).Addr
	switch {
	case write:
		th.land(e.core, addr, size, dataWords(th.core, local, size), done)
	case e.bank >= 0:
		th.land(th.core, local, size, th.m.knownWords(e.bank, addr, size), done)
	default:
		th.land(th.core, local, size, dataWords(e.core, addr, size), done)
	}
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
// address, the sender only when loopback (the _loopback_src calls).
func (th *thread) rect(a uint64, loopback bool) []*core {
	d := interp.DecodeNoC(a)
	x0, y0, x1, y1 := d.X0, d.Y0, d.X1, d.Y1
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
			if cs := th.m.coreAt(th.core.dev, x, y); cs != nil && (cs != th.core || loopback) {
				out = append(out, cs)
			}
		}
	}
	return out
}

// nocMulticast issues a multicast write of size bytes from L1 src to the
// rectangle of dst (the sender included when loopback): the sender's port
// sends the bytes once, every destination's port takes them.
func (th *thread) nocMulticast(src, dst, size uint64, loopback bool) {
	p := th.m.p
	n := float64(size)
	th.advance(p.NoCIssueCycles)
	fin := th.core.out.serve(th.Clock, n)
	done := th.Clock
	ws := dataWords(th.core, src, size)
	addr := interp.DecodeNoC(dst).Addr
	for _, cs := range th.rect(dst, loopback) {
		hops := th.hops(cs.NX, cs.NY)
		f := max(fin, cs.in.serve(th.Clock, n))
		at := max(th.Clock+p.latency(p.L1WriteLatency, n, hops), f+p.latency(p.L1WriteLatency, 0, hops))
		done = max(done, at)
		th.writeSent = max(th.writeSent, f)
		th.land(cs, addr, size, ws, at)
		th.bytesWritten += int64(size)
	}
	th.writeDone = max(th.writeDone, done)
	th.writeSent = max(th.writeSent, fin)
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
	addr := interp.DecodeNoC(a).Addr
	arrive := th.Clock + th.m.p.NoCIssueCycles + th.m.p.latency(th.m.p.L1WriteLatency, 4, th.hops(e.x, e.y))
	if e.core == th.core {
		arrive = th.Clock
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

// ethWord is the key of the bytes_sent word of this kernel's handshake
// channel (kir.EthChannel: the channel of its ERISC) on an ethernet core.
func (th *thread) ethWord() uint32 { return ethWordKey + uint32(kir.EthChannel(th.k.Processor)) }

func (th *thread) peer() (*core, bool) {
	if !th.core.Eth {
		th.m.failf(th, "ethernet call on a worker core")
		return nil, false
	}
	end := ethEnd{th.core.dev.idx, th.core.C.X}
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
		return max(th.core.linkArrival, th.Clock)
	}
	cmd := p.EthCommandCycles + per/p.EthBytesPerCycle
	fin := th.core.link.serve(th.Clock, float64(cmds)*cmd*p.EthBytesPerCycle)
	th.waitUntil(fin-cmd, why)
	th.core.linkArrival = max(th.core.linkArrival, fin+p.EthLatencyCycles)
	return th.core.linkArrival
}
