package chip

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/runtime/blackhole/access"
)

// XY is a NoC0 coordinate.
type XY struct{ X, Y int }

func (c XY) String() string { return fmt.Sprintf("(%d,%d)", c.X, c.Y) }

// Chip is an opened Blackhole.
type Chip struct {
	Dev    access.Device
	Layout *target.Layout
	Target *target.Target
	// WorkerX and WorkerY map logical worker columns and rows to NoC0
	// coordinates (harvested columns removed).
	WorkerX, WorkerY []int
	// DRAM maps DRAM bank b to the NoC0 endpoint workers use (translated).
	DRAM []XY
	// Harvested lists harvested Tensix NoC0 columns.
	Harvested []int
	// SimClockHz, when not zero, makes Poll's timeout simulated time: the
	// cycles Poll lets the chip advance, at this clock, not the host's
	// wall time. Open sets it (the target's clock) for ttsim, whose chip
	// runs only inside Advance and as fast as the host lets it: a bound
	// in wall time would depend on the host's load, and a loaded host
	// could time out a program that is merely slow to simulate.
	SimClockHz float64

	uc, mc access.Window
	ucCfg  *access.TLBConfig
}

// Blackhole NoC0 grid (blackhole_140_arch.yaml): Tensix columns, rows and
// the DRAM endpoints tcc's target uses per bank.
var (
	tensixColumns = []int{1, 2, 3, 4, 5, 6, 7, 10, 11, 12, 13, 14, 15, 16}
	tensixRows    = []int{2, 3, 4, 5, 6, 7, 8, 9, 10, 11}
)

// Open wraps d, which must be a Blackhole, with harvested Tensix columns
// harvested (NoC0 x coordinates).
func Open(d access.Device, harvested []int) (*Chip, error) {
	if err := access.CheckArch(d); err != nil {
		return nil, err
	}
	t := target.Blackhole()
	c := &Chip{Dev: d, Layout: target.BlackholeLayout(), Target: t, Harvested: harvested}
	if d.Info().Backend == "ttsim" {
		c.SimClockHz = t.ClockHz
	}
	skip := map[int]bool{}
	for _, x := range harvested {
		skip[x] = true
	}
	for _, x := range tensixColumns {
		if !skip[x] {
			c.WorkerX = append(c.WorkerX, x)
		}
	}
	c.WorkerY = append(c.WorkerY, tensixRows...)
	if len(c.WorkerX) < t.GridX || len(c.WorkerY) < t.GridY {
		return nil, fmt.Errorf("chip %s: %d usable Tensix columns after harvesting %v; tcc's %dx%d grid needs %d", d.Info().Path, len(c.WorkerX), harvested, t.GridX, t.GridY, t.GridX)
	}
	if t.DRAMBanks > len(dramNoC0) {
		return nil, fmt.Errorf("chip: target has %d DRAM banks, the coordinate table %d", t.DRAMBanks, len(dramNoC0))
	}
	c.DRAM = append(c.DRAM, dramNoC0[:t.DRAMBanks]...)
	var err error
	if c.uc, err = d.OpenWindow(access.Window2M); err != nil {
		return nil, err
	}
	if c.mc, err = d.OpenWindow(access.Window2M); err != nil {
		return nil, err
	}
	return c, nil
}

// Close releases the chip's windows and the device.
func (c *Chip) Close() error {
	c.uc.Close()
	c.mc.Close()
	return c.Dev.Close()
}

// Worker returns the NoC0 coordinate of logical worker core lc.
func (c *Chip) Worker(lc kir.Core) (XY, error) {
	if lc.X < 0 || lc.X >= c.Target.GridX || lc.Y < 0 || lc.Y >= c.Target.GridY {
		return XY{}, fmt.Errorf("logical core %s is outside the %dx%d worker grid", lc, c.Target.GridX, c.Target.GridY)
	}
	return XY{c.WorkerX[lc.X], c.WorkerY[lc.Y]}, nil
}

// span calls f for each 2 MiB-window piece of [addr, addr+n).
func span(addr uint64, n int, f func(base, off uint64, lo, hi int) error) error {
	for lo := 0; lo < n; {
		a := addr + uint64(lo)
		base := a &^ (access.Window2M - 1)
		hi := lo + int(min(uint64(n-lo), base+access.Window2M-a))
		if err := f(base, a-base, lo, hi); err != nil {
			return err
		}
		lo = hi
	}
	return nil
}

func (c *Chip) point(at XY, base uint64) error {
	cfg := access.TLBConfig{Addr: base, XEnd: at.X, YEnd: at.Y, Ordering: access.Strict}
	if c.ucCfg != nil && *c.ucCfg == cfg {
		return nil
	}
	if err := c.uc.Configure(cfg); err != nil {
		return err
	}
	c.ucCfg = &cfg
	return nil
}

// Write writes p at addr of NoC endpoint at.
func (c *Chip) Write(at XY, addr uint64, p []byte) error {
	return span(addr, len(p), func(base, off uint64, lo, hi int) error {
		if err := c.point(at, base); err != nil {
			return err
		}
		if err := c.uc.Write(off, p[lo:hi]); err != nil {
			return fmt.Errorf("write %s @%#x: %w", at, base+off, err)
		}
		return nil
	})
}

// Read reads len(p) bytes at addr of NoC endpoint at.
func (c *Chip) Read(at XY, addr uint64, p []byte) error {
	return span(addr, len(p), func(base, off uint64, lo, hi int) error {
		if err := c.point(at, base); err != nil {
			return err
		}
		if err := c.uc.Read(off, p[lo:hi]); err != nil {
			return fmt.Errorf("read %s @%#x: %w", at, base+off, err)
		}
		return nil
	})
}

// Multicast writes p at addr of every Tensix in the NoC0 rectangle from..to.
func (c *Chip) Multicast(from, to XY, addr uint64, p []byte) error {
	return span(addr, len(p), func(base, off uint64, lo, hi int) error {
		cfg := access.TLBConfig{Addr: base, XStart: from.X, YStart: from.Y, XEnd: to.X, YEnd: to.Y, Multicast: true, Ordering: access.Strict}
		if err := c.mc.Configure(cfg); err != nil {
			return err
		}
		return c.mc.Write(off, p[lo:hi])
	})
}

// Write32 writes one little-endian word.
func (c *Chip) Write32(at XY, addr uint64, v uint32) error {
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], v)
	return c.Write(at, addr, b[:])
}

// Read32 reads one little-endian word.
func (c *Chip) Read32(at XY, addr uint64) (uint32, error) {
	var b [4]byte
	if err := c.Read(at, addr, b[:]); err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(b[:]), nil
}

// SetReset writes the soft reset register of the Tensix at.
func (c *Chip) SetReset(at XY, v uint32) error {
	return c.Write32(at, uint64(c.Layout.SoftReset), v)
}

// Poll calls done until it reports true, advancing the chip between
// calls, and fails after timeout: of wall time on a card, of simulated
// time (SimClockHz: the cycles advanced) on a simulated chip; what names
// what is awaited.
func (c *Chip) Poll(timeout time.Duration, what func() string, done func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	limit := int64(timeout.Seconds() * c.SimClockHz)
	var cycles int64
	for {
		ok, err := done()
		if err != nil || ok {
			return err
		}
		if c.SimClockHz > 0 {
			if cycles >= limit {
				return &TimeoutError{What: what(), After: timeout, Cycles: cycles}
			}
		} else if time.Now().After(deadline) {
			return &TimeoutError{What: what(), After: timeout}
		}
		c.Dev.Advance(PollCycles)
		cycles += PollCycles
	}
}

// PollCycles is how many device cycles a poll loop lets pass between reads.
const PollCycles = 1000

// TimeoutError is a poll that did not finish in time.
type TimeoutError struct {
	What  string
	After time.Duration
	// Cycles, on a simulated chip, are the cycles it ran (After is then
	// simulated time); zero on a card.
	Cycles int64
}

func (e *TimeoutError) Error() string {
	if e.Cycles > 0 {
		return fmt.Sprintf("timed out after %s of simulated time (%d cycles): %s", e.After, e.Cycles, e.What)
	}
	return fmt.Sprintf("timed out after %s: %s", e.After, e.What)
}
