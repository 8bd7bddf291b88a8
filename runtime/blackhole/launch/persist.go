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
// configs of the phase's CBs on the core (CB.Cores is not used).
type PhaseTables struct {
	Phase     int
	RTA, CRTA [5][]uint32
	CBs       []CB
}

// NoPhase marks a phase the core does not take part in, in its phase
// index table.
const NoPhase = 0xffffffff

// CoreLayout is where a persistent launch puts one core's data in its
// kernel config ring, offsets from the ring's base:
//
//	Text[proc]   each merged kernel image, 16-byte aligned, in processor
//	             order (so an image's link address, TextAddr, depends only
//	             on the images before it)
//	Index        the phase index table: one word per phase of the
//	             program, the offset of the core's record of that phase or
//	             NoPhase
//	Records[p]   per phase p of the core: per processor its RTA words,
//	             then its CRTA words (each 16-byte aligned), then the CB
//	             table (CBConfigWords words per CB index up to the phase's
//	             highest on the core), as the launch blob holds them for one
//	             program
//
// tcc_phase_begin(p) reads Index[p], points rta_l1_base and crta_l1_base
// at the record's tables and runs setup_local_cb_read_write_interfaces
// over its CB table (tt-metal does that once per launch from the blob).
type CoreLayout struct {
	Text     [5]uint32
	TextAddr [5]uint32
	Index    uint32
	Records  map[int]*PhaseRecord
	Size     uint32
}

// PhaseRecord is the offsets of one phase's tables on one core.
type PhaseRecord struct {
	Offset    uint32
	RTA, CRTA [5]uint32
	CB        uint32
	CBCount   int
	CBMask    uint64
}

// PersistentPlan lays out every core of p (CoreLayout) and checks that
// it fits the kernel config ring of l: a core whose images and tables do
// not fit is a *kir.RuleError (RuleL1Budget) naming the core, the phase
// whose tables overflow (or the images) and the bytes.
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
			lay.Text[proc] = off
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
		lay.Index = off
		off = align16(off + uint32(4*len(p.Phases)))
		if off > ring {
			return nil, fail(fmt.Sprintf("the phase index table (%d phases)", len(p.Phases)), off)
		}
		last := -1
		for j := range pc.Phases {
			pt := &pc.Phases[j]
			if pt.Phase <= last || pt.Phase >= len(p.Phases) {
				return nil, fmt.Errorf("persistent program %s: core %s: phase %d out of order or past the program's %d phases", p.Name, c, pt.Phase, len(p.Phases))
			}
			last = pt.Phase
			start := off
			rec := &PhaseRecord{Offset: off}
			for proc := range pt.RTA {
				rec.RTA[proc] = off
				off = align16(off + uint32(4*len(pt.RTA[proc])))
				rec.CRTA[proc] = off
				off = align16(off + uint32(4*len(pt.CRTA[proc])))
			}
			rec.CB = off
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
			off = align16(off + uint32(rec.CBCount*4*l.CBConfigWords))
			if off > ring {
				return nil, fail(fmt.Sprintf("phase %d (%s): its tables (%d B: runtime args and a CB table of %d entries)",
					pt.Phase, p.Phases[pt.Phase], off-start, rec.CBCount), off)
			}
			lay.Records[pt.Phase] = rec
		}
		if len(pc.Phases) == 0 {
			return nil, fmt.Errorf("persistent program %s: core %s takes part in no phase", p.Name, c)
		}
		if rec := lay.Records[pc.Phases[0].Phase]; rec.RTA[BRISC] > 0xffff || off > 0xffff+ring {
			return nil, fmt.Errorf("persistent program %s: core %s: offsets overflow the launch message's 16-bit fields", p.Name, c)
		}
		lay.Size = off
		out[c] = lay
	}
	return out, nil
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

// PersistentBlob returns core pc's data for its kernel config ring, laid
// out as lay says, and its launch message: host dispatch, the processors
// with an image enabled, the kernel text offsets, and the runtime-arg
// offsets of its first phase (tcc_phase_begin moves them); no local CB is
// configured at launch (each phase installs its own) and no semaphore
// (a persistent program's live in its control block).
func PersistentBlob(pc *PersistentCore, lay *CoreLayout, nPhases int, l *target.Layout) (blob, msg []byte, err error) {
	blob = make([]byte, lay.Size)
	put := func(off uint32, words []uint32) {
		for i, w := range words {
			binary.LittleEndian.PutUint32(blob[off+uint32(4*i):], w)
		}
	}
	var enables uint32
	for proc, img := range pc.Images {
		if img != nil {
			enables |= 1 << proc
			copy(blob[lay.Text[proc]:], img)
		}
	}
	if enables == 0 {
		return nil, nil, fmt.Errorf("core %s: no merged kernel runs on it", pc.Core)
	}
	for p := 0; p < nPhases; p++ {
		v := uint32(NoPhase)
		if rec, ok := lay.Records[p]; ok {
			v = rec.Offset
		}
		binary.LittleEndian.PutUint32(blob[lay.Index+uint32(4*p):], v)
	}
	for i := range pc.Phases {
		pt := &pc.Phases[i]
		rec := lay.Records[pt.Phase]
		for proc := range pt.RTA {
			put(rec.RTA[proc], pt.RTA[proc])
			put(rec.CRTA[proc], pt.CRTA[proc])
		}
		for _, cb := range pt.CBs {
			size := uint32(cb.Pages * cb.PageSize)
			put(rec.CB+uint32(cb.Index*4*l.CBConfigWords), []uint32{cb.Addr, size, uint32(cb.Pages), uint32(cb.PageSize)})
		}
	}
	first := lay.Records[pc.Phases[0].Phase]
	f := l.Launch
	msg = make([]byte, f.Size)
	binary.LittleEndian.PutUint32(msg[f.KernelConfigBase:], l.KernelConfig.Base)
	for i := range 5 {
		binary.LittleEndian.PutUint16(msg[f.RTAOffset+4*i:], uint16(first.RTA[i]))
		binary.LittleEndian.PutUint16(msg[f.RTAOffset+4*i+2:], uint16(first.CRTA[i]))
		binary.LittleEndian.PutUint32(msg[f.KernelTextOffset+4*i:], lay.Text[i])
	}
	msg[f.Mode] = l.DispatchModeHost
	msg[f.BRISCNoCID] = byte(pc.BRISCNoC)
	msg[f.MinRemoteCBStart] = 64
	binary.LittleEndian.PutUint32(msg[f.Enables:], enables)
	return blob, msg, nil
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
		blob, msg, err := PersistentBlob(pc, lays[pc.Core], len(p.Phases), l)
		if err != nil {
			return fmt.Errorf("persistent program %s: %w", p.Name, err)
		}
		at := xys[i]
		if err := c.Write(at, uint64(l.KernelConfig.Base), blob); err != nil {
			return fmt.Errorf("persistent program %s: core %s: kernel config: %w", p.Name, pc.Core, err)
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
