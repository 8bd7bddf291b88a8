package launch

import (
	"encoding/binary"
	"fmt"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/runtime/blackhole/chip"
)

// Persistent is a persistent program (kir.Persist) as launch needs it:
// every core's merged kernel images and, per phase it takes part in, the
// phase's tables.
type Persistent struct {
	Name string
	// Phases names every phase of the program, by index.
	Phases []string
	Cores  []PersistentCore
	// Tables, when not zero, is the L1 address of a region of TablesSize
	// bytes on every core (an L1 buffer the runtime allocated below the
	// control block) that holds the phase index and tables; zero puts them
	// in the kernel config ring after the images.
	Tables, TablesSize uint32
}

// PersistentCore is what one core runs: one merged kernel image per
// processor (nil where the processor idles) and the tables of its phases,
// in phase order.
type PersistentCore struct {
	Core     kir.Core
	Images   [5][]byte
	BRISCNoC int
	Phases   []PhaseTables
}

// PhaseTables are one phase's tables on one core, installed by
// tcc_phase_begin: per processor its runtime args (RTA) and common runtime
// args (CRTA: the merged kernel's own, then the phase's), and the local CB
// configs of the phase's CBs on the core (CB.Cores is not used). The three
// TRISCs of a compute kernel share one copy (their entries are TRISC0's).
type PhaseTables struct {
	Phase     int
	RTA, CRTA [5][]uint32
	CBs       []CB
}

// NoPhase marks a phase the core does not take part in, in its phase
// index table.
const NoPhase = 0xffffffff

// CoreLayout is where a persistent launch puts one core's data, as L1
// addresses:
//
//	TextAddr[proc] each merged kernel image, 16-byte aligned, in processor
//	               order from the kernel config ring's base (so an image's
//	               link address depends only on the images before it)
//	Index          the phase index table: one word per phase of the
//	               program, the L1 address of the core's record of that
//	               phase or NoPhase
//	Records[p]     per phase p of the core: per processor its RTA words,
//	               then its CRTA words (each 16-byte aligned; TRISC1 and
//	               TRISC2 use TRISC0's), then the CB table (CBConfigWords
//	               words per CB index up to the phase's highest on the
//	               core), as the launch blob holds them for one program
//
// The index and records follow the images in the ring, or fill the
// region Persistent.Tables. tcc_phase_begin(p) reads Index[p], points
// rta_l1_base and crta_l1_base at the record's tables and runs
// setup_local_cb_read_write_interfaces over its CB table (tt-metal does
// that once per launch from the blob). RingSize is the bytes written to
// the ring, TablesSize those written at Persistent.Tables (0 when in the
// ring).
type CoreLayout struct {
	TextAddr   [5]uint32
	Index      uint32
	Records    map[int]*PhaseRecord
	RingSize   uint32
	TablesSize uint32
}

// PhaseRecord is the L1 addresses of one phase's tables on one core.
type PhaseRecord struct {
	Addr      uint32
	RTA, CRTA [5]uint32
	CB        uint32
	CBCount   int
	CBMask    uint64
}

// PersistentPlan lays out every core of p (CoreLayout) and checks that
// it fits: the images the kernel config ring of l, the tables the ring
// after them or the region p.Tables. A core whose data does not fit is a
// *kir.RuleError (RuleL1Budget) naming the core, the phase whose tables
// overflow (or the images) and the bytes.
func PersistentPlan(p *Persistent, l *target.Layout) (map[kir.Core]*CoreLayout, error) {
	out := map[kir.Core]*CoreLayout{}
	ring := l.KernelConfig.Size
	for i := range p.Cores {
		pc := &p.Cores[i]
		c := pc.Core
		lay := &CoreLayout{Records: map[int]*PhaseRecord{}}
		off := uint32(0)
		for proc, img := range pc.Images {
			if img == nil {
				continue
			}
			lay.TextAddr[proc] = l.KernelConfig.Base + off
			off = align16(off + uint32(len(img)))
		}
		images := off
		fail := func(what string, need uint32) error {
			return &kir.RuleError{Rule: kir.RuleL1Budget, Program: p.Name, Core: &c, CB: kir.NoCB,
				Msg: fmt.Sprintf("%s end at byte %d of the persistent launch's data; the kernel config ring (%#x..%#x, %s) holds %d B (merged kernel images %d B)",
					what, need, l.KernelConfig.Base, l.KernelConfig.End(), target.TTMetalRelease, ring, images)}
		}
		if off > ring {
			return nil, fail(fmt.Sprintf("the merged kernel images (%s)", imageList(pc.Images)), off)
		}
		// The tables: base..limit.
		base, limit := l.KernelConfig.Base+off, l.KernelConfig.End()
		if p.Tables != 0 {
			base, limit = p.Tables, p.Tables+p.TablesSize
			fail = func(what string, need uint32) error {
				return &kir.RuleError{Rule: kir.RuleL1Budget, Program: p.Name, Core: &c, CB: kir.NoCB,
					Msg: fmt.Sprintf("%s end at byte %d of the phase tables' %d B at %#x", what, need, p.TablesSize, p.Tables)}
			}
		}
		at := base
		end := func() uint32 {
			if p.Tables != 0 {
				return at - base
			}
			return at - l.KernelConfig.Base
		}
		lay.Index = at
		at = align16(at + uint32(4*len(p.Phases)))
		if at > limit {
			return nil, fail(fmt.Sprintf("the phase index table (%d phases)", len(p.Phases)), end())
		}
		last := -1
		for j := range pc.Phases {
			pt := &pc.Phases[j]
			if pt.Phase <= last || pt.Phase >= len(p.Phases) {
				return nil, fmt.Errorf("persistent program %s: core %s: phase %d out of order or past the program's %d phases", p.Name, c, pt.Phase, len(p.Phases))
			}
			last = pt.Phase
			start := at
			rec := &PhaseRecord{Addr: at}
			for proc := range pt.RTA {
				if proc > TRISC0 {
					rec.RTA[proc], rec.CRTA[proc] = rec.RTA[TRISC0], rec.CRTA[TRISC0]
					continue
				}
				rec.RTA[proc] = at
				at = align16(at + uint32(4*len(pt.RTA[proc])))
				rec.CRTA[proc] = at
				at = align16(at + uint32(4*len(pt.CRTA[proc])))
			}
			rec.CB = at
			for _, cb := range pt.CBs {
				if cb.Index < 0 || cb.Index >= 64 {
					return nil, &kir.RuleError{Rule: kir.RuleCBCount, Program: p.Name, Core: &c, CB: cb.Index,
						Msg: fmt.Sprintf("phase %d (%s): CB index out of range", pt.Phase, p.Phases[pt.Phase])}
				}
				if rec.CBMask&(1<<cb.Index) != 0 {
					return nil, &kir.RuleError{Rule: kir.RuleCBCount, Program: p.Name, Core: &c, CB: cb.Index,
						Msg: fmt.Sprintf("phase %d (%s): CB configured twice on the core", pt.Phase, p.Phases[pt.Phase])}
				}
				rec.CBMask |= 1 << cb.Index
				rec.CBCount = max(rec.CBCount, cb.Index+1)
			}
			at = align16(at + uint32(rec.CBCount*4*l.CBConfigWords))
			if at > limit {
				return nil, fail(fmt.Sprintf("phase %d (%s): its tables (%d B: runtime args and a CB table of %d entries)",
					pt.Phase, p.Phases[pt.Phase], at-start, rec.CBCount), end())
			}
			lay.Records[pt.Phase] = rec
		}
		if len(pc.Phases) == 0 {
			return nil, fmt.Errorf("persistent program %s: core %s takes part in no phase", p.Name, c)
		}
		if p.Tables != 0 {
			lay.RingSize, lay.TablesSize = images, at-base
		} else {
			lay.RingSize = at - l.KernelConfig.Base
			if first := lay.Records[pc.Phases[0].Phase]; first.CB-l.KernelConfig.Base > 0xffff {
				return nil, fmt.Errorf("persistent program %s: core %s: the first phase's tables at %#x are out of reach of the launch message's 16-bit offsets", p.Name, c, first.RTA[BRISC])
			}
		}
		out[c] = lay
	}
	return out, nil
}

// PersistentTablesSize is the most bytes any core of p needs for its
// phase index and tables in a region of their own (Persistent.Tables).
func PersistentTablesSize(p *Persistent, l *target.Layout) (uint32, error) {
	q := *p
	q.Tables, q.TablesSize = l.L1Size, ^uint32(0)-l.L1Size
	lays, err := PersistentPlan(&q, l)
	if err != nil {
		return 0, err
	}
	n := uint32(0)
	for _, lay := range lays {
		n = max(n, lay.TablesSize)
	}
	return n, nil
}

func imageList(images [5][]byte) string {
	s := ""
	for i, img := range images {
		if img != nil {
			if s != "" {
				s += ", "
			}
			s += fmt.Sprintf("%s %d B", target.ProcessorNames[i], len(img))
		}
	}
	return s
}

// PersistentBlob returns core pc's data as lay places it: the bytes of its
// kernel config ring (from the base), the bytes of its tables region
// (nil when the tables are in the ring), and its launch message: host
// dispatch, the processors with an image enabled, the kernel text
// offsets, and, when the tables are in the ring, the runtime-arg offsets
// of its first phase (tcc_phase_begin moves the bases); no local CB is
// configured at launch (each phase installs its own) and no semaphore (a
// persistent program's live in its control block).
func PersistentBlob(pc *PersistentCore, lay *CoreLayout, nPhases int, l *target.Layout) (ring, tables, msg []byte, err error) {
	ring = make([]byte, lay.RingSize)
	tbase := l.KernelConfig.Base
	tbuf := ring
	if lay.TablesSize > 0 {
		tables = make([]byte, lay.TablesSize)
		tbase, tbuf = lay.Index, tables
	}
	put := func(addr uint32, words []uint32) {
		for i, w := range words {
			binary.LittleEndian.PutUint32(tbuf[addr-tbase+uint32(4*i):], w)
		}
	}
	var enables uint32
	for proc, img := range pc.Images {
		if img != nil {
			enables |= 1 << proc
			copy(ring[lay.TextAddr[proc]-l.KernelConfig.Base:], img)
		}
	}
	if enables == 0 {
		return nil, nil, nil, fmt.Errorf("core %s: no merged kernel runs on it", pc.Core)
	}
	index := make([]uint32, nPhases)
	for p := range index {
		index[p] = NoPhase
		if rec, ok := lay.Records[p]; ok {
			index[p] = rec.Addr
		}
	}
	put(lay.Index, index)
	for i := range pc.Phases {
		pt := &pc.Phases[i]
		rec := lay.Records[pt.Phase]
		for proc := range pt.RTA {
			if proc <= TRISC0 {
				put(rec.RTA[proc], pt.RTA[proc])
				put(rec.CRTA[proc], pt.CRTA[proc])
			}
		}
		for _, cb := range pt.CBs {
			size := uint32(cb.Pages * cb.PageSize)
			put(rec.CB+uint32(cb.Index*4*l.CBConfigWords), []uint32{cb.Addr, size, uint32(cb.Pages), uint32(cb.PageSize)})
		}
	}
	f := l.Launch
	msg = make([]byte, f.Size)
	binary.LittleEndian.PutUint32(msg[f.KernelConfigBase:], l.KernelConfig.Base)
	first := lay.Records[pc.Phases[0].Phase]
	for i := range 5 {
		if lay.TablesSize == 0 {
			binary.LittleEndian.PutUint16(msg[f.RTAOffset+4*i:], uint16(first.RTA[i]-l.KernelConfig.Base))
			binary.LittleEndian.PutUint16(msg[f.RTAOffset+4*i+2:], uint16(first.CRTA[i]-l.KernelConfig.Base))
		}
		if pc.Images[i] != nil {
			binary.LittleEndian.PutUint32(msg[f.KernelTextOffset+4*i:], lay.TextAddr[i]-l.KernelConfig.Base)
		}
	}
	msg[f.Mode] = l.DispatchModeHost
	msg[f.BRISCNoCID] = byte(pc.BRISCNoC)
	msg[f.MinRemoteCBStart] = 64
	binary.LittleEndian.PutUint32(msg[f.Enables:], enables)
	return ring, tables, msg, nil
}

// Start writes every core's blob and launch message (PersistentBlob) and
// sends the go signals; it does not wait: a persistent launch runs until
// its host stops it (the caller polls its control words, then Finished).
// xys are the cores' NoC coordinates, in p.Cores order.
func Start(c *chip.Chip, p *Persistent, lays map[kir.Core]*CoreLayout, xys []chip.XY) error {
	l := c.Layout
	mb := uint64(l.Mailbox.Base)
	for i := range p.Cores {
		pc := &p.Cores[i]
		lay := lays[pc.Core]
		ring, tables, msg, err := PersistentBlob(pc, lay, len(p.Phases), l)
		if err != nil {
			return fmt.Errorf("persistent program %s: %w", p.Name, err)
		}
		at := xys[i]
		if err := c.Write(at, uint64(l.KernelConfig.Base), ring); err != nil {
			return fmt.Errorf("persistent program %s: core %s: kernel config: %w", p.Name, pc.Core, err)
		}
		if tables != nil {
			if err := c.Write(at, uint64(lay.Index), tables); err != nil {
				return fmt.Errorf("persistent program %s: core %s: phase tables: %w", p.Name, pc.Core, err)
			}
		}
		if err := c.Write32(at, mb+uint64(l.Msg.LaunchRdPtr), 0); err != nil {
			return err
		}
		if err := c.Write(at, mb+uint64(l.Msg.Launch), msg); err != nil {
			return fmt.Errorf("persistent program %s: core %s: launch message: %w", p.Name, pc.Core, err)
		}
	}
	for i, at := range xys {
		if err := c.Write32(at, mb+uint64(l.Msg.GoMessages), uint32(l.RunMsgGo)<<24); err != nil {
			return fmt.Errorf("persistent program %s: core %s: go: %w", p.Name, p.Cores[i].Core, err)
		}
	}
	return nil
}
