package timing

import (
	"container/heap"
	"fmt"
	"math"
	"sort"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/sim/interp"
)

// server is a shared resource with a bandwidth (a NoC port, a DRAM bank,
// an ethernet link). Its capacity is accounted in time buckets, so requests
// simulated slightly out of time order still share it correctly: a request
// of n bytes arriving at t takes the capacity left in t's bucket and the
// following ones, and finishes no earlier than t + n/rate.
type server struct {
	rate float64 // bytes per cycle
	used []float64
}

const bucketCycles = 128

func newServer(rate float64) *server { return &server{rate: rate} }

// serve books n bytes from time t and returns the time the last byte is through.
func (s *server) serve(t, n float64) float64 {
	if n <= 0 {
		return t
	}
	capacity := s.rate * bucketCycles
	b := int(t / bucketCycles)
	left := n
	for {
		for b >= len(s.used) {
			s.used = append(s.used, 0)
		}
		free := capacity - s.used[b]
		if free > 0 {
			take := min(free, left)
			s.used[b] += take
			left -= take
			if left <= 0 {
				end := float64(b)*bucketCycles + bucketCycles*s.used[b]/capacity
				return max(end, t+n/s.rate)
			}
		}
		b++
	}
}

// dramBank is one DRAM bank (channel) endpoint of a device. A read of s
// bytes needs d = s / (DRAMEfficiency x DRAMBankBytesPerCycle) cycles of
// the bank's data path and, on the NoC that issued it, r =
// DRAMRequestCycles of the bank's request acceptance; the two overlap imperfectly, and the read occupies
// the bank for (d^p + (u r)^p)^(1/p) cycles (p = DRAMOverlapExponent),
// where u is the share of the bank's reads within dramShareCycles either
// side of it that came on the same NoC: a stream from one NoC pays the
// full request time, one split evenly over both NoCs half of it. Small
// reads from one NoC are request-bound (one 576-byte bfp4_b tile per
// request: ~62% of the data rate), large ones data-bound (16 KB: the data
// rate). Writes occupy the data path only, at its full rate.
type dramBank struct {
	data *server
	// reads[noc][b] counts the reads on noc in time bucket b
	// (dramShareBucket cycles).
	reads [2][]float64
}

// The NoC share's window: wide against the threads' scheduling slack, so
// that reads simulated slightly out of time order still see each other.
const (
	dramShareBucket = 256
	dramShareCycles = 2048
)

// read books a read of n bytes issued at t on NoC noc and returns the time
// its last byte leaves the bank.
func (b *dramBank) read(p *Params, t, n float64, noc int) float64 {
	noc &= 1
	at := int(t / dramShareBucket)
	for len(b.reads[noc]) <= at {
		b.reads[0], b.reads[1] = append(b.reads[0], 0), append(b.reads[1], 0)
	}
	b.reads[noc][at]++
	var mine, all float64
	for i := max(0, at-dramShareCycles/dramShareBucket); i <= at+dramShareCycles/dramShareBucket && i < len(b.reads[0]); i++ {
		mine += b.reads[noc][i]
		all += b.reads[0][i] + b.reads[1][i]
	}
	u := mine / all
	d := n / (p.DRAMBankBytesPerCycle * p.DRAMEfficiency)
	e := p.DRAMOverlapExponent
	occupy := math.Pow(math.Pow(d, e)+math.Pow(u*p.DRAMRequestCycles, e), 1/e)
	return b.data.serve(t, occupy*p.DRAMBankBytesPerCycle)
}

// word is one 32-bit L1 word that kernels synchronise on (semaphores,
// flags, the ethernet bytes_sent word): its value, the time of the write
// that set it, and the threads blocked on it.
type word struct {
	v       uint32
	t       float64
	waiters []*thread
}

// cbq is the timing of one CB on one core (whose books the interpreter
// core keeps): the times at which each filled page became visible (avail,
// front first) and at which each free page was freed (free, front first),
// the threads waiting for either, and the names of those waits.
type cbq struct {
	avail, free   []float64
	cons, prod    []*thread
	reserve, wait string
	// producer and consumer are the threads that pushed and waited.
	producer, consumer *thread
}

// core is one worker or ethernet core of one device: the interpreter's
// view plus the timing of its CBs (q, by index), its L1 words and its NoC
// ports.
type core struct {
	interp.Core
	dev     *device
	q       []*cbq
	mem     map[uint32]*word
	in, out *server
	link    *server // ethernet: the outgoing link
	// data holds the addresses of the L1 words whose values came from a
	// buffer of known contents (Options.Contents), directly or copied.
	data map[uint32]bool
	// linkArrival is when the last byte sent on the link reaches the peer.
	linkArrival float64
	// phase is the books of a persistent program's phase barriers.
	phase phaseState
}

func (c *core) word(addr uint32) *word {
	w, ok := c.mem[addr]
	if !ok {
		w = &word{}
		c.mem[addr] = w
	}
	return w
}

// device is one chip of the run.
type device struct {
	idx   int
	cores map[kir.Core]*core
	banks []*dramBank
	noc   map[[2]int]*core
	// phases are a persistent program's phase spans (nil otherwise).
	phases []PhaseSpan
}

// ethEnd is an ethernet channel of a device.
type ethEnd struct{ dev, ch int }

// machine is one timed run of one program on one or more devices.
type machine struct {
	p       *Params
	t       *target.Target
	prog    *kir.Program
	devs    []*device
	peers   map[ethEnd]ethEnd
	threads []*thread
	ready   threadHeap
	bufAddr map[string]uint32
	// contents are Options.Contents; known their buffers as placed.
	contents map[string][]uint32
	known    []*knownBuf
	cfg      *interp.Config
	err      error
	steps    int64
	limit    int64
}

// Fake L1 layout of the timing model: addresses only need to be distinct
// (data is not modelled), except that semaphores and flags are words.
const (
	semBase    = 0x1000
	cbBase     = 0x20000
	cbStride   = 0x10000
	ethWordKey = 0xFFFFFFF0 // the bytes_sent word of an ethernet core's handshake channel 0 (channel c at +c)
)

func (m *machine) fail(err error) {
	if m.err == nil {
		m.err = err
	}
}

func (m *machine) failf(th *thread, format string, args ...any) {
	m.fail(fmt.Errorf("program %q: kernel %s on %s: %s", m.prog.Name, th.k.Name, th.core.C, fmt.Sprintf(format, args...)))
}

// BufferAddress implements kir.Resolver with synthetic addresses.
func (m *machine) BufferAddress(name string) (uint32, error) {
	a, ok := m.bufAddr[name]
	if !ok {
		return 0, fmt.Errorf("buffer %q is not declared by the program", name)
	}
	return a, nil
}

// WorkerNoC implements kir.Resolver for worker and ethernet cores.
func (m *machine) WorkerNoC(c kir.Core) (int, int, error) { return interp.CoreNoC(m.t, c) }

// resolver resolves DeviceID for one device.
type resolver struct {
	*machine
	dev int
}

func (r resolver) DeviceID() (int, error) { return r.dev, nil }

func (m *machine) core(d *device, c kir.Core) (*core, error) {
	if cs, ok := d.cores[c]; ok {
		return cs, nil
	}
	nx, ny, err := m.WorkerNoC(c)
	if err != nil {
		return nil, fmt.Errorf("program %q: %v", m.prog.Name, err)
	}
	cs := &core{Core: interp.Core{C: c, NX: nx, NY: ny, Eth: c.IsEth(), CBs: make([]*interp.CB, m.t.MaxCBs), SemBase: semBase}, phase: phaseState{qPhase: -1},
		dev: d, q: make([]*cbq, m.t.MaxCBs), mem: map[uint32]*word{}, data: map[uint32]bool{},
		in: newServer(m.p.NoCLinkBytesPerCycle), out: newServer(m.p.NoCLinkBytesPerCycle)}
	if cs.Eth {
		cs.link = newServer(m.p.EthBytesPerCycle)
	}
	d.cores[c] = cs
	d.noc[[2]int{nx, ny}] = cs
	return cs, nil
}

// coreAt is the core at NoC coordinates (x, y) of device d, created on
// first use (a NoC target need not run a kernel), or nil.
func (m *machine) coreAt(d *device, x, y int) *core {
	if cs, ok := d.noc[[2]int{x, y}]; ok {
		return cs
	}
	if lx, ly, ok := m.t.WorkerAt(x, y); ok {
		cs, _ := m.core(d, kir.Core{X: lx, Y: ly})
		return cs
	}
	if m.t.Eth != nil {
		for ch := 0; ch < m.t.Eth.Cores; ch++ {
			if ex, ey, err := m.t.EthNoC(ch); err == nil && ex == x && ey == y {
				cs, _ := m.core(d, kir.EthCore(ch))
				return cs
			}
		}
	}
	return nil
}

// load builds the devices, CBs, semaphores and threads.
func (m *machine) load(devices int) error {
	p := m.prog
	m.cfg = &interp.Config{Target: m.t, SemaphoreBase: semBase, EthSemaphoreBase: semBase, ScalarCycles: m.p.ScalarCycles, Straddle: true}
	if err := m.place(); err != nil {
		return err
	}
	for d := 0; d < devices; d++ {
		dev := &device{idx: d, cores: map[kir.Core]*core{}, noc: map[[2]int]*core{}}
		for b := 0; b < m.t.DRAMBanks; b++ {
			dev.banks = append(dev.banks, &dramBank{data: newServer(m.p.DRAMBankBytesPerCycle)})
		}
		m.devs = append(m.devs, dev)
		for i := range p.CBs {
			cb := &p.CBs[i]
			if cb.Pages <= 0 {
				return fmt.Errorf("program %q: CB c_%d has %d pages", p.Name, cb.Index, cb.Pages)
			}
			for _, c := range kir.CoresOf(cb.Cores) {
				cs, err := m.core(dev, c)
				if err != nil {
					return err
				}
				if _, f := cs.AddCB(cb, uint64(cbBase+cbStride*cb.Index)); f != nil {
					return fmt.Errorf("program %q: core %s: %s", p.Name, c, f.Msg)
				}
				cs.q[cb.Index] = &cbq{free: make([]float64, cb.Pages),
					reserve: fmt.Sprintf("cb_reserve_back c_%d", cb.Index), wait: fmt.Sprintf("cb_wait_front c_%d", cb.Index)}
			}
		}
		if p.Persist != nil {
			if err := m.loadPersist(dev); err != nil {
				return err
			}
		}
		for _, s := range p.Semaphores {
			for _, c := range kir.CoresOf(s.Cores) {
				cs, err := m.core(dev, c)
				if err != nil {
					return err
				}
				cs.word(uint32(cs.AddSemaphore(s.ID))).v = s.Initial
			}
		}
		for _, k := range p.Kernels {
			code, labels, err := compileKernel(m, k)
			if err != nil {
				return err
			}
			for _, c := range kir.CoresOf(k.Cores) {
				cs, err := m.core(dev, c)
				if err != nil {
					return err
				}
				th, err := newThread(m, resolver{m, d}, cs, k, code, labels)
				if err != nil {
					return err
				}
				m.threads = append(m.threads, th)
			}
		}
	}
	if p.Persist != nil {
		m.countThreads()
	}
	return nil
}

// threadHeap orders runnable threads by clock, then by creation order.
type threadHeap []*thread

func (h threadHeap) Len() int { return len(h) }
func (h threadHeap) Less(i, j int) bool {
	if h[i].Clock != h[j].Clock {
		return h[i].Clock < h[j].Clock
	}
	return h[i].id < h[j].id
}
func (h threadHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *threadHeap) Push(x any)   { *h = append(*h, x.(*thread)) }
func (h *threadHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// wake makes every thread of list runnable again (each re-runs the call it
// blocked in) and empties the list.
func (m *machine) wake(list *[]*thread) {
	for _, th := range *list {
		if th.blocked {
			th.blocked = false
			heap.Push(&m.ready, th)
		}
	}
	*list = (*list)[:0]
}

// quantum is the number of instructions a thread runs before the scheduler
// looks again; slack bounds how far (cycles) it may run ahead of the
// earliest runnable thread.
const (
	quantum = 256
	slack   = 512
)

// DefaultStepLimit bounds the instructions of one timed run.
const DefaultStepLimit = 400_000_000

// run executes every thread in time order until all finish.
func (m *machine) run() error {
	for _, th := range m.threads {
		if th.Done() {
			th.done = true
			continue
		}
		heap.Push(&m.ready, th)
	}
	for m.ready.Len() > 0 {
		th := heap.Pop(&m.ready).(*thread)
		horizon := th.Clock + slack
		if m.ready.Len() > 0 {
			horizon = m.ready[0].Clock + slack
		}
		for n := 0; n < quantum && th.Clock <= horizon; n++ {
			pc, t0, w0 := th.PC, th.Clock, th.waited
			next := th.Step()
			th.busy[pc] += (th.Clock - t0) - (th.waited - w0)
			m.steps++
			if next == interp.Failed {
				m.fail(th.fault(th.Err))
			}
			if m.err != nil {
				return m.err
			}
			if next < 0 {
				break
			}
			if th.Done() {
				th.done = true
				break
			}
		}
		if m.steps > m.limit {
			return fmt.Errorf("program %q: the timing model ran %d instructions without finishing (limit %d); an unbounded loop?", m.prog.Name, m.steps, m.limit)
		}
		if !th.done && !th.blocked {
			heap.Push(&m.ready, th)
		}
	}
	var stuck []string
	for _, th := range m.threads {
		if !th.done {
			stuck = append(stuck, fmt.Sprintf("%s on %s of device %d (%s)", th.k.Name, th.core.C, th.core.dev.idx, th.waitingFor))
		}
	}
	if len(stuck) > 0 {
		sort.Strings(stuck)
		return fmt.Errorf("program %q deadlocks in the timing model: %v", m.prog.Name, stuck)
	}
	return nil
}
