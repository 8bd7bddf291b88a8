package launch

import (
	"encoding/binary"
	"fmt"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/runtime/blackhole/chip"
)

// Persistent is a persistent program (kir.Persist, printed by codegen/cpp
// and prepared by codegen/persist.WithTables) as launch needs it: the L1
// addresses of its buffers, which are the same on every worker core, and
// what every core gets.
type Persistent struct {
	Name string
	// Ctl is the control block's address (persist.ctl).
	Ctl uint32
	// Tables and TablesSize are the tables buffer's address and page
	// (kir.TablesBuffer); Text and TextSize the images buffer's
	// (kir.TextBuffer).
	Tables, TablesSize uint32
	Text, TextSize     uint32
	Cores              []PersistentCore
}

// PersistentCore is what one worker core runs: one merged kernel image per
// processor (nil where the processor idles) and its page of the tables
// buffer (kir.Tables.Page: barrier words, argument header, phase records,
// argument vectors), which the host writes as is.
type PersistentCore struct {
	Core     kir.Core
	Images   [5][]byte
	BRISCNoC int
	Page     []byte
}

// CoreLayout is where a persistent launch puts one core's data:
//
//	TextAddr[proc] each merged kernel image in the images buffer, back to
//	               back in processor order from its start, each rounded
//	               up to 16 bytes (kir.TextBuffer); the images are
//	               position-independent (jit.XIP) and execute in place
//	Ring[proc]     in the kernel config ring, the two common arguments
//	               of the core's merged kernel on proc (kir.RingCommonArgs:
//	               the control block's and the tables buffer's addresses,
//	               from which tcc_persist_init finds the kernel's argument
//	               vectors in the tables page); one 16-byte slot per
//	               argument slot (kir.TableArgSlot: the TRISCs share one)
//
// TextSize is the bytes of images, RingSize the bytes of the ring used.
type CoreLayout struct {
	TextAddr [5]uint32
	TextSize uint32
	Ring     [5]uint32
	RingSize uint32
}

// ringSlot is the bytes of one argument slot's ring arguments.
const ringSlot = 16

// PersistentPlan lays out every core of p (CoreLayout) and checks that it
// fits: its images the images buffer, its tables page the tables buffer.
// A core whose images do not fit is a *kir.RuleError (RuleL1Budget)
// naming the core, its images and the bytes.
func PersistentPlan(p *Persistent, l *target.Layout) (map[kir.Core]*CoreLayout, error) {
	out := map[kir.Core]*CoreLayout{}
	for i := range p.Cores {
		pc := &p.Cores[i]
		c := pc.Core
		lay := &CoreLayout{}
		off := uint32(0)
		for proc, img := range pc.Images {
			if img == nil {
				continue
			}
			lay.TextAddr[proc] = p.Text + off
			off = align16(off + uint32(len(img)))
			slot := uint32(kir.TableArgSlot(procKind(proc)))
			lay.Ring[proc] = l.KernelConfig.Base + ringSlot*slot
			lay.RingSize = max(lay.RingSize, ringSlot*(slot+1))
		}
		if off == 0 {
			return nil, fmt.Errorf("persistent program %s: core %s: no merged kernel runs on it", p.Name, c)
		}
		lay.TextSize = off
		if off > p.TextSize {
			return nil, &kir.RuleError{Rule: kir.RuleL1Budget, Program: p.Name, Core: &c, CB: kir.NoCB,
				Msg: fmt.Sprintf("the merged kernel images (%s) take %d B, %d B more than the %d B page of %s at %#x", imageList(pc.Images), off, off-p.TextSize, p.TextSize, kir.TextBuffer, p.Text)}
		}
		if len(pc.Page) == 0 || uint32(len(pc.Page)) > p.TablesSize {
			return nil, fmt.Errorf("persistent program %s: core %s: its tables page of %d B does not fit the %d B page of %s", p.Name, c, len(pc.Page), p.TablesSize, kir.TablesBuffer)
		}
		out[c] = lay
	}
	return out, nil
}

// procKind is the kir processor of launch processor proc.
func procKind(proc int) kir.Processor {
	switch proc {
	case BRISC:
		return kir.RISCV0
	case NCRISC:
		return kir.RISCV1
	}
	return kir.ComputeProc
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
// kernel config ring (from the base: each argument slot's control block
// and tables buffer addresses), of its images buffer (from its start) and
// its launch message: host dispatch, the processors with an image
// enabled, the kernel text offsets (of the images in the images buffer,
// from the ring's base), the common runtime argument offsets of the ring
// slots (no runtime argument lies in the ring: the kernels' vectors are
// in the tables page); no local CB is configured at launch (each phase
// installs its own) and no semaphore (a persistent program's live in its
// control block).
func PersistentBlob(p *Persistent, pc *PersistentCore, lay *CoreLayout, l *target.Layout) (ring, text, msg []byte, err error) {
	ring = make([]byte, lay.RingSize)
	text = make([]byte, lay.TextSize)
	var enables uint32
	f := l.Launch
	msg = make([]byte, f.Size)
	for proc, img := range pc.Images {
		if img == nil {
			continue
		}
		enables |= 1 << proc
		copy(text[lay.TextAddr[proc]-p.Text:], img)
		at := lay.Ring[proc] - l.KernelConfig.Base
		binary.LittleEndian.PutUint32(ring[at:], p.Ctl)
		binary.LittleEndian.PutUint32(ring[at+4:], p.Tables)
		binary.LittleEndian.PutUint16(msg[f.RTAOffset+4*proc:], uint16(at))
		binary.LittleEndian.PutUint16(msg[f.RTAOffset+4*proc+2:], uint16(at))
		binary.LittleEndian.PutUint32(msg[f.KernelTextOffset+4*proc:], lay.TextAddr[proc]-l.KernelConfig.Base)
	}
	if enables == 0 {
		return nil, nil, nil, fmt.Errorf("core %s: no merged kernel runs on it", pc.Core)
	}
	binary.LittleEndian.PutUint32(msg[f.KernelConfigBase:], l.KernelConfig.Base)
	msg[f.Mode] = l.DispatchModeHost
	msg[f.BRISCNoCID] = byte(pc.BRISCNoC)
	msg[f.MinRemoteCBStart] = 64
	binary.LittleEndian.PutUint32(msg[f.Enables:], enables)
	return ring, text, msg, nil
}

// Start writes every core's ring, images, tables page and launch message
// (PersistentBlob) and
// sends the go signals; it does not wait: a persistent launch runs until
// its host stops it (the caller polls its control words, then Finished).
// xys are the cores' NoC coordinates, in p.Cores order.
func Start(c *chip.Chip, p *Persistent, lays map[kir.Core]*CoreLayout, xys []chip.XY) error {
	l := c.Layout
	mb := uint64(l.Mailbox.Base)
	for i := range p.Cores {
		pc := &p.Cores[i]
		lay := lays[pc.Core]
		ring, text, msg, err := PersistentBlob(p, pc, lay, l)
		if err != nil {
			return fmt.Errorf("persistent program %s: %w", p.Name, err)
		}
		at := xys[i]
		if err := c.Write(at, uint64(l.KernelConfig.Base), ring); err != nil {
			return fmt.Errorf("persistent program %s: core %s: kernel config: %w", p.Name, pc.Core, err)
		}
		if err := c.Write(at, uint64(p.Text), text); err != nil {
			return fmt.Errorf("persistent program %s: core %s: %s: %w", p.Name, pc.Core, kir.TextBuffer, err)
		}
		if err := c.Write(at, uint64(p.Tables), pc.Page); err != nil {
			return fmt.Errorf("persistent program %s: core %s: %s: %w", p.Name, pc.Core, kir.TablesBuffer, err)
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
