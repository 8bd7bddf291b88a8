package fake

import (
	"encoding/binary"
	"time"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/target"
)

// Persistent puts the fake in persistent mode (SetPersistent): it plays a
// multi-step persistent program (kir.StepProtocol) launched once.
//
//   - A go signal boots the persistent kernel on the core: the core runs
//     (reports RUN_MSG_GO) until the host stops the launch.
//   - A host write of the leader's doorbell (Ctl+Proto.Doorbell) that
//     allows steps not played yet plays each: Step(c, s) writes the step's
//     effect (a test runs the built-in simulator for it), every running
//     core's finished word becomes s+1 and, Delay cycles later (one Delay
//     per step played by the write), the leader's done word s+1.
//   - With the doorbell's stop flag, once every step is played, the cores
//     report RUN_MSG_DONE Delay cycles after the last done word.
//   - A core HangIn made stop never finishes its step: its data-movement
//     RISCs' phase words show where it stopped, the done word stays, and
//     no later step is played.
type Persistent struct {
	// Ctl is the control block's L1 address on the worker cores.
	Ctl   uint32
	Proto kir.StepProtocol
	// Leader is the step leader's NoC coordinate.
	Leader XY
	Steps  int
	// Step plays step s's effect on the chip.
	Step func(c *Chip, s int) error
}

// persistState is the fake's side of a persistent launch.
type persistState struct {
	cfg     *Persistent
	running []XY // cores the launch booted, in go order
	played  int
	stuck   bool
	stopped bool
	// hangs by step: the cores that stop in it and where.
	hangs map[int][]hangAt
}

type hangAt struct {
	at    XY
	phase int
	procs []string
}

// SetPersistent puts the chip in persistent mode (see Persistent); nil
// leaves it.
func (c *Chip) SetPersistent(p *Persistent) {
	if p == nil {
		c.persist = nil
		return
	}
	c.persist = &persistState{cfg: p, hangs: map[int][]hangAt{}}
}

// HangIn makes the core at (x, y) stop in phase phase of step step of a
// persistent launch, its processors procs ("brisc", "ncrisc") in the
// phase and its others past the phase before.
func (c *Chip) HangIn(x, y, step, phase int, procs ...string) {
	if c.persist != nil {
		c.persist.hangs[step] = append(c.persist.hangs[step], hangAt{XY{x, y}, phase, procs})
	}
}

// StepTime is the wall time the fake spent playing persistent steps on
// doorbell writes (the Step hooks, e.g. a simulation, and the step's
// control words), which a measurement of the host's side subtracts.
func (c *Chip) StepTime() time.Duration { return c.stepTime }

// Played is the number of steps of the persistent launch played so far.
func (c *Chip) Played() int {
	if c.persist == nil {
		return 0
	}
	return c.persist.played
}

// persistLaunch starts the persistent kernel on core at.
func (c *Chip) persistLaunch(at XY) {
	c.persist.running = append(c.persist.running, at)
}

// persistWrite is called after every host write of [addr, addr+n) on
// Tensix at: a doorbell write plays the steps it allows.
func (c *Chip) persistWrite(at XY, addr uint64, n int) {
	ps := c.persist
	bell := uint64(ps.cfg.Ctl) + uint64(ps.cfg.Proto.Doorbell)
	if at != ps.cfg.Leader || addr > bell || bell+4 > addr+uint64(n) || len(ps.running) == 0 {
		return
	}
	t0 := time.Now()
	defer func() { c.stepTime += time.Since(t0) }()
	v := c.u32(at, uint32(bell))
	allowed := min(int(v&^kir.DoorbellStop), ps.cfg.Steps)
	if v&kir.DoorbellStop != 0 {
		allowed = ps.cfg.Steps
	}
	delay := 0
	for ; ps.played < allowed && !ps.stuck; ps.played++ {
		s := ps.played
		if hs := ps.hangs[s]; len(hs) > 0 {
			c.hangStep(s, hs)
			ps.stuck = true
			return
		}
		if ps.cfg.Step != nil {
			if err := ps.cfg.Step(c, s); err != nil {
				c.fail("persistent step %d: %v", s, err)
			}
		}
		for _, r := range ps.running {
			c.put32(r, ps.cfg.Ctl+ps.cfg.Proto.Finished, uint32(s+1))
		}
		delay += c.Delay
		done := uint32(s + 1)
		c.after(delay, func() { c.put32(ps.cfg.Leader, ps.cfg.Ctl+ps.cfg.Proto.Done, done) })
	}
	if v&kir.DoorbellStop != 0 && ps.played == ps.cfg.Steps && !ps.stuck && !ps.stopped {
		ps.stopped = true
		for _, r := range ps.running {
			c.after(delay+c.Delay, func() { c.setGo(r, c.layout.RunMsgDone) })
		}
	}
}

// hangStep plays step s with the cores of hs stopped in their phases: the
// other cores finish it, the stopped ones do not, nothing reports done.
func (c *Chip) hangStep(s int, hs []hangAt) {
	ps := c.persist
	stopped := map[XY]bool{}
	for _, h := range hs {
		stopped[h.at] = true
		for i, name := range [2]string{target.ProcessorNames[target.ProcBRISC], target.ProcessorNames[target.ProcNCRISC]} {
			w := uint32(0)
			if h.phase > 0 {
				w = kir.PhaseWord(h.phase-1, true)
			}
			for _, p := range h.procs {
				if p == name {
					w = kir.PhaseWord(h.phase, false)
				}
			}
			c.put32(h.at, ps.cfg.Ctl+ps.cfg.Proto.Phase[i], w)
		}
	}
	for _, r := range ps.running {
		if !stopped[r] {
			c.put32(r, ps.cfg.Ctl+ps.cfg.Proto.Finished, uint32(s+1))
		}
	}
}

func (c *Chip) put32(at XY, addr uint32, v uint32) {
	binary.LittleEndian.PutUint32(c.L1(at.X, at.Y)[addr:], v)
}

// after runs f once Clock has advanced delay more cycles (now, when 0).
func (c *Chip) after(delay int, f func()) {
	c.pending = append(c.pending, pendingDone{at: c.cycles + delay, fn: f})
	if delay == 0 {
		c.Clock(0)
	}
}

// PersistentConfig is the persistent mode's configuration, or nil.
func (c *Chip) PersistentConfig() *Persistent {
	if c.persist == nil {
		return nil
	}
	return c.persist.cfg
}
