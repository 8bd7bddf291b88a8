package launch

import (
	"encoding/binary"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/runtime/blackhole/chip"
)

// Processor indices (target.ProcBRISC ..., named by target.ProcessorNames).
const (
	BRISC  = target.ProcBRISC
	NCRISC = target.ProcNCRISC
	TRISC0 = target.ProcTRISC0
	TRISC1 = target.ProcTRISC1
	TRISC2 = target.ProcTRISC2
)

// Kernel is what one processor runs on some cores of a program.
type Kernel struct {
	Name string
	// RTA are the runtime args per core: its keys are the cores the kernel
	// runs on (a kernel with no RTA runs on every core of the program,
	// which only the processor's one kernel may do). CRTA are the common
	// runtime args.
	RTA  map[kir.Core][]uint32
	CRTA []uint32
	// Image is the linked execute-in-place image.
	Image []byte
	// NoC is the NoC index a BRISC kernel uses (the launch message's
	// brisc_noc_id on its cores).
	NoC int
}

// CB is one circular buffer on a set of cores.
type CB struct {
	Index, PageSize, Pages int
	Addr                   uint32
	Cores                  []kir.Core
}

// Semaphore is one semaphore with its initial value on a set of cores.
type Semaphore struct {
	ID      int
	Initial uint32
	Cores   []kir.Core
}

// Program is one device program as launch needs it.
type Program struct {
	Name  string
	Cores []kir.Core
	// Kernels are the kernels of each processor; a core runs at most one
	// kernel per processor (the one whose RTA holds it), so a processor's
	// kernels run on disjoint cores, as a tt-metal program's kernels each
	// have their own core range. Empty where the processor idles.
	Kernels    [5][]*Kernel
	CBs        []CB
	Semaphores []Semaphore
	// CoreType is the programmable core type the program's cores are
	// (CoreTensix, or CoreActiveEth for an ethernet launch): the index of
	// their own entries in the launch message's kernel_config_base[] and
	// sem_offset[] arrays, at Layout.Launch.KernelConfigBase and SemOffset.
	CoreType int
	// Peers are the other core types' parts of the same program (a
	// collective's workers for its ethernet cores and the other way
	// round): every launch message also gets their kernel_config_base and
	// sem_offset, as tt-metal's dispatch writes every core type's into
	// every launch message, so that get_semaphore<type>(id) on one core
	// type finds a semaphore on the other (firmware_config_init sets
	// sem_l1_base[type] from them).
	Peers []Peer
}

// Programmable core types (tt-metal's ProgrammableCoreType): the indices
// of the launch message's kernel_config_base[] and sem_offset[] arrays.
const (
	CoreTensix    = 0
	CoreActiveEth = 1
)

// Peer is where another core type's part of a program has its kernel
// config ring and semaphores.
type Peer struct {
	CoreType         int
	KernelConfigBase uint32
	// SemOffset is the other part's Plan.Sem.
	SemOffset uint32
}

// runsOn reports whether kernel k runs on core c.
func (k *Kernel) runsOn(c kir.Core) bool {
	if k == nil {
		return false
	}
	if len(k.RTA) == 0 {
		return true
	}
	_, ok := k.RTA[c]
	return ok
}

// kernelOn returns the kernel processor proc runs on core c, or nil.
func (p *Program) kernelOn(proc int, c kir.Core) *Kernel {
	for _, k := range p.Kernels[proc] {
		if k.runsOn(c) {
			return k
		}
	}
	return nil
}

// check returns an error naming the program, core and processor when two
// kernels of one processor run on one core.
func (p *Program) check() error {
	for proc, ks := range p.Kernels {
		if len(ks) < 2 {
			continue
		}
		for _, c := range p.Cores {
			var on []string
			for _, k := range ks {
				if k.runsOn(c) {
					on = append(on, k.Name)
				}
			}
			if len(on) > 1 {
				return fmt.Errorf("program %s: core %s runs two kernels on %s (%s); a core runs at most one kernel per processor", p.Name, c, target.ProcessorNames[proc], strings.Join(on, ", "))
			}
		}
	}
	return nil
}

// Plan is the kernel config blob layout shared by all cores of a program.
type Plan struct {
	RTA, CRTA [5]uint32 // offsets (bytes from the ring base)
	RTAWords  [5]int
	CRTAWords [5]int
	Sem       uint32
	SemCount  int
	CB        uint32
	CBCount   int // CB config entries (highest index + 1)
	Text      [5]uint32
	// TextSize is the room of each processor's image: the largest of its
	// kernels' images.
	TextSize [5]uint32
	Size     uint32
	// TextAddr is the L1 address each processor's image is linked at.
	TextAddr [5]uint32
}

func align16(v uint32) uint32 { return (v + 15) &^ 15 }

// MakePlan lays out p's kernel config blob in l's kernel config ring. A
// processor with several kernels (on disjoint cores) gets the room of the
// largest: every core's blob has the same layout. Two kernels of one
// processor on one core are an error.
func MakePlan(p *Program, l *target.Layout) (*Plan, error) {
	if err := p.check(); err != nil {
		return nil, err
	}
	pl := &Plan{}
	off := uint32(0)
	for i, ks := range p.Kernels {
		if len(ks) == 0 {
			continue
		}
		for _, k := range ks {
			for _, a := range k.RTA {
				pl.RTAWords[i] = max(pl.RTAWords[i], len(a))
			}
			pl.CRTAWords[i] = max(pl.CRTAWords[i], len(k.CRTA))
			pl.TextSize[i] = max(pl.TextSize[i], uint32(len(k.Image)))
		}
		pl.RTA[i] = off
		off = align16(off + uint32(4*pl.RTAWords[i]))
		pl.CRTA[i] = off
		off = align16(off + uint32(4*pl.CRTAWords[i]))
	}
	pl.Sem = off
	for _, s := range p.Semaphores {
		pl.SemCount = max(pl.SemCount, s.ID+1)
	}
	off = align16(off + uint32(pl.SemCount*l.SemaphoreStride))
	pl.CB = off
	for _, cb := range p.CBs {
		pl.CBCount = max(pl.CBCount, cb.Index+1)
	}
	off = align16(off + uint32(pl.CBCount*4*l.CBConfigWords))
	for i, ks := range p.Kernels {
		if len(ks) == 0 {
			continue
		}
		pl.Text[i] = off
		pl.TextAddr[i] = l.KernelConfig.Base + off
		off = align16(off + pl.TextSize[i])
	}
	pl.Size = off
	if off > l.KernelConfig.Size {
		return nil, fmt.Errorf("program %s: kernel config blob of %d B (runtime args, semaphores, CB configs and kernel images of %s) exceeds the %d B kernel config ring of %s", p.Name, off, imageSizes(p), l.KernelConfig.Size, target.TTMetalRelease)
	}
	if pl.RTA[BRISC] > 0xffff || off > 0xffff+uint32(l.KernelConfig.Size) {
		return nil, fmt.Errorf("program %s: blob offsets overflow the launch message's 16-bit fields", p.Name)
	}
	return pl, nil
}

func imageSizes(p *Program) string {
	var parts []string
	for i, ks := range p.Kernels {
		for _, k := range ks {
			parts = append(parts, fmt.Sprintf("%s %d B", target.ProcessorNames[i], len(k.Image)))
		}
	}
	return strings.Join(parts, ", ")
}

// Blob returns the kernel config blob of core c and its launch message:
// for each processor the image and args of its kernel on c.
func Blob(p *Program, pl *Plan, c kir.Core, l *target.Layout) (blob, msg []byte, err error) {
	blob = make([]byte, pl.Size)
	put := func(off uint32, words []uint32) {
		for i, w := range words {
			binary.LittleEndian.PutUint32(blob[off+uint32(4*i):], w)
		}
	}
	var enables uint32
	brisc := 0
	for i := range p.Kernels {
		k := p.kernelOn(i, c)
		if k == nil {
			continue
		}
		if uint32(len(k.Image)) > pl.TextSize[i] || len(k.RTA[c]) > pl.RTAWords[i] || len(k.CRTA) > pl.CRTAWords[i] {
			return nil, nil, fmt.Errorf("program %s: %s kernel %s (image %d B, %d args, %d common args) outgrew the plan (%d B, %d, %d)", p.Name, target.ProcessorNames[i], k.Name, len(k.Image), len(k.RTA[c]), len(k.CRTA), pl.TextSize[i], pl.RTAWords[i], pl.CRTAWords[i])
		}
		enables |= 1 << i
		put(pl.RTA[i], k.RTA[c])
		put(pl.CRTA[i], k.CRTA)
		copy(blob[pl.Text[i]:], k.Image)
		if i == BRISC {
			brisc = k.NoC
		}
	}
	if enables == 0 {
		return nil, nil, fmt.Errorf("program %s: no kernel runs on core %s", p.Name, c)
	}
	for _, s := range p.Semaphores {
		if onCore(s.Cores, c) {
			binary.LittleEndian.PutUint32(blob[pl.Sem+uint32(s.ID*l.SemaphoreStride):], s.Initial)
		}
	}
	var mask uint64
	for _, cb := range p.CBs {
		if !onCore(cb.Cores, c) {
			continue
		}
		if mask&(1<<cb.Index) != 0 {
			return nil, nil, fmt.Errorf("program %s: CB c_%d configured twice on core %s", p.Name, cb.Index, c)
		}
		mask |= 1 << cb.Index
		size := uint32(cb.Pages * cb.PageSize)
		put(pl.CB+uint32(cb.Index*4*l.CBConfigWords), []uint32{cb.Addr, size, uint32(cb.Pages), uint32(cb.PageSize)})
	}
	f := l.Launch
	msg = make([]byte, f.Size)
	binary.LittleEndian.PutUint32(msg[f.KernelConfigBase:], l.KernelConfig.Base)
	binary.LittleEndian.PutUint16(msg[f.SemOffset:], uint16(pl.Sem))
	for _, q := range p.Peers {
		d := q.CoreType - p.CoreType
		if d == 0 || q.CoreType < 0 || q.CoreType >= max(l.ProgrammableCoreTypes, CoreActiveEth+1) {
			return nil, nil, fmt.Errorf("program %s: peer core type %d (own %d; the release has %d)", p.Name, q.CoreType, p.CoreType, l.ProgrammableCoreTypes)
		}
		binary.LittleEndian.PutUint32(msg[f.KernelConfigBase+4*d:], q.KernelConfigBase)
		binary.LittleEndian.PutUint16(msg[f.SemOffset+2*d:], uint16(q.SemOffset))
	}
	binary.LittleEndian.PutUint16(msg[f.LocalCBOffset:], uint16(pl.CB))
	binary.LittleEndian.PutUint16(msg[f.RemoteCBOffset:], uint16(pl.CB+uint32(pl.CBCount*4*l.CBConfigWords)))
	for i := range 5 {
		binary.LittleEndian.PutUint16(msg[f.RTAOffset+4*i:], uint16(pl.RTA[i]))
		binary.LittleEndian.PutUint16(msg[f.RTAOffset+4*i+2:], uint16(pl.CRTA[i]))
		binary.LittleEndian.PutUint32(msg[f.KernelTextOffset+4*i:], pl.Text[i])
	}
	msg[f.Mode] = l.DispatchModeHost
	binary.LittleEndian.PutUint64(msg[f.LocalCBMask:], mask)
	msg[f.BRISCNoCID] = byte(brisc)
	msg[f.MinRemoteCBStart] = 64 // NUM_CIRCULAR_BUFFERS: no remote CBs
	binary.LittleEndian.PutUint32(msg[f.Enables:], enables)
	return blob, msg, nil
}

func onCore(cores []kir.Core, c kir.Core) bool {
	for _, x := range cores {
		if x == c {
			return true
		}
	}
	return false
}

// Run launches p (laid out by pl) on its cores, each core with its own
// kernels' images and args, and waits up to timeout for all of them to
// finish. A core that does not is reported as a *StallError.
func Run(c *chip.Chip, p *Program, pl *Plan, timeout time.Duration) error {
	x, err := StartOn(c, p, pl, c.Layout, c.Worker)
	if err != nil {
		return err
	}
	return x.Wait(timeout)
}

// Launched is a program started on a chip's cores (StartOn), not yet waited
// for.
type Launched struct {
	c   *chip.Chip
	p   *Program
	l   *target.Layout
	xys []chip.XY
}

// StartOn writes p's kernel config blob and launch message (layout l) to
// each of its cores, at the NoC coordinates at gives each logical core,
// and then sends every core its go message. It does not wait: Wait does.
// Programs that must run together on several chips (collectives) are
// started on each and then waited for.
func StartOn(c *chip.Chip, p *Program, pl *Plan, l *target.Layout, at func(kir.Core) (chip.XY, error)) (*Launched, error) {
	x, err := WriteOn(c, p, pl, l, at)
	if err != nil {
		return nil, err
	}
	return x, x.Go()
}

// WriteOn writes p's kernel config blob and launch message (layout l) to
// each of its cores, at the NoC coordinates at gives each logical core,
// and sends no go message: Go does. A program whose parts signal each
// other (a collective's workers and ethernet cores, on every chip) is
// written everywhere first, so that no core runs before every core it
// signals holds its semaphores' initial values.
func WriteOn(c *chip.Chip, p *Program, pl *Plan, l *target.Layout, at func(kir.Core) (chip.XY, error)) (*Launched, error) {
	mb := uint64(l.Mailbox.Base)
	xys := make([]chip.XY, len(p.Cores))
	for i, lc := range p.Cores {
		xy, err := at(lc)
		if err != nil {
			return nil, fmt.Errorf("program %s: %w", p.Name, err)
		}
		xys[i] = xy
		blob, msg, err := Blob(p, pl, lc, l)
		if err != nil {
			return nil, err
		}
		if err := c.Write(xy, uint64(l.KernelConfig.Base), blob); err != nil {
			return nil, fmt.Errorf("program %s: core %s: kernel config: %w", p.Name, lc, err)
		}
		if err := c.Write32(xy, mb+uint64(l.Msg.LaunchRdPtr), 0); err != nil {
			return nil, err
		}
		if err := c.Write(xy, mb+uint64(l.Msg.Launch), msg); err != nil {
			return nil, fmt.Errorf("program %s: core %s: launch message: %w", p.Name, lc, err)
		}
	}
	return &Launched{c: c, p: p, l: l, xys: xys}, nil
}

// Go sends every core of the written program (WriteOn) its go message.
func (x *Launched) Go() error {
	goAddr := uint64(x.l.Mailbox.Base) + uint64(x.l.Msg.GoMessages)
	for i, xy := range x.xys {
		if err := x.c.Write32(xy, goAddr, uint32(x.l.RunMsgGo)<<24); err != nil {
			return fmt.Errorf("program %s: core %s: go: %w", x.p.Name, x.p.Cores[i], err)
		}
	}
	return nil
}

// Wait waits up to timeout for every core of the started program to
// report done; a core that does not is reported as a *StallError.
func (x *Launched) Wait(timeout time.Duration) error {
	c, l := x.c, x.l
	goAddr := uint64(l.Mailbox.Base) + uint64(l.Msg.GoMessages)
	pending := map[int]bool{}
	for i := range x.xys {
		pending[i] = true
	}
	err := c.Poll(timeout, func() string { return "" }, func() (bool, error) {
		for i := range pending {
			v, err := c.Read32(x.xys[i], goAddr)
			if err != nil {
				return false, err
			}
			if uint8(v>>24) == l.RunMsgDone {
				delete(pending, i)
			}
		}
		return len(pending) == 0, nil
	})
	if _, ok := err.(*chip.TimeoutError); ok {
		return stall(c, l, x.p, x.xys, pending, timeout)
	}
	return err
}

// StallError is the watchdog's report of a program that did not finish.
type StallError struct {
	Program string
	After   time.Duration
	// Simulated says After is simulated time (a simulated chip's cycles,
	// chip.Chip.SimClockHz), not wall time.
	Simulated bool
	Cores     []StalledCore
}

// StalledCore is one core that did not report done.
type StalledCore struct {
	Core    kir.Core
	NoC     chip.XY
	Running []string // processors still running
	// CBs are "c_<i> received R acked A" for the program's CBs on the core.
	CBs []string
}

func (e *StallError) Error() string {
	var b strings.Builder
	after := e.After.String()
	if e.Simulated {
		after += " of simulated time"
	}
	fmt.Fprintf(&b, "program %s: %d core(s) did not finish within %s (watchdog):", e.Program, len(e.Cores), after)
	for _, c := range e.Cores {
		run := "brisc"
		if len(c.Running) > 0 {
			run = strings.Join(c.Running, ", ")
		}
		fmt.Fprintf(&b, "\n  core %s NoC %s: still running %s", c.Core, c.NoC, run)
		if len(c.CBs) > 0 {
			fmt.Fprintf(&b, "; CB streams %s", strings.Join(c.CBs, ", "))
		}
	}
	return b.String()
}

func stall(c *chip.Chip, l *target.Layout, p *Program, xys []chip.XY, pending map[int]bool, timeout time.Duration) error {
	e := &StallError{Program: p.Name, After: timeout, Simulated: c.SimClockHz > 0}
	var idx []int
	for i := range pending {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	for _, i := range idx {
		sc := StalledCore{Core: p.Cores[i], NoC: xys[i]}
		var sync [4]byte
		if err := c.Read(xys[i], uint64(l.Mailbox.Base)+uint64(l.Msg.SubordinateSync), sync[:]); err == nil {
			for j, s := range sync {
				if s != 0 && p.kernelOn(j+1, p.Cores[i]) != nil {
					sc.Running = append(sc.Running, target.ProcessorNames[j+1])
				}
			}
		}
		for _, cb := range p.CBs {
			if !onCore(cb.Cores, p.Cores[i]) {
				continue
			}
			base := uint64(l.StreamRegs) + uint64(cb.Index)*uint64(l.StreamStride)
			rx, err1 := c.Read32(xys[i], base+4*uint64(l.TilesReceivedReg))
			ack, err2 := c.Read32(xys[i], base+4*uint64(l.TilesAckedReg))
			if err1 == nil && err2 == nil {
				sc.CBs = append(sc.CBs, fmt.Sprintf("c_%d received %d acked %d", cb.Index, rx&0xffff, ack&0xffff))
			}
		}
		e.Cores = append(e.Cores, sc)
	}
	return e
}
