package blackhole

import (
	"encoding/binary"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/runtime/blackhole/chip"
	"github.com/tcc-dev/tcc/runtime/blackhole/launch"
)

// PersistentBuilder is the part of a Builder that compiles a persistent
// program's merged kernels.
type PersistentBuilder interface {
	// PersistentKernel returns the images of merged kernel k of
	// persistent program p by processor (as Builder.Kernel).
	PersistentKernel(p *kir.Program, k *kir.Kernel) (map[int][]byte, error)
}

// Session is one launch of a multi-step persistent program on the chip
// (LaunchPersistent): the host rings each step's doorbell (Ring), polls
// the step's done word (WaitStep), reads the step's tokens without
// stopping the device (ReadHistory), and stops the launch (Stop).
type Session struct {
	d       *Device
	p       *kir.Program
	proto   kir.StepProtocol
	cores   []kir.Core
	xys     []chip.XY
	ctl     uint32
	tables  uint32
	layout  *kir.Tables
	leader  chip.XY
	history Placement
	rung    int
	stopped bool
	// Timeout bounds each step (the watchdog); the device's by default.
	Timeout time.Duration
}

// LaunchPersistent loads multi-step persistent program p (kir.Persist with
// a step protocol, codegen/persist.BuildLoop, prepared for the card by
// codegen/persist.WithTables) on the chip, its buffers already uploaded at
// ref's addresses, and launches it ONCE: every worker core gets its merged
// kernel images in the images buffer (kir.TextBuffer; a core whose images
// do not fit is a *kir.RuleError naming the core and bytes), its page of
// the tables buffer exactly as the printed kernels read it
// (kir.Tables.Page: zeroed barrier words, argument header, phase CB
// records, argument vectors), the two ring arguments those kernels start
// from (launch.PersistentBlob) and a cleared control block (its phases'
// semaphores at their initial values); no step runs before the host
// rings (Session.Ring).
// The device's Builder builds the merged kernels when it is a
// PersistentBuilder (LaunchPersistentWith names another).
func (d *Device) LaunchPersistent(p *kir.Program, ref Reference) (*Session, error) {
	pb, ok := d.builder.(PersistentBuilder)
	if !ok {
		return nil, &SkipError{Reason: fmt.Sprintf("program %s: the kernel builder cannot build persistent kernels", p.Name)}
	}
	return d.LaunchPersistentWith(p, ref, pb)
}

// LaunchPersistentWith is LaunchPersistent with the merged kernels built
// by pb.
func (d *Device) LaunchPersistentWith(p *kir.Program, ref Reference, pb PersistentBuilder) (*Session, error) {
	ps := p.Persist
	if ps == nil || ps.Loop == nil {
		return nil, fmt.Errorf("program %s: not a multi-step persistent program (codegen/persist.BuildLoop)", p.Name)
	}
	lp, err := d.persistentProgram(p, pb, ref)
	if err != nil {
		return nil, err
	}
	lays, err := launch.PersistentPlan(lp, d.Chip.Layout)
	if err != nil {
		return nil, err
	}
	ctl, _, err := ref.Buffer(ps.Ctl)
	if err != nil {
		return nil, err
	}
	s := &Session{d: d, p: p, proto: *ps.Loop, ctl: ctl.Addr, tables: lp.Tables, Timeout: d.timeout}
	if s.layout, err = ps.Tables(); err != nil {
		return nil, err
	}
	if s.history, _, err = ref.Buffer(ps.Loop.History); err != nil {
		return nil, err
	}
	for _, pc := range lp.Cores {
		at, err := d.Chip.Worker(pc.Core)
		if err != nil {
			return nil, err
		}
		s.cores = append(s.cores, pc.Core)
		s.xys = append(s.xys, at)
	}
	if s.leader, err = d.Chip.Worker(ps.Loop.Leader); err != nil {
		return nil, err
	}
	if err := d.boot(s.cores); err != nil {
		return nil, err
	}
	// The control block: zeros, then the phases' semaphores.
	block := map[kir.Core][]byte{}
	for _, c := range ctl.Cores {
		block[c] = make([]byte, ps.CtlBytes)
	}
	for i := range ps.Phases {
		for _, sem := range ps.Phases[i].Semaphores {
			for _, c := range kir.CoresOf(sem.Cores) {
				if b := block[c]; b != nil {
					binary.LittleEndian.PutUint32(b[ps.SemWord(ps.Phases[i].SemSlot+sem.ID):], sem.Initial)
				}
			}
		}
	}
	for _, c := range ctl.Cores {
		at, err := d.Chip.Worker(c)
		if err != nil {
			return nil, err
		}
		if err := d.Chip.Write(at, uint64(ctl.Addr), block[c]); err != nil {
			return nil, fmt.Errorf("program %s: core %s: control block: %w", p.Name, c, err)
		}
	}
	if err := launch.Start(d.Chip, lp, lays, s.xys); err != nil {
		return nil, err
	}
	return s, nil
}

// persistentProgram gathers p's merged kernels' images (pb) and every
// worker core's tables page (kir.Tables.Page with the chip's resolver:
// buffer addresses from ref, NoC coordinates from the chip; phases' CBs
// placed from the unreserved base as the simulator places them), and the
// addresses of the control block, tables and images buffers. Every CB a
// phase places in L1 must end below the lowest L1 buffer of the program
// (a *kir.RuleError naming phase, CB, core and bytes).
func (d *Device) persistentProgram(p *kir.Program, pb PersistentBuilder, ref Reference) (*launch.Persistent, error) {
	ps := p.Persist
	lp := &launch.Persistent{Name: p.Name}
	ctl, _, err := ref.Buffer(ps.Ctl)
	if err != nil {
		return nil, err
	}
	tb, _, err := ref.Buffer(kir.TablesBuffer)
	if err != nil {
		return nil, fmt.Errorf("program %s: %w (codegen/persist.WithTables declares it)", p.Name, err)
	}
	text, _, err := ref.Buffer(kir.TextBuffer)
	if err != nil {
		return nil, fmt.Errorf("program %s: %w (codegen/persist.WithTables declares it)", p.Name, err)
	}
	lp.Ctl = ctl.Addr
	lp.Tables, lp.TablesSize = tb.Addr, uint32(tb.PageSize)
	lp.Text, lp.TextSize = text.Addr, uint32(text.PageSize)
	tables, err := ps.Tables()
	if err != nil {
		return nil, fmt.Errorf("program %s: %w", p.Name, err)
	}
	base := uint64(d.Chip.Layout.Unreserved)
	if err := d.checkPhaseCBs(p, ref, base); err != nil {
		return nil, err
	}
	res := resolver{d: d, ref: ref}
	byCore := map[kir.Core]*launch.PersistentCore{}
	var order []kir.Core
	for _, k := range p.Kernels {
		for _, c := range kir.CoresOf(k.Cores) {
			if c.IsEth() {
				return nil, &SkipError{Reason: fmt.Sprintf("program %s: kernel %s runs on ethernet cores: a persistent launch runs one chip's worker kernels; ethernet kernels start on every chip together (WriteProgram, Go, Wait)", p.Name, k.Name)}
			}
		}
		imgs, err := pb.PersistentKernel(p, k)
		if err != nil {
			return nil, err
		}
		for _, c := range kir.CoresOf(k.Cores) {
			pc := byCore[c]
			if pc == nil {
				pc = &launch.PersistentCore{Core: c}
				byCore[c] = pc
				order = append(order, c)
			}
			for _, proc := range procsOf(k.Processor) {
				if pc.Images[proc] != nil {
					return nil, fmt.Errorf("program %s: two merged kernels on %s of core %s", p.Name, procName(proc), c)
				}
				img, ok := imgs[proc]
				if !ok || len(img) == 0 {
					return nil, fmt.Errorf("program %s: the builder returned no %s image for kernel %s", p.Name, procName(proc), k.Name)
				}
				pc.Images[proc] = img
			}
			if k.Processor == kir.RISCV0 {
				pc.BRISCNoC = k.NoC
			}
		}
	}
	sort.Slice(order, func(i, j int) bool { return order[i].Less(order[j]) })
	for _, c := range order {
		pc := byCore[c]
		if pc.Page, err = tables.Page(p, c, res, base); err != nil {
			return nil, err
		}
		lp.Cores = append(lp.Cores, *pc)
	}
	return lp, nil
}

// checkPhaseCBs checks that every CB a phase of p places in L1 (as the
// simulator places them from base, kir.Persist.PlacePhaseCBs) ends below
// the lowest L1 buffer of the program on the chip (the control block,
// tables and images buffers included).
func (d *Device) checkPhaseCBs(p *kir.Program, ref Reference, base uint64) error {
	ps := p.Persist
	top := uint64(d.Chip.Layout.L1Size)
	for _, b := range p.Buffers {
		if b.Mem.Kind.IsDRAM() {
			continue
		}
		if pl, _, err := ref.Buffer(b.Name); err == nil {
			top = min(top, uint64(pl.Addr))
		}
	}
	for i := range ps.Phases {
		placed, err := ps.PlacePhaseCBs(i, base)
		if err != nil {
			return fmt.Errorf("program %s: %w", p.Name, err)
		}
		for _, pl := range placed {
			cb := pl.CB
			if cb.Backing != "" {
				continue
			}
			addr, size := uint64(pl.Addr.Const), uint64(cb.Bytes())
			if addr+size > top {
				c := kir.CoresOf(cb.Cores)[0]
				return &kir.RuleError{Rule: kir.RuleL1Budget, Program: p.Name, Core: &c, CB: cb.Index,
					Msg: fmt.Sprintf("phase %d (%s): CB of %d B at %#x ends %d B past the lowest L1 buffer (control block, tables, images) at %#x", i, ps.Phases[i].Name, size, addr, addr+size-top, top)}
			}
		}
	}
	return nil
}

// procsOf is the launch processor indices a kernel on proc occupies (a
// compute kernel: the three TRISCs).
func procsOf(proc kir.Processor) []int {
	switch proc {
	case kir.RISCV0:
		return []int{launch.BRISC}
	case kir.RISCV1:
		return []int{launch.NCRISC}
	}
	return []int{launch.TRISC0, launch.TRISC1, launch.TRISC2}
}

func procName(i int) string {
	return [...]string{"brisc", "ncrisc", "trisc0", "trisc1", "trisc2"}[i]
}

// resolver resolves a kir.ArgValue for the chip: buffer addresses from the
// reference, NoC coordinates from the chip.
type resolver struct {
	d   *Device
	ref Reference
}

func (r resolver) BufferAddress(name string) (uint32, error) {
	b, _, err := r.ref.Buffer(name)
	if err != nil {
		return 0, err
	}
	return b.Addr, nil
}

func (r resolver) WorkerNoC(c kir.Core) (int, int, error) {
	at, err := r.d.Chip.Worker(c)
	return at.X, at.Y, err
}

func (r resolver) DeviceID() uint32 { return 0 }

// Ring allows the device to run steps up to n (the doorbell: step s runs
// once n >= s+1). It fails past the launch's steps or after Stop.
func (s *Session) Ring(n int) error {
	if s.stopped {
		return fmt.Errorf("program %s: doorbell rung after the stop", s.p.Name)
	}
	if n < s.rung || n > s.p.Persist.Steps {
		return fmt.Errorf("program %s: doorbell %d: the launch runs %d steps and %d are rung", s.p.Name, n, s.p.Persist.Steps, s.rung)
	}
	s.rung = n
	return s.d.Chip.Write32(s.leader, uint64(s.ctl+s.proto.Doorbell), uint32(n))
}

// Done reads the device's done word: the steps completed.
func (s *Session) Done() (int, error) {
	v, err := s.d.Chip.Read32(s.leader, uint64(s.ctl+s.proto.Done))
	return int(v), err
}

// WaitStep polls the done word until step finished (its tokens are in the
// history), up to Timeout; a step that does not finish is a
// *PersistentStallError naming every core that did not finish it, its
// data-movement processors and the phase each is in.
func (s *Session) WaitStep(step int) error {
	if step >= s.rung {
		return fmt.Errorf("program %s: waiting for step %d, which is not rung (%d rung)", s.p.Name, step, s.rung)
	}
	err := s.d.Chip.Poll(s.Timeout, func() string { return "" }, func() (bool, error) {
		n, err := s.Done()
		return n > step, err
	})
	if _, ok := err.(*chip.TimeoutError); ok {
		return s.stall(step, false)
	}
	return err
}

// ReadHistory reads page step of the token history (the tokens step
// wrote) into page, len(page) = the history's page size, while the device
// runs.
func (s *Session) ReadHistory(step int, page []byte) error {
	h := s.history
	if step < 0 || step >= h.Pages || len(page) != h.PageSize {
		return fmt.Errorf("program %s: history page %d of %d (%d B into %d B)", s.p.Name, step, h.Pages, h.PageSize, len(page))
	}
	return s.d.page(h, step, page, false)
}

// Stop writes the stop flag once every step of the launch is rung and
// waits for every core to finish the launch (RUN_MSG_DONE); a core that
// does not is reported as by WaitStep, for the last step.
func (s *Session) Stop() error {
	steps := s.p.Persist.Steps
	if s.rung != steps {
		return fmt.Errorf("program %s: stop after %d of %d steps: the launch runs all %d (its compute threads' loop bound is the launch's step count)", s.p.Name, s.rung, steps, steps)
	}
	s.stopped = true
	if err := s.d.Chip.Write32(s.leader, uint64(s.ctl+s.proto.Doorbell), kir.DoorbellStop|uint32(steps)); err != nil {
		return err
	}
	l := s.d.Chip.Layout
	goAddr := uint64(l.Mailbox.Base) + uint64(l.Msg.GoMessages)
	err := s.d.Chip.Poll(s.Timeout, func() string { return "" }, func() (bool, error) {
		for _, at := range s.xys {
			v, err := s.d.Chip.Read32(at, goAddr)
			if err != nil || uint8(v>>24) != l.RunMsgDone {
				return false, err
			}
		}
		return true, nil
	})
	if _, ok := err.(*chip.TimeoutError); ok {
		return s.stall(steps-1, true)
	}
	return err
}

// PersistentStallError is the watchdog's report of a step of a persistent
// launch that did not finish.
type PersistentStallError struct {
	Program string
	Step    int
	After   time.Duration
	Cores   []StalledPhaseCore
	// Stop is set when the launch did not end after the host's stop.
	Stop bool
	// Running lists, when every core finished the step, the cores still
	// running after the stop (Stop) or, else, the step leader whose done
	// word did not follow (Done: its value).
	Running []kir.Core
	Done    int
}

// StalledPhaseCore is a core that did not finish the step: where each of
// its data-movement processors is (compute kernels keep no phase word),
// and how many core-local phase barriers each of its five RISCs has
// reached (the tables page's barrier words, kir.TableBarrierWords: the
// RISC with the lowest count is the one the others wait for).
type StalledPhaseCore struct {
	Core     kir.Core
	NoC      chip.XY
	Procs    []ProcPhase
	Barriers [kir.TableBarrierWords]uint32
	// Done lists the phases whose done word is set on the core (a phase
	// sets it only on the cores of the phases that depend on it).
	Done []int
	// CBs are the stream counters (pages received and acked, 16 bits) of
	// the merged CB indices the earliest phase its data-movement RISCs
	// are in installs on the core.
	CBs []string
}

// ProcPhase is where one processor of a stalled core is: in phase Phase
// (Name), or past its end (Ended), or before its first (Phase -1).
type ProcPhase struct {
	Proc  string
	Phase int
	Name  string
	Ended bool
}

func (p ProcPhase) String() string {
	switch {
	case p.Phase < 0:
		return p.Proc + " before its first phase"
	case p.Ended:
		return fmt.Sprintf("%s after phase %d (%s)", p.Proc, p.Phase, p.Name)
	}
	return fmt.Sprintf("%s in phase %d (%s)", p.Proc, p.Phase, p.Name)
}

func (e *PersistentStallError) Error() string {
	var b strings.Builder
	switch {
	case len(e.Cores) == 0 && e.Stop:
		fmt.Fprintf(&b, "persistent program %s: every core finished step %d but %d core(s) did not end the launch within %s of the stop (watchdog): %v", e.Program, e.Step, len(e.Running), e.After, e.Running)
		return b.String()
	case len(e.Cores) == 0:
		fmt.Fprintf(&b, "persistent program %s: every core finished step %d but the step leader %v did not report it done within %s (watchdog; done word %d)", e.Program, e.Step, e.Running, e.After, e.Done)
		return b.String()
	}
	fmt.Fprintf(&b, "persistent program %s: step %d did not finish within %s (watchdog): %d core(s) stalled:", e.Program, e.Step, e.After, len(e.Cores))
	for _, c := range e.Cores {
		ps := make([]string, len(c.Procs))
		for i, p := range c.Procs {
			ps[i] = p.String()
		}
		fmt.Fprintf(&b, "\n  core %s NoC %s: %s; barriers reached: brisc %d, ncrisc %d, trisc0 %d, trisc1 %d, trisc2 %d; done words set: %s", c.Core, c.NoC, strings.Join(ps, ", "),
			c.Barriers[0], c.Barriers[1], c.Barriers[2], c.Barriers[3], c.Barriers[4], phaseRanges(c.Done))
		if len(c.CBs) > 0 {
			fmt.Fprintf(&b, "; CB streams %s", strings.Join(c.CBs, ", "))
		}
	}
	return b.String()
}

// phaseRanges prints sorted phase indices as ranges ("0-5, 7"; "none").
func phaseRanges(ps []int) string {
	if len(ps) == 0 {
		return "none"
	}
	var parts []string
	for i := 0; i < len(ps); {
		j := i
		for j+1 < len(ps) && ps[j+1] == ps[j]+1 {
			j++
		}
		if j == i {
			parts = append(parts, fmt.Sprint(ps[i]))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", ps[i], ps[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ", ")
}

// stall reads every core's finished and phase words (kir.StepProtocol);
// when every core finished the step, it names the cores still running
// after a stop or the step leader.
func (s *Session) stall(step int, stop bool) error {
	e := &PersistentStallError{Program: s.p.Name, Step: step, After: s.Timeout, Stop: stop}
	defer func() {
		if len(e.Cores) > 0 {
			return
		}
		if !stop {
			e.Running = []kir.Core{s.proto.Leader}
			e.Done, _ = s.Done()
			return
		}
		l := s.d.Chip.Layout
		for i, at := range s.xys {
			if v, err := s.d.Chip.Read32(at, uint64(l.Mailbox.Base)+uint64(l.Msg.GoMessages)); err == nil && uint8(v>>24) != l.RunMsgDone {
				e.Running = append(e.Running, s.cores[i])
			}
		}
	}()
	ps := s.p.Persist
	for i, at := range s.xys {
		fin, err := s.d.Chip.Read32(at, uint64(s.ctl+s.proto.Finished))
		if err != nil {
			return err
		}
		if int(fin) > step {
			continue
		}
		sc := StalledPhaseCore{Core: s.cores[i], NoC: at}
		for j, proc := range []string{"brisc", "ncrisc"} {
			v, err := s.d.Chip.Read32(at, uint64(s.ctl+s.proto.Phase[j]))
			if err != nil {
				return err
			}
			pp := ProcPhase{Proc: proc, Phase: -1}
			if p, ended, ok := kir.DecodePhaseWord(v); ok && p < len(ps.Phases) {
				pp = ProcPhase{Proc: proc, Phase: p, Name: ps.Phases[p].Name, Ended: ended}
			}
			sc.Procs = append(sc.Procs, pp)
		}
		block := make([]byte, len(ps.Phases)*kir.CtlStride)
		if err := s.d.Chip.Read(at, uint64(s.ctl), block); err != nil {
			return err
		}
		for q := range ps.Phases {
			if binary.LittleEndian.Uint32(block[ps.DoneWord(q):]) != 0 {
				sc.Done = append(sc.Done, q)
			}
		}
		for r := range sc.Barriers {
			if sc.Barriers[r], err = s.d.Chip.Read32(at, uint64(s.tables)+uint64(r*kir.CtlStride)); err != nil {
				return err
			}
		}
		// The stream counters of the CBs of the earliest phase its
		// data-movement RISCs are in.
		cur := -1
		for _, pp := range sc.Procs {
			if pp.Phase >= 0 && !pp.Ended && (cur < 0 || pp.Phase < cur) {
				cur = pp.Phase
			}
		}
		if cur >= 0 && s.layout != nil {
			l := s.d.Chip.Layout
			for _, cb := range ps.Phases[cur].CBs {
				if !kir.InRanges(cb.Cores, s.cores[i]) {
					continue
				}
				m := s.layout.CBMap[cur][cb.Index]
				base := uint64(l.StreamRegs) + uint64(m)*uint64(l.StreamStride)
				rx, err1 := s.d.Chip.Read32(at, base+4*uint64(l.TilesReceivedReg))
				ack, err2 := s.d.Chip.Read32(at, base+4*uint64(l.TilesAckedReg))
				if err1 == nil && err2 == nil {
					sc.CBs = append(sc.CBs, fmt.Sprintf("c_%d (%s, merged %d) received %d acked %d", cb.Index, cb.Name, m, rx&0xffff, ack&0xffff))
				}
			}
		}
		e.Cores = append(e.Cores, sc)
	}
	return e
}
