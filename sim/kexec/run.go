package kexec

import (
	"fmt"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/sim/interp"
)

// DefaultStepLimit is the instruction budget of a Run when RunOptions.StepLimit is 0.
const DefaultStepLimit = 200_000_000

// DefaultQuantum is the number of instructions a kernel runs before the
// scheduler moves on (when it does not block first).
const DefaultQuantum = 64

// RunOptions controls Run.
type RunOptions struct {
	// StepLimit bounds the total instructions executed (0: DefaultStepLimit).
	StepLimit int64
	// Quantum is the scheduling quantum (0: DefaultQuantum).
	Quantum int
	// Binding maps a program buffer name to the device buffer it uses; a
	// name missing from the map binds to the device buffer of the same name.
	Binding map[string]string
}

// Stats counts what a run did.
type Stats struct {
	// Steps is the number of instructions executed.
	Steps int64
	// NoCReadBytes and NoCWriteBytes count NoC traffic (multicast counts
	// once per destination).
	NoCReadBytes, NoCWriteBytes int64
	// TileOps counts compute operations on whole tiles (unpacking ops, SFPU
	// ops and packs).
	TileOps int64
	// EthBytes counts the bytes sent over ethernet links (eth_send_bytes);
	// EthCommands the transmit commands those sends issued.
	EthBytes, EthCommands int64
}

type run struct {
	d       *Device
	p       *kir.Program
	t       *target.Target
	opt     RunOptions
	bufAddr map[string]uint32
	bufDev  map[string]*DeviceBuffer
	cores   map[kir.Core]*coreState
	kernels []*kstate
	stats   Stats
	cfg     *interp.Config
	// dev is the device index in a Cluster run (0 otherwise); mesh is the
	// cluster run, nil for Device.Run.
	dev  int
	mesh *meshRun
	// txq is, per ethernet channel and TX queue, the kernel that first
	// sent on it in this run (ethTXQ).
	txq map[[2]int]*kstate
}

// coreState is one worker or ethernet core during a run: the core's view
// (NoC coordinates, CBs, semaphores) and its memory, of which kernels may
// write [lo, hi).
type coreState struct {
	interp.Core
	mem    *memory
	lo, hi uint64
}

func (r *run) ruleErr(rule kir.Rule, kernel string, c *kir.Core, cb int, format string, args ...any) *kir.RuleError {
	var cc *kir.Core
	if c != nil {
		x := *c
		cc = &x
	}
	return &kir.RuleError{Rule: rule, Program: r.p.Name, Kernel: kernel, Core: cc, CB: cb, Msg: fmt.Sprintf(format, args...)}
}

// BufferAddress implements kir.Resolver.
func (r *run) BufferAddress(name string) (uint32, error) {
	a, ok := r.bufAddr[name]
	if !ok {
		return 0, fmt.Errorf("buffer %q is not declared by the program", name)
	}
	return a, nil
}

// WorkerNoC implements kir.Resolver; it also resolves ethernet cores.
func (r *run) WorkerNoC(c kir.Core) (int, int, error) { return interp.CoreNoC(r.t, c) }

// DeviceID implements kir.DeviceResolver: the device index in a Cluster
// run, 0 for Device.Run.
func (r *run) DeviceID() (int, error) { return r.dev, nil }

// Run executes p on the device and returns what it did. The program's
// buffers must be allocated on the device (see RunOptions.Binding). Run does
// not call kir.Validate; callers should. Errors are a *DeadlockError, a
// *StepLimitError, a *kir.RuleError for a hardware rule broken at run time,
// or an error describing why the program could not be loaded.
func (d *Device) Run(p *kir.Program, opt RunOptions) (*Stats, error) {
	if opt.StepLimit <= 0 {
		opt.StepLimit = DefaultStepLimit
	}
	if opt.Quantum <= 0 {
		opt.Quantum = DefaultQuantum
	}
	if p == nil {
		return nil, fmt.Errorf("kexec: nil program")
	}
	for i, k := range p.Kernels {
		if k == nil {
			return nil, fmt.Errorf("program %q: kernel %d is nil", p.Name, i)
		}
	}
	r := &run{d: d, p: p, t: d.T, opt: opt, bufAddr: map[string]uint32{}, bufDev: map[string]*DeviceBuffer{}, cores: map[kir.Core]*coreState{}}
	if err := r.load(); err != nil {
		return nil, err
	}
	if err := r.schedule(); err != nil {
		return &r.stats, err
	}
	return &r.stats, nil
}

func (r *run) core(c kir.Core) (*coreState, error) {
	if cs, ok := r.cores[c]; ok {
		return cs, nil
	}
	if c.IsEth() {
		nx, ny, err := r.t.EthNoC(c.X)
		if err != nil {
			return nil, fmt.Errorf("program %q: core %s: %v", r.p.Name, c, err)
		}
		lo, hi := r.ethBounds()
		cs := &coreState{Core: interp.Core{C: c, NX: nx, NY: ny, Eth: true, CBs: make([]*interp.CB, r.t.MaxCBs), SemBase: uint64(r.d.EthSemaphoreBase())},
			mem: r.d.eth(c.X).mem, lo: lo, hi: hi}
		r.cores[c] = cs
		return cs, nil
	}
	nx, ny, err := r.t.WorkerNoC(c.X, c.Y)
	if err != nil {
		return nil, fmt.Errorf("program %q: %v", r.p.Name, err)
	}
	cs := &coreState{Core: interp.Core{C: c, NX: nx, NY: ny, CBs: make([]*interp.CB, r.t.MaxCBs), SemBase: uint64(r.d.SemaphoreBase())},
		mem: r.d.coreMem(c), lo: uint64(r.d.SemaphoreBase()), hi: uint64(r.t.L1Size)}
	r.cores[c] = cs
	return cs, nil
}

func (r *run) load() error {
	p, t := r.p, r.t
	// Buffers.
	for _, b := range p.Buffers {
		name := b.Name
		if n, ok := r.opt.Binding[b.Name]; ok {
			name = n
		}
		db, ok := r.d.buffers[name]
		if !ok {
			return fmt.Errorf("program %q: buffer %q (device buffer %q) is not allocated", p.Name, b.Name, name)
		}
		if db.PageSize != b.PageSize || db.Pages < b.Pages || db.Mem.Kind != b.Mem.Kind {
			return fmt.Errorf("program %q: buffer %q expects %d pages of %d bytes in %s; device buffer %q has %d pages of %d bytes in %s",
				p.Name, b.Name, b.Pages, b.PageSize, b.Mem.Kind, name, db.Pages, db.PageSize, db.Mem.Kind)
		}
		r.bufAddr[b.Name] = db.Addr
		r.bufDev[b.Name] = db
	}
	if p.Persist != nil {
		if err := r.loadPersist(); err != nil {
			return err
		}
	}
	// CBs.
	err := r.placeCBs(p.CBs, "", func(cs *coreState, cb *kir.CB, addr uint64) *interp.Fault {
		_, f := cs.AddCB(cb, addr)
		return f
	})
	if err != nil {
		return err
	}
	// Semaphores.
	for _, s := range p.Semaphores {
		if s.ID < 0 || s.ID >= t.MaxSemaphores {
			return r.ruleErr(kir.RuleSemaphore, "", nil, kir.NoCB, "semaphore id %d is outside 0..%d", s.ID, t.MaxSemaphores-1)
		}
		for _, c := range kir.CoresOf(s.Cores) {
			cs, err := r.core(c)
			if err != nil {
				return err
			}
			cs.mem.write32(cs.AddSemaphore(s.ID), s.Initial)
		}
	}
	// Kernels.
	r.cfg = r.config()
	for _, k := range p.Kernels {
		code, err := compileKernel(r, k)
		if err != nil {
			return err
		}
		for _, c := range kir.CoresOf(k.Cores) {
			cs, err := r.core(c)
			if err != nil {
				return err
			}
			ks, err := newKState(r, cs, k, code)
			if err != nil {
				return err
			}
			r.kernels = append(r.kernels, ks)
		}
	}
	if p.Persist != nil {
		r.countThreads()
	}
	// Row-major by core, then program order (stable).
	ks := r.kernels
	for i := 1; i < len(ks); i++ {
		for j := i; j > 0 && ks[j].core.C.Less(ks[j-1].core.C); j-- {
			ks[j], ks[j-1] = ks[j-1], ks[j]
		}
	}
	return nil
}

// schedule runs the kernels round-robin until all finish, a kernel fails,
// everything is blocked, or the step budget is spent.
func (r *run) schedule() error { return scheduleRuns([]*run{r}, r.p.Name, false) }

// scheduleRuns runs the kernels of every run (device order, then each run's
// kernel order) round-robin, a quantum each, until all finish, a kernel
// fails, every unfinished kernel on every device is blocked (DeadlockError)
// or the steps of all runs together pass the first run's step limit. In a
// mesh run errors name the device.
func scheduleRuns(runs []*run, program string, mesh bool) error {
	limit, quantum := runs[0].opt.StepLimit, runs[0].opt.Quantum
	var steps int64
	devices := 0
	if mesh {
		devices = len(runs)
	}
	for {
		progress, unfinished := false, 0
		for _, r := range runs {
			for _, ks := range r.kernels {
				if ks.done {
					continue
				}
				n, err := ks.runQuantum(quantum)
				r.stats.Steps += int64(n)
				steps += int64(n)
				if err != nil {
					if mesh {
						return fmt.Errorf("device %d: %w", r.dev, err)
					}
					return err
				}
				if n > 0 {
					progress = true
				}
				if !ks.done {
					unfinished++
				}
				if steps > limit {
					return &StepLimitError{Program: program, Limit: limit, Running: runNames(runs, false, mesh)}
				}
			}
		}
		if unfinished == 0 {
			return nil
		}
		if !progress {
			de := &DeadlockError{Program: program, Devices: devices, Finished: runNames(runs, true, mesh)}
			for _, r := range runs {
				for _, ks := range r.kernels {
					if !ks.done {
						de.Blocked = append(de.Blocked, ks.blockedOn())
					}
				}
			}
			return de
		}
	}
}

// runNames lists the kernels that are (or are not) done as "kernel@(x,y)",
// with "@device d" appended in a mesh run.
func runNames(runs []*run, done, mesh bool) []string {
	var out []string
	for _, r := range runs {
		for _, ks := range r.kernels {
			if ks.done != done {
				continue
			}
			n := fmt.Sprintf("%s@%s", ks.k.Name, ks.core.C)
			if mesh {
				n += fmt.Sprintf("@device %d", r.dev)
			}
			out = append(out, n)
		}
	}
	return out
}

// placeCBs places cbs in index order, then configuration order
// (kir.CBPlaceOrder, kir.FirstFit: the rule the runtime shares) and calls
// add for each core of each CB; phase names the phase of a persistent
// program in errors ("" otherwise).
func (r *run) placeCBs(cbs []kir.CB, phase string, add func(cs *coreState, cb *kir.CB, addr uint64) *interp.Fault) error {
	return r.placeCBsFrom(0, nil, cbs, phase, add)
}

// placeCBsFrom is placeCBs with the CBs early placed from L1 address base
// first (kir.PlaceCBs; a persistent program's kir.Phase.CBBase and
// EarlyCBs).
func (r *run) placeCBsFrom(base uint32, early []int, cbs []kir.CB, phase string, add func(cs *coreState, cb *kir.CB, addr uint64) *interp.Fault) error {
	t := r.t
	addrs := kir.PlaceCBs(cbs, uint64(t.L1UnreservedBase), early, uint64(base))
	where := ""
	if phase != "" {
		where = " in phase " + phase
	}
	indices := make([]int, len(cbs))
	for i, cb := range cbs {
		indices[i] = cb.Index
	}
	order := kir.CBPlaceOrder(indices)
	l1Top := r.d.l1A.lowest()
	for _, i := range order {
		cb := &cbs[i]
		if cb.Index < 0 || cb.Index >= t.MaxCBs || cb.PageSize <= 0 || cb.Pages <= 0 {
			return r.ruleErr(kir.RuleCBConfig, "", nil, cb.Index, "cannot place CB c_%d: index must be 0..%d and page size %d, pages %d positive", cb.Index, t.MaxCBs-1, cb.PageSize, cb.Pages)
		}
		cores := kir.CoresOf(cb.Cores)
		size := uint64(cb.Bytes())
		var addr uint64
		if cb.Backing != "" {
			db, ok := r.bufDev[cb.Backing]
			if !ok || db.Mem.Kind.IsDRAM() {
				return r.ruleErr(kir.RuleCBConfig, "", nil, cb.Index, "backing buffer %q is not an L1 buffer of the program", cb.Backing)
			}
			if uint64(db.PerCore*db.Stride) < size {
				return r.ruleErr(kir.RuleCBConfig, "", nil, cb.Index, "ring of %d bytes exceeds the %d bytes per core of backing buffer %q", size, db.PerCore*db.Stride, cb.Backing)
			}
			addr = uint64(db.Addr)
		} else {
			addr = addrs[i]
			if addr+size > l1Top {
				return r.ruleErr(kir.RuleL1Budget, "", nil, cb.Index, "CB c_%d (%d bytes) placed at %#x ends past the free L1 (CBs must end below %#x, where L1 buffers start)%s", cb.Index, size, addr, l1Top, over(where, cores, addr+size-l1Top))
			}
		}
		for _, c := range cores {
			if c.IsEth() {
				return r.ruleErr(kir.RuleGrid, "", &c, cb.Index, "CB c_%d is configured on an ethernet core; ethernet cores have no circular buffers", cb.Index)
			}
			cs, err := r.core(c)
			if err != nil {
				return err
			}
			if f := add(cs, cb, addr); f != nil {
				return r.ruleErr(f.Rule, "", &c, f.CB, "%s%s", f.Msg, where)
			}
		}
	}
	return nil
}

// over says, for a CB of a persistent program's phase (where is not
// empty), by how many bytes it ends past the free L1 and on which core.
func over(where string, cores []kir.Core, by uint64) string {
	if where == "" || len(cores) == 0 {
		return ""
	}
	return fmt.Sprintf("%s: %d bytes too many on core %s and the phase's other cores of the CB", where, by, cores[0])
}
