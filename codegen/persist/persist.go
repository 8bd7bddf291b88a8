package persist

import (
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"

	"github.com/tcc-dev/tcc/codegen"
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
)

// CtlBuffer is the name of the control buffer a persistent program
// declares; the runtime allocates it (CtlTensorShape) like any other.
const CtlBuffer = "persist.ctl"

// Plan is what Build decided: the phases and their dependencies.
type Plan struct {
	Phases []PlanPhase
	// FP32Dest lists the phase kernels that run with fp32 DEST so that
	// their merged compute binary has one DEST mode (destmode.go).
	FP32Dest []Promotion
}

// PlanPhase is one phase: the source program, the op it implements, the
// phases it waits for (nearest only, ascending) and its cores.
type PlanPhase struct {
	Name  string
	Op    string
	Deps  []int
	Cores int
	// Early is the number of cores whose NCRISC begins the phase early
	// (early.go).
	Early int
}

// Deps returns the number of dependency waits of the plan.
func (p *Plan) Deps() int {
	n := 0
	for _, ph := range p.Phases {
		n += len(ph.Deps)
	}
	return n
}

// Build merges b's programs into one persistent program (see the package
// doc) and validates it (Validate). The program declares every buffer of
// the phases plus the control buffer CtlBuffer. Errors name the phase (program and op) and the rule:
// two kernels of one phase on one RISC of a core, a kernel with more
// runtime arguments on a core than the card allows, a statement Build
// cannot rename.
func Build(b *codegen.Build) (*kir.Program, *Plan, error) { return build(b, nil, true) }

// BuildWithoutEarlyBegins is Build with no early begins (early.go): every
// RISC of a core begins each phase at the same core-local barrier and
// ps.Early is empty: a simpler program to bring up on a card (Build's, with
// early begins, is the one the timing model predicts and `tcc build
// --persistent` prints).
func BuildWithoutEarlyBegins(b *codegen.Build) (*kir.Program, *Plan, error) {
	return build(b, nil, false)
}

// build builds the program (buildOnce) and, when its early CBs would
// reach the L1 the card's tables and images buffers take (Prepare:
// cardBuffers), builds it again with that L1 reserved for them, so that
// the program the simulator runs is the one codegen/cpp prints.
func build(b *codegen.Build, lp *loopPlan, early bool) (*kir.Program, *Plan, error) {
	reserve := uint64(0)
	for pass := 0; ; pass++ {
		prog, plan, err := buildOnce(b, lp, early, reserve)
		if err != nil || len(prog.Persist.Early) == 0 || pass == maxPasses {
			return prog, plan, err
		}
		card, err := cardBuffers(prog, b)
		if err != nil {
			// Prepare reports it when the program is printed.
			return prog, plan, nil
		}
		top := l1Top(b.Target, append(append([]kir.Buffer{}, prog.Buffers...), card.tables, card.text))
		if earlyOver(b.Target, prog.Name, prog.Persist, top) == nil {
			return prog, plan, nil
		}
		reserve = max(reserve, l1Top(b.Target, prog.Buffers)-top)
	}
}

// maxPasses bounds build's replanning (each pass reserves at least the
// previous pass's L1; the images shrink or grow a little with the early
// begins' CB renumbering).
const maxPasses = 3

func buildOnce(b *codegen.Build, lp *loopPlan, early bool, reserve uint64) (*kir.Program, *Plan, error) {
	if b == nil || len(b.Programs) == 0 {
		return nil, nil, fmt.Errorf("persist: the build has no programs")
	}
	t := b.Target
	n := len(b.Programs)
	plan := &Plan{Phases: make([]PlanPhase, n)}
	deps := dependencies(b)
	fixed := fixedBuffers(b)
	ps := &kir.Persist{Ctl: CtlBuffer}
	prog := &kir.Program{Name: b.Graph.Name + ".persistent", Persist: ps}
	seenBuf := map[string]bool{}
	// Phases: CBs, semaphores, kernels, cores.
	type slotKey struct {
		c    kir.Core
		proc kir.Processor
	}
	kernelOn := make([]map[slotKey]*kir.Kernel, n)
	for p, bp := range b.Programs {
		sp := bp.Kernel
		where := fmt.Sprintf("persist: phase %d (program %q, %s)", p, sp.Name, bp.Op.Where())
		ph := kir.Phase{Name: sp.Name, CBs: sp.CBs, Semaphores: sp.Semaphores, SemSlot: ps.SemSlots, Cores: sp.Cores()}
		for _, s := range sp.Semaphores {
			if s.ID < 0 {
				return nil, nil, fmt.Errorf("%s: semaphore id %d is negative", where, s.ID)
			}
			ps.SemSlots = max(ps.SemSlots, ph.SemSlot+s.ID+1)
		}
		kernelOn[p] = map[slotKey]*kir.Kernel{}
		for _, k := range sp.Kernels {
			ph.Kernels = append(ph.Kernels, kir.PhaseKernel{Name: k.Name, Processor: k.Processor, NoC: k.NoC, TXQ: k.TXQ, Cores: k.Cores, Compute: k.Compute, Defines: k.Defines})
			nrt := len(k.ArgsOfKind(kir.RuntimeArg)) + len(k.ArgsOfKind(kir.CommonRuntimeArg))
			if nrt > t.MaxRuntimeArgs {
				return nil, nil, &kir.RuleError{Rule: kir.RuleRuntimeArgs, Program: sp.Name, Kernel: k.Name, CB: kir.NoCB,
					Msg: fmt.Sprintf("phase %d has %d runtime args for kernel %q; a phase's argument table holds at most %d", p, nrt, k.Name, t.MaxRuntimeArgs)}
			}
			for _, c := range kir.CoresOf(k.Cores) {
				key := slotKey{c, k.Processor}
				if o := kernelOn[p][key]; o != nil {
					return nil, nil, fmt.Errorf("%s: kernels %q and %q both run on %s of core %s", where, o.Name, k.Name, k.Processor, c)
				}
				kernelOn[p][key] = k
			}
		}
		ps.Phases = append(ps.Phases, ph)
		for _, buf := range sp.Buffers {
			if !seenBuf[buf.Name] {
				seenBuf[buf.Name] = true
				prog.Buffers = append(prog.Buffers, buf)
			}
		}
		plan.Phases[p] = PlanPhase{Name: sp.Name, Op: bp.Op.Where(), Deps: deps[p], Cores: len(ph.Cores)}
	}
	ps.CtlBytes = kir.CtlSize(n, ps.SemSlots)
	if lp != nil {
		if err := lp.layout(b, ps); err != nil {
			return nil, nil, err
		}
		prog.Buffers = append(prog.Buffers, lp.history)
	}
	if t.Eth != nil {
		ps.EthCtl = uint32(t.Eth.L1Top - ps.CtlBytes)
	}
	prog.Buffers = append(prog.Buffers, CtlKirBuffer(b, ps.CtlBytes))
	cbMaps := make([]map[int]int, n)
	if early {
		cbMaps = planEarly(b, ps, func(p int, c kir.Core, proc kir.Processor) *kir.Kernel { return kernelOn[p][slotKey{c, proc}] }, fixed, prog.Buffers, reserve)
	}
	for _, e := range ps.Early {
		plan.Phases[e.Phase].Early += len(e.Cores)
	}
	// Who waits for whom: dependents[p] are the cores with a phase that
	// depends on p.
	dependents := make([]map[kir.Core]bool, n)
	for p := range dependents {
		dependents[p] = map[kir.Core]bool{}
	}
	for q, ds := range deps {
		for _, p := range ds {
			for _, c := range ps.Phases[q].Cores {
				dependents[p][c] = true
			}
		}
	}
	// The RISCs of each core: all three on a worker core, the ones its
	// phases use on an ethernet core.
	procs := map[kir.Core]map[kir.Processor]bool{}
	var cores []kir.Core
	for p := range ps.Phases {
		for _, c := range ps.Phases[p].Cores {
			if procs[c] == nil {
				procs[c] = map[kir.Processor]bool{}
				cores = append(cores, c)
				if !c.IsEth() {
					for _, pr := range []kir.Processor{kir.RISCV0, kir.RISCV1, kir.ComputeProc} {
						procs[c][pr] = true
					}
				}
			}
		}
		for key := range kernelOn[p] {
			procs[key.c][key.proc] = true
		}
	}
	sort.Slice(cores, func(i, j int) bool { return cores[i].Less(cores[j]) })
	if lp != nil {
		if err := lp.pickLeader(cores); err != nil {
			return nil, nil, err
		}
	}
	// Merged kernels, one per (RISC, phase sequence).
	type group struct {
		cores []kir.Core
	}
	groups := map[string]*group{}
	var order []string
	for _, c := range cores {
		signaler := signalerOf(procs[c])
		for _, proc := range []kir.Processor{kir.RISCV0, kir.RISCV1, kir.ComputeProc} {
			if !procs[c][proc] {
				continue
			}
			var sig strings.Builder
			fmt.Fprintf(&sig, "%d/%v", proc, c.IsEth())
			for p := range ps.Phases {
				if !inCores(ps.Phases[p].Cores, c) {
					continue
				}
				k := kernelOn[p][slotKey{c, proc}]
				fmt.Fprintf(&sig, "|%d:%p:%v:%v", p, k, proc == signaler, ps.Phases[p].Cores[0] == c)
				// A merged kernel's cores begin (and end) a phase the same
				// way: early or at the full barrier (codegen/cpp prints one).
				if ps.EarlyOn(p, proc, c) != nil || ps.ArrivesOnly(p, proc, c) {
					fmt.Fprintf(&sig, ":early %v %v", ps.EarlyOn(p, proc, c) != nil, ps.ArrivesOnly(p, proc, c))
				}
			}
			if lp != nil {
				fmt.Fprintf(&sig, "|step leader %v", c == lp.leader)
			}
			key := sig.String()
			g := groups[key]
			if g == nil {
				g = &group{}
				groups[key] = g
				order = append(order, key)
			}
			g.cores = append(g.cores, c)
		}
	}
	for gi, key := range order {
		g := groups[key]
		c0 := g.cores[0]
		proc := procFromKey(key)
		m := &merger{ps: ps, t: b, eth: c0.IsEth(), proc: proc, cores: g.cores, loop: lp, fixed: fixed, cbMaps: cbMaps}
		m.k = &kir.Kernel{Name: fmt.Sprintf("persist_%s_%d", procName(proc), gi), Processor: proc, Role: roleOf(proc), NoC: int(proc) & 1, Cores: ranges(g.cores)}
		if c0.IsEth() {
			m.k.Role = kir.RoleReader
			m.k.TXQ = kir.EthTXQ(proc)
		}
		signaler := signalerOf(procs[c0]) == proc
		for p := range ps.Phases {
			if !inCores(ps.Phases[p].Cores, c0) {
				continue
			}
			if err := m.phase(p, kernelOn[p][slotKey{c0, proc}], deps[p], signaler, dependents[p], b.Programs[p].Op.Where()); err != nil {
				return nil, nil, err
			}
		}
		if lp != nil && signaler {
			m.stepEnd(cores)
		}
		prog.Kernels = append(prog.Kernels, m.finish())
	}
	plan.FP32Dest = unifyDestModes(prog)
	if err := Validate(prog, t); err != nil {
		return nil, nil, err
	}
	return prog, plan, nil
}

// CtlKirBuffer is the control buffer of a persistent program of b: one
// page of ctlBytes on every worker core.
func CtlKirBuffer(b *codegen.Build, ctlBytes int) kir.Buffer {
	t := b.Target
	grid := ir.CoreRange{X0: 0, Y0: 0, X1: t.GridX - 1, Y1: t.GridY - 1}
	return kir.Buffer{Name: CtlBuffer, DType: ir.UInt32, Layout: ir.RowMajorLayout, PageSize: ctlBytes, Pages: t.GridX * t.GridY,
		Mem: ir.MemoryConfig{Kind: ir.L1HeightSharded, Shard: &ir.ShardSpec{Grid: grid, Shape: [2]int{1, ctlBytes / 4}}}}
}

// CtlShape is the shape of the control buffer as a row-major uint32
// tensor (its rows are its pages).
func CtlShape(buf kir.Buffer) ir.Shape { return ir.Shape{buf.Pages, buf.PageSize / 4} }

// ArgPrefix is the prefix of phase p's arguments in a merged kernel
// ("p17_" for phase 17); their variables are prefixed "v17_".
func ArgPrefix(p int) string { return kir.PhaseArgPrefix(p) }

// coreID spells c as part of an identifier: "3_4", "eth2".
func coreID(c kir.Core) string {
	if c.IsEth() {
		return fmt.Sprintf("eth%d", c.X)
	}
	return fmt.Sprintf("%d_%d", c.X, c.Y)
}

func signalerOf(procs map[kir.Processor]bool) kir.Processor {
	for _, p := range []kir.Processor{kir.RISCV0, kir.RISCV1} {
		if procs[p] {
			return p
		}
	}
	return kir.ComputeProc
}

func procFromKey(key string) kir.Processor {
	var p int
	fmt.Sscanf(key, "%d/", &p)
	return kir.Processor(p)
}

func procName(p kir.Processor) string {
	switch p {
	case kir.RISCV0:
		return "brisc"
	case kir.RISCV1:
		return "ncrisc"
	}
	return "compute"
}

func roleOf(p kir.Processor) kir.Role {
	switch p {
	case kir.RISCV0:
		return kir.RoleReader
	case kir.RISCV1:
		return kir.RoleWriter
	}
	return kir.RoleCompute
}

func inCores(cs []kir.Core, c kir.Core) bool {
	i := sort.Search(len(cs), func(i int) bool { return !cs[i].Less(c) })
	return i < len(cs) && cs[i] == c
}

// ranges lists cs (row-major) as single-row core ranges.
func ranges(cs []kir.Core) []ir.CoreRange {
	var out []ir.CoreRange
	for _, c := range cs {
		if n := len(out); n > 0 && out[n-1].Y0 == c.Y && out[n-1].X1+1 == c.X {
			out[n-1].X1 = c.X
			continue
		}
		out = append(out, c.Range())
	}
	return out
}

// dependencies returns, per phase, the phases it must wait for (nearest
// only, ascending); see the package doc.
func dependencies(b *codegen.Build) [][]int {
	n := len(b.Programs)
	lastWrite := map[string]int{}
	readers := map[string][]int{}
	direct := make([]map[int]bool, n)
	for p, bp := range b.Programs {
		direct[p] = map[int]bool{}
		writes := map[string]bool{}
		for _, r := range bp.Op.Results {
			if s := b.BufferOf(r); s != nil {
				writes[s.Name] = true
			}
		}
		var reads []string
		for _, buf := range bp.Kernel.Buffers {
			reads = append(reads, buf.Name)
		}
		for w := range writes {
			if !slices.Contains(reads, w) {
				reads = append(reads, w)
			}
		}
		for _, r := range reads {
			if q, ok := lastWrite[r]; ok {
				direct[p][q] = true // RAW, WAW
			}
		}
		for w := range writes {
			for _, q := range readers[w] {
				if q != p {
					direct[p][q] = true // WAR
				}
			}
		}
		for _, r := range reads {
			if !writes[r] {
				readers[r] = append(readers[r], p)
			}
		}
		for w := range writes {
			lastWrite[w] = p
			readers[w] = nil
		}
	}
	// Ancestors (bit sets) to drop implied dependencies.
	words := (n + 63) / 64
	anc := make([][]uint64, n)
	out := make([][]int, n)
	for p := 0; p < n; p++ {
		anc[p] = make([]uint64, words)
		var ds []int
		for q := range direct[p] {
			ds = append(ds, q)
		}
		sort.Sort(sort.Reverse(sort.IntSlice(ds)))
		for _, q := range ds {
			if anc[p][q/64]&(1<<(q%64)) != 0 {
				continue // implied by a later dependency
			}
			out[p] = append(out[p], q)
			anc[p][q/64] |= 1 << (q % 64)
			for i := range anc[p] {
				anc[p][i] |= anc[q][i]
			}
		}
		sort.Ints(out[p])
	}
	return out
}

// merger builds one merged kernel.
type merger struct {
	ps    *kir.Persist
	t     *codegen.Build
	eth   bool
	proc  kir.Processor
	cores []kir.Core
	k     *kir.Kernel
	body  []kir.Stmt
	// fixed, when not nil, holds the buffers no phase writes (lazy.go):
	// the data-movement RISCs' dependency waits follow tcc_phase_begin.
	fixed map[string]bool
	// rt holds, per core, the runtime values appended so far.
	rt    map[kir.Core][]kir.ArgValue
	nocs  map[kir.Core]bool
	mcs   map[string]bool
	nrt   int
	ctlOK bool
	// loop is the step loop of a multi-step program, or nil; start is the
	// step barrier its signaling RISC runs before the step's phases.
	loop  *loopPlan
	start []kir.Stmt
	// cbMaps renumbers, per phase, the CBs its statements name (early.go).
	cbMaps []map[int]int
}

// ctl is the local control block's address expression.
func (m *merger) ctl() kir.Expr {
	if m.eth {
		return kir.C(m.ps.EthCtl)
	}
	return m.workerCtl()
}

func (m *merger) workerCtl() kir.Expr {
	if !m.ctlOK {
		m.ctlOK = true
		m.k.CommonArg("persist_ctl", kir.BufferAddr(CtlBuffer, 0))
	}
	return kir.ArgRef{Name: "persist_ctl"}
}

// ctlOf is the control block's address on core c.
func (m *merger) ctlOf(c kir.Core) kir.Expr {
	if c.IsEth() {
		return kir.C(m.ps.EthCtl)
	}
	return m.workerCtl()
}

// nocAddr is get_noc_addr(x, y, addr) of core c.
func (m *merger) nocAddr(c kir.Core, off uint32) kir.Expr {
	if m.nocs == nil {
		m.nocs = map[kir.Core]bool{}
	}
	nx, ny := fmt.Sprintf("persist_nx_%s", coreID(c)), fmt.Sprintf("persist_ny_%s", coreID(c))
	if !m.nocs[c] {
		m.nocs[c] = true
		m.k.CommonArg(nx, kir.NoCX(c))
		m.k.CommonArg(ny, kir.NoCY(c))
	}
	return kir.NoCAddr{X: kir.ArgRef{Name: nx}, Y: kir.ArgRef{Name: ny}, Addr: kir.Add(m.ctlOf(c), kir.C(off))}
}

func (m *merger) phase(p int, src *kir.Kernel, deps []int, signaler bool, dependents map[kir.Core]bool, where string) error {
	ps := m.ps
	dm := m.proc != kir.ComputeProc
	waits := func() {
		for _, q := range deps {
			addr := kir.Add(m.ctl(), kir.C(ps.DoneWord(q)))
			if m.eth {
				m.body = append(m.body, kir.EthNoCSemaphoreWaitMin{Addr: addr, Value: kir.C(1)})
			} else {
				m.body = append(m.body, kir.NoCSemaphoreWaitMin{Addr: addr, Value: kir.C(1)})
			}
		}
	}
	if w := m.phaseWord(kir.PhaseWord(p, false)); w != nil {
		m.body = append(m.body, w)
	}
	// lazy: the waits follow PhaseBegin (lazy.go).
	lazy := dm && !m.eth && m.fixed != nil && lazyPhase(&ps.Phases[p], m.fixed)
	if dm && !lazy {
		waits()
	}
	m.body = append(m.body, kir.PhaseBegin{Phase: p})
	waited := !lazy
	if src != nil {
		body, err := m.rename(p, src)
		if err != nil {
			return fmt.Errorf("persist: phase %d (%s), kernel %q: %w", p, where, src.Name, err)
		}
		m.body = append(m.body, kir.Comment{Text: fmt.Sprintf("phase %d: %s", p, where)})
		at := len(body)
		if lazy {
			at = firstTouch(src, m.cores, m.fixed)
		}
		m.body = append(m.body, body[:at]...)
		if !waited {
			waits()
			waited = true
		}
		m.body = append(m.body, body[at:]...)
	}
	if !waited {
		waits()
	}
	if dm {
		m.body = append(m.body, kir.NoCAsyncWriteBarrier{})
	}
	m.body = append(m.body, kir.PhaseEnd{Phase: p})
	if w := m.phaseWord(kir.PhaseWord(p, true)); w != nil {
		m.body = append(m.body, w)
	}
	if !signaler {
		return nil
	}
	ph := &ps.Phases[p]
	leader := ph.Cores[0]
	m.body = append(m.body, kir.NoCSemaphoreInc{Addr: m.nocAddr(leader, ps.CountWord(p)), Incr: kir.C(1)}, kir.NoCAsyncAtomicBarrier{})
	if m.cores[0] != leader {
		return nil
	}
	count := kir.Add(m.ctl(), kir.C(ps.CountWord(p)))
	if m.eth {
		m.body = append(m.body, kir.EthNoCSemaphoreWait{Addr: count, Value: kir.Ci(len(ph.Cores))})
	} else {
		m.body = append(m.body, kir.NoCSemaphoreWait{Addr: count, Value: kir.Ci(len(ph.Cores))})
	}
	ds := make([]kir.Core, 0, len(dependents))
	for c := range dependents {
		ds = append(ds, c)
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i].Less(ds[j]) })
	// Worker dependents get done[p] by multicast from a worker leader
	// (the count word's value, at least 1: the waits want done >= 1), one
	// NoC command per rectangle instead of one atomic per core; the leader
	// itself and ethernet cores by an increment.
	var workers []kir.Core
	incs := 0
	for _, c := range ds {
		if m.eth || c.IsEth() || c == leader {
			m.body = append(m.body, kir.NoCSemaphoreInc{Addr: m.nocAddr(c, ps.DoneWord(p)), Incr: kir.C(1)})
			incs++
			continue
		}
		workers = append(workers, c)
	}
	mcasts := 0
	for _, r := range doneRects(m.t.Target, workers, leader) {
		m.body = append(m.body, kir.NoCSemaphoreSetMulticast{Src: count, Dst: m.mcastAddr(r, ps.DoneWord(p)), NumDests: kir.Ci(r.dests)})
		mcasts++
	}
	if incs > 0 {
		m.body = append(m.body, kir.NoCAsyncAtomicBarrier{})
	}
	if mcasts > 0 {
		m.body = append(m.body, kir.NoCAsyncWriteBarrier{})
	}
	return nil
}

// rename returns src's body with its arguments and variables renamed for
// phase p and its semaphores re-homed into the control block; src's
// arguments join the merged kernel's table (runtime values per core
// appended in phase order).
func (m *merger) rename(p int, src *kir.Kernel) ([]kir.Stmt, error) {
	prefix := ArgPrefix(p)
	if !m.eth {
		// persist_ctl first, so that the phase's common arguments
		// (its own and SemArg) are contiguous: on the card each phase's
		// arguments are a table of their own (codegen/cpp).
		m.workerCtl()
	}
	nrt := 0
	for _, a := range src.Args {
		v := a.Value
		switch a.Kind {
		case kir.CompileTimeArg:
			m.k.CompileArg(prefix+a.Name, v.Const)
			if v.Kind != kir.ValConst {
				m.k.Args[len(m.k.Args)-1].Value = v
			}
		case kir.CommonRuntimeArg:
			m.k.CommonArg(prefix+a.Name, v)
		case kir.RuntimeArg:
			m.k.RuntimeArg(prefix + a.Name)
			nrt++
		}
	}
	if nrt > 0 {
		if m.rt == nil {
			m.rt = map[kir.Core][]kir.ArgValue{}
		}
		for _, c := range m.cores {
			vals := src.RuntimeValuesOn(c)
			vals = vals[:min(len(vals), nrt)]
			pad := m.nrt - len(m.rt[c])
			for i := 0; i < pad; i++ {
				m.rt[c] = append(m.rt[c], kir.U32(0))
			}
			m.rt[c] = append(m.rt[c], vals...)
			for i := len(vals); i < nrt; i++ {
				m.rt[c] = append(m.rt[c], kir.U32(0))
			}
		}
		m.nrt += nrt
	}
	semBase := m.ps.SemWord(m.ps.Phases[p].SemSlot)
	declared := map[string]bool{}
	rn := &renamer{prefix: prefix, cbs: m.cbMaps[p], sem: func(id kir.Expr, eth bool) kir.Expr {
		// The phase's semaphore base is a common argument of the
		// phase (SemArg), not a constant in its body, so that phases
		// whose bodies differ only in it share code when printed.
		name, v := prefix+SemArg, kir.BufferAddr(CtlBuffer, semBase)
		if eth {
			name, v = prefix+EthSemArg, kir.U32(m.ps.EthCtl+semBase)
		}
		if !declared[name] {
			declared[name] = true
			m.k.CommonArg(name, v)
		}
		return kir.Add(kir.ArgRef{Name: name}, kir.Mul(id, kir.C(kir.CtlStride)))
	}}
	return rn.stmts(src.Body)
}

// SemArg (EthSemArg on ethernet cores) is the name, after a phase's
// ArgPrefix, of the common argument holding the address of the phase's
// first semaphore word in the control block: get_semaphore(id) of phase p
// reads SemArg + id * kir.CtlStride.
const (
	SemArg    = "persist_sem"
	EthSemArg = "persist_eth_sem"
)

// finish sets the merged kernel's body and runtime values.
func (m *merger) finish() *kir.Kernel {
	m.k.Body = m.body
	if m.loop != nil {
		m.k.CommonArg(StepsArg, kir.U32(uint32(m.loop.steps)))
		body := append(append([]kir.Stmt{}, m.start...), m.body...)
		m.k.Body = []kir.Stmt{kir.For{Var: StepVar, Start: kir.C(0), End: kir.ArgRef{Name: StepsArg}, Body: body}}
	}
	for _, c := range m.cores {
		vals := m.rt[c]
		for len(vals) < m.nrt {
			vals = append(vals, kir.U32(0))
		}
		if m.nrt > 0 {
			m.k.SetRuntimeArgs(c, vals...)
		}
	}
	return m.k
}

// renamer rewrites a phase's statements.
type renamer struct {
	prefix string
	// cbs renumbers CB indices (nil: none).
	cbs map[int]int
	sem func(id kir.Expr, eth bool) kir.Expr
	err error
}

var (
	exprType = reflect.TypeOf((*kir.Expr)(nil)).Elem()
	stmtsT   = reflect.TypeOf([]kir.Stmt(nil))
	varType  = reflect.TypeOf(kir.Var{})
)

func (r *renamer) stmts(in []kir.Stmt) ([]kir.Stmt, error) {
	out := make([]kir.Stmt, len(in))
	for i, s := range in {
		out[i] = r.stmt(s)
	}
	return out, r.err
}

// stmt copies s, renaming every expression, variable and nested body.
func (r *renamer) stmt(s kir.Stmt) kir.Stmt {
	v := reflect.ValueOf(s)
	cp := reflect.New(v.Type()).Elem()
	cp.Set(v)
	for i := 0; i < cp.NumField(); i++ {
		f := cp.Field(i)
		switch {
		case f.Type() == exprType:
			if !f.IsNil() {
				f.Set(reflect.ValueOf(r.expr(f.Interface().(kir.Expr))))
			}
		case f.Type() == stmtsT:
			if !f.IsNil() {
				body, _ := r.stmts(f.Interface().([]kir.Stmt))
				f.Set(reflect.ValueOf(body))
			}
		case f.Type() == varType:
			x := f.Interface().(kir.Var)
			x.Name = r.varName(x.Name)
			f.Set(reflect.ValueOf(x))
		}
	}
	if r.cbs != nil {
		remapStmtCBs(cp, r.cbs)
	}
	return cp.Interface().(kir.Stmt)
}

// cb is CB index i renumbered.
func (r *renamer) cb(i int) int {
	if to, ok := r.cbs[i]; ok {
		return to
	}
	return i
}

func (r *renamer) varName(n string) string { return "v" + strings.TrimPrefix(r.prefix, "p") + n }

func (r *renamer) expr(e kir.Expr) kir.Expr {
	switch e := e.(type) {
	case nil:
		return nil
	case kir.GetWritePtr:
		e.CB = r.cb(e.CB)
		return e
	case kir.GetReadPtr:
		e.CB = r.cb(e.CB)
		return e
	case kir.GetTileSize:
		e.CB = r.cb(e.CB)
		return e
	case kir.Const, kir.MyNoCX, kir.MyNoCY, kir.NumDRAMBanks:
		return e
	case kir.Var:
		e.Name = r.varName(e.Name)
		return e
	case kir.ArgRef:
		return kir.ArgRef{Name: r.prefix + e.Name}
	case kir.Bin:
		return kir.Bin{Op: e.Op, X: r.expr(e.X), Y: r.expr(e.Y)}
	case kir.GetSemaphore:
		return r.sem(r.expr(e.ID), false)
	case kir.GetEthSemaphore:
		return r.sem(r.expr(e.ID), true)
	case kir.NoCAddr:
		return kir.NoCAddr{X: r.expr(e.X), Y: r.expr(e.Y), Addr: r.expr(e.Addr)}
	case kir.DRAMBankAddr:
		return kir.DRAMBankAddr{Bank: r.expr(e.Bank), Offset: r.expr(e.Offset)}
	case kir.MulticastAddr:
		return kir.MulticastAddr{X0: r.expr(e.X0), Y0: r.expr(e.Y0), X1: r.expr(e.X1), Y1: r.expr(e.Y1), Addr: r.expr(e.Addr)}
	case kir.L1Read32:
		return kir.L1Read32{Addr: r.expr(e.Addr)}
	case kir.ReadTileValue:
		e.Tile, e.Offset, e.CB = r.expr(e.Tile), r.expr(e.Offset), r.cb(e.CB)
		return e
	}
	if r.err == nil {
		r.err = fmt.Errorf("expression %T cannot be renamed", e)
	}
	return e
}

// doneRect is one multicast rectangle of a done signal: logical worker
// cores x0..x1, y0..y1 (corners included), dests of them besides the
// sender.
type doneRect struct {
	x0, y0, x1, y1 int
	dests          int
}

// doneRects covers the bounding box of the worker cores cs with
// rectangles whose NoC columns and rows are contiguous (no rectangle spans
// a DRAM or PCIe column or row of the NoC), each holding at least one core
// besides the sender; nil when cs is empty. The rectangles may hold cores
// outside cs: a done word is read only by the phases that depend on its
// phase, so setting it on other cores changes nothing.
func doneRects(t *target.Target, cs []kir.Core, sender kir.Core) []doneRect {
	if len(cs) == 0 {
		return nil
	}
	x0, y0, x1, y1 := cs[0].X, cs[0].Y, cs[0].X, cs[0].Y
	for _, c := range cs {
		x0, y0, x1, y1 = min(x0, c.X), min(y0, c.Y), max(x1, c.X), max(y1, c.Y)
	}
	runs := func(lo, hi int, noc func(i int) int) [][2]int {
		var out [][2]int
		for i := lo; i <= hi; i++ {
			if n := len(out); n > 0 && noc(i) == noc(i-1)+1 {
				out[n-1][1] = i
				continue
			}
			out = append(out, [2]int{i, i})
		}
		return out
	}
	nx := func(x int) int { v, _, _ := t.WorkerNoC(x, y0); return v }
	ny := func(y int) int { _, v, _ := t.WorkerNoC(x0, y); return v }
	var out []doneRect
	for _, ry := range runs(y0, y1, ny) {
		for _, rx := range runs(x0, x1, nx) {
			r := doneRect{x0: rx[0], y0: ry[0], x1: rx[1], y1: ry[1]}
			r.dests = (r.x1 - r.x0 + 1) * (r.y1 - r.y0 + 1)
			if !sender.IsEth() && sender.X >= r.x0 && sender.X <= r.x1 && sender.Y >= r.y0 && sender.Y <= r.y1 {
				r.dests--
			}
			if r.dests > 0 {
				out = append(out, r)
			}
		}
	}
	return out
}

// mcastAddr is the multicast address of control word off on rectangle r,
// for the merged kernel's NoC (kir.McastCorners' order).
func (m *merger) mcastAddr(r doneRect, off uint32) kir.Expr {
	lo, hi := kir.Core{X: r.x0, Y: r.y0}, kir.Core{X: r.x1, Y: r.y1}
	cs := kir.McastCorners(m.k.NoC, lo, hi)
	var e [4]kir.Expr
	for i, v := range cs {
		name := fmt.Sprintf("persist_mc%d_%s_%s", i, coreID(lo), coreID(hi))
		if m.mcs == nil {
			m.mcs = map[string]bool{}
		}
		if !m.mcs[name] {
			m.mcs[name] = true
			m.k.CommonArg(name, v)
		}
		e[i] = kir.ArgRef{Name: name}
	}
	return kir.MulticastAddr{X0: e[0], Y0: e[1], X1: e[2], Y1: e[3], Addr: kir.Add(m.workerCtl(), kir.C(off))}
}
