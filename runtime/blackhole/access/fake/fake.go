package fake

import (
	"encoding/binary"
	"fmt"
	"sort"
	"time"

	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/runtime/blackhole/access"
)

// XY is a NoC0 coordinate.
type XY struct{ X, Y int }

// Chip is a fake Blackhole. The zero value is not usable; call New.
type Chip struct {
	info   access.Info
	layout *target.Layout
	t      *target.Target
	regs   map[int][]byte // window index -> config register bytes
	l1     map[XY][]byte
	local  map[XY]map[uint32]uint32 // core-local registers (>= LocalBase)
	dram   map[XY]map[uint64][]byte // 64 KiB chunks
	worker map[XY]bool
	isDRAM map[XY]bool
	isEth  map[XY]bool
	cycles int

	// Program is called for every launch, before the core reports done;
	// it may read and write the chip (e.g. to play a kernel's effect).
	Program func(c *Chip, l *Launch) error
	// Delay is the number of Clock cycles between a go signal and done.
	Delay int
	// Launches and Boots record what the host did, in order.
	Launches []*Launch
	// EthLaunches are the go messages ethernet cores got, in order
	// (eth.go).
	EthLaunches []EthLaunch
	// EthProgram, when set, is called for every ethernet launch before
	// the core reports done.
	EthProgram func(c *Chip, l EthLaunch) error
	// CardEth makes the ethernet cores play a card's (eth.go): the base
	// firmware's mailbox starts the active-erisc firmware the host loaded,
	// and launches are go messages in the pinned release's layout. Unset,
	// they play ttsim's bh_x2 (no firmware; RUN_MSG_GO at EthGo launches).
	CardEth bool
	// EthBoots are the ethernet cores whose active-erisc firmware the
	// host started (CardEth), in order.
	EthBoots []XY
	Boots    []XY
	// Errors records protocol violations the fake saw (a go signal to a
	// core that never booted, a bad jal, a launch message it cannot decode).
	Errors []error

	hang    map[XY][]string // processors that never finish
	dead    map[XY]bool     // cores whose firmware never boots
	pending []pendingDone
	closed  bool
	// persist is the persistent mode's state (persist.go), or nil.
	persist  *persistState
	stepTime time.Duration
}

// pendingDone is a core's done signal, or f, due at cycle at.
type pendingDone struct {
	at   int
	core XY
	fn   func()
}

// New returns a fake Blackhole with every Tensix and DRAM endpoint of t's
// NoC grid.
func New() *Chip {
	t := target.Blackhole()
	c := &Chip{
		info:   access.Info{Backend: "fake", Path: "fake:0", VendorID: access.VendorTenstorrent, DeviceID: access.DeviceBlackhole},
		layout: target.BlackholeLayout(),
		t:      t,
		regs:   map[int][]byte{},
		l1:     map[XY][]byte{},
		local:  map[XY]map[uint32]uint32{},
		dram:   map[XY]map[uint64][]byte{},
		worker: map[XY]bool{},
		isDRAM: map[XY]bool{},
		isEth:  map[XY]bool{},
		hang:   map[XY][]string{},
		dead:   map[XY]bool{},
	}
	for _, x := range []int{1, 2, 3, 4, 5, 6, 7, 10, 11, 12, 13, 14, 15, 16} {
		for y := 2; y <= 11; y++ {
			c.worker[XY{x, y}] = true
		}
	}
	for ch := 0; t.InEth(ch); ch++ {
		x, y, _ := t.EthNoC(ch)
		c.isEth[XY{x, y}] = true
	}
	// DRAM in translated coordinates (x 17, 18; y 12..23), as hosts and
	// kernels address it on a Blackhole with NoC translation enabled.
	for _, x := range []int{17, 18} {
		for y := 12; y <= 23; y++ {
			c.isDRAM[XY{x, y}] = true
		}
	}
	return c
}

// NewChips returns n fake Blackholes as the chips of one n-chip system
// (Info: Path fake:i, Chip i of n), as ttsim's multi-chip libraries
// present theirs. Each keeps its own memory and clock.
func NewChips(n int) []*Chip {
	cs := make([]*Chip, n)
	for i := range cs {
		cs[i] = New()
		cs[i].info.Path = fmt.Sprintf("fake:%d", i)
		cs[i].info.Chip, cs[i].info.Chips = i, n
	}
	return cs
}

// SetDeviceID changes the PCI device id the chip reports (for wrong-arch tests).
func (c *Chip) SetDeviceID(id uint16) { c.info.DeviceID = id }

// Hang makes the core at (x, y) never finish a launch; procs (names from
// target.ProcessorNames) are the processors that stay busy.
func (c *Chip) Hang(x, y int, procs ...string) { c.hang[XY{x, y}] = procs }

// Dead makes the core at (x, y) never finish booting.
func (c *Chip) Dead(x, y int) { c.dead[XY{x, y}] = true }

// Info implements access.BAR.
func (c *Chip) Info() access.Info { return c.info }

// Close implements access.BAR.
func (c *Chip) Close() error { c.closed = true; return nil }

// Cycles is the number of clock cycles the host has advanced.
func (c *Chip) Cycles() int { return c.cycles }

// Clock implements access.BAR: it advances time and completes launches
// whose delay has passed.
func (c *Chip) Clock(n int) {
	c.cycles += n
	var due []pendingDone
	keep := c.pending[:0]
	for _, p := range c.pending {
		if p.at <= c.cycles {
			due = append(due, p)
		} else {
			keep = append(keep, p)
		}
	}
	c.pending = keep
	for _, p := range due {
		if p.fn != nil {
			p.fn()
		} else {
			c.setGo(p.core, c.layout.RunMsgDone)
		}
	}
}

// ReadBAR implements access.BAR.
func (c *Chip) ReadBAR(bar int, off uint64, p []byte) error {
	return c.access(bar, off, p, false)
}

// WriteBAR implements access.BAR.
func (c *Chip) WriteBAR(bar int, off uint64, p []byte) error {
	return c.access(bar, off, p, true)
}

func (c *Chip) access(bar int, off uint64, p []byte, write bool) error {
	if c.closed {
		return fmt.Errorf("fake chip: access after Close")
	}
	var size uint64
	var index int
	switch {
	case bar == 0 && off >= access.TLBRegs && off < access.TLBRegs+access.TLBRegSize*(access.Windows2M+access.Windows4G):
		return c.regAccess(off-access.TLBRegs, p, write)
	case bar == 0 && off < access.Windows2M*access.Window2M:
		size, index = access.Window2M, int(off/access.Window2M)
	case bar == 4 && off < access.Windows4G*access.Window4G:
		size, index = access.Window4G, access.Windows2M+int(off/access.Window4G)
	default:
		return fmt.Errorf("fake chip: BAR%d offset %#x maps nothing", bar, off)
	}
	within := off % size
	if within+uint64(len(p)) > size {
		return fmt.Errorf("fake chip: BAR%d access [%#x, +%d) crosses a window boundary", bar, off, len(p))
	}
	reg, ok := c.regs[index]
	if !ok {
		return fmt.Errorf("fake chip: BAR%d window %d used before it was configured", bar, index)
	}
	cfg, err := access.DecodeTLB(size, reg)
	if err != nil {
		return err
	}
	addr := cfg.Addr + within
	// ttsim's limits, which the fake reproduces: NoC 0 only, and the start
	// coordinate of a unicast window must be zero.
	if cfg.NoC != 0 {
		return fmt.Errorf("fake chip: window %s uses NoC %d; ttsim supports host windows on NoC 0 only", cfg, cfg.NoC)
	}
	if !cfg.Multicast && (cfg.XStart != 0 || cfg.YStart != 0) {
		return fmt.Errorf("fake chip: unicast window %s has a nonzero start coordinate", cfg)
	}
	if !cfg.Multicast {
		return c.endpoint(XY{cfg.XEnd, cfg.YEnd}, addr, p, write)
	}
	if !write {
		return fmt.Errorf("fake chip: read through multicast window %s", cfg)
	}
	n := 0
	for x := cfg.XStart; x <= cfg.XEnd; x++ {
		for y := cfg.YStart; y <= cfg.YEnd; y++ {
			if c.worker[XY{x, y}] {
				if err := c.endpoint(XY{x, y}, addr, p, true); err != nil {
					return err
				}
				n++
			}
		}
	}
	if n == 0 {
		return fmt.Errorf("fake chip: multicast %s reaches no Tensix", cfg)
	}
	return nil
}

func (c *Chip) regAccess(off uint64, p []byte, write bool) error {
	// Like ttsim, the window registers take aligned 32-bit accesses only.
	if off%4 != 0 || len(p) != 4 {
		return fmt.Errorf("fake chip: window register access at +%#x of %d B (registers take aligned 4-byte accesses)", off, len(p))
	}
	i, w := int(off/access.TLBRegSize), off%access.TLBRegSize
	reg := c.regs[i]
	if reg == nil {
		reg = make([]byte, access.TLBRegSize)
		c.regs[i] = reg
	}
	if write {
		copy(reg[w:], p)
		return nil
	}
	copy(p, reg[w:])
	return nil
}

func (c *Chip) endpoint(at XY, addr uint64, p []byte, write bool) error {
	switch {
	case c.worker[at]:
		return c.tensix(at, addr, p, write)
	case c.isDRAM[at]:
		return c.dramAccess(at, addr, p, write)
	case c.isEth[at]:
		return c.eth(at, addr, p, write)
	}
	return fmt.Errorf("fake chip: NoC endpoint (%d,%d) is neither a Tensix, a DRAM nor an ethernet core", at.X, at.Y)
}

func (c *Chip) tensix(at XY, addr uint64, p []byte, write bool) error {
	l := c.layout
	if addr >= uint64(l.LocalBase) {
		if len(p) != 4 || addr%4 != 0 {
			return fmt.Errorf("fake chip: core (%d,%d) register %#x: %d-byte access (registers are 32-bit)", at.X, at.Y, addr, len(p))
		}
		regs := c.local[at]
		if regs == nil {
			regs = map[uint32]uint32{uint32(l.SoftReset): l.ResetAll}
			c.local[at] = regs
		}
		if !write {
			binary.LittleEndian.PutUint32(p, regs[uint32(addr)])
			return nil
		}
		old := regs[uint32(addr)]
		v := binary.LittleEndian.Uint32(p)
		regs[uint32(addr)] = v
		if uint32(addr) == l.SoftReset && old&l.ResetBRISC != 0 && v&l.ResetBRISC == 0 {
			c.boot(at)
		}
		return nil
	}
	if addr+uint64(len(p)) > uint64(l.L1Size) {
		return fmt.Errorf("fake chip: core (%d,%d) L1 access [%#x, %#x) past its %d B", at.X, at.Y, addr, addr+uint64(len(p)), l.L1Size)
	}
	mem := c.L1(at.X, at.Y)
	if !write {
		copy(p, mem[addr:])
		return nil
	}
	copy(mem[addr:], p)
	goAddr := uint64(l.Mailbox.Base) + uint64(l.Msg.GoMessages)
	if addr <= goAddr+3 && goAddr+3 < addr+uint64(len(p)) && mem[goAddr+3] == l.RunMsgGo {
		c.launch(at)
	}
	if c.persist != nil {
		c.persistWrite(at, addr, len(p))
	}
	return nil
}

// L1 returns the L1 of the Tensix or ethernet core at (x, y) (allocating
// it on first use).
func (c *Chip) L1(x, y int) []byte {
	at := XY{x, y}
	if c.l1[at] == nil {
		c.l1[at] = make([]byte, c.layout.L1Size)
	}
	return c.l1[at]
}

const chunk = 1 << 16

func (c *Chip) dramAccess(at XY, addr uint64, p []byte, write bool) error {
	bank := c.dram[at]
	if bank == nil {
		bank = map[uint64][]byte{}
		c.dram[at] = bank
	}
	for len(p) > 0 {
		k, o := addr/chunk, addr%chunk
		ch := bank[k]
		if ch == nil {
			ch = make([]byte, chunk)
			bank[k] = ch
		}
		var n int
		if write {
			n = copy(ch[o:], p)
		} else {
			n = copy(p, ch[o:])
		}
		p, addr = p[n:], addr+uint64(n)
	}
	return nil
}

func (c *Chip) u32(at XY, addr uint32) uint32 {
	return binary.LittleEndian.Uint32(c.L1(at.X, at.Y)[addr:])
}

func (c *Chip) setGo(at XY, signal uint8) {
	c.L1(at.X, at.Y)[c.layout.Mailbox.Base+uint32(c.layout.Msg.GoMessages)+3] = signal
}

func (c *Chip) fail(format string, args ...any) {
	c.Errors = append(c.Errors, fmt.Errorf(format, args...))
}

// boot plays BRISC firmware start-up on core at.
func (c *Chip) boot(at XY) {
	l := c.layout
	jal := c.u32(at, l.BootCodeBase)
	if target, ok := decodeJAL(jal); !ok || target != l.Firmware[0].Base {
		c.fail("core (%d,%d): released from reset but address 0 holds %#08x, not a jal to the BRISC firmware at %#x", at.X, at.Y, jal, l.Firmware[0].Base)
		return
	}
	goAddr := l.Mailbox.Base + uint32(l.Msg.GoMessages)
	if s := c.L1(at.X, at.Y)[goAddr+3]; s != l.RunMsgInit {
		c.fail("core (%d,%d): booted with go signal %#x, want RUN_MSG_INIT %#x", at.X, at.Y, s, l.RunMsgInit)
		return
	}
	if c.dead[at] {
		return
	}
	c.Boots = append(c.Boots, at)
	c.setGo(at, l.RunMsgDone)
}

// decodeJAL returns the target of a jal x0 at address 0.
func decodeJAL(w uint32) (uint32, bool) {
	if w&0xfff != 0x06f {
		return 0, false
	}
	imm := (w>>21&0x3ff)<<1 | (w>>20&1)<<11 | (w>>12&0xff)<<12 | (w>>31)<<20
	return imm, true
}

func (c *Chip) booted(at XY) bool {
	for _, b := range c.Boots {
		if b == at {
			return true
		}
	}
	return false
}

func (c *Chip) launch(at XY) {
	if !c.booted(at) {
		c.fail("core (%d,%d): go signal before the firmware booted", at.X, at.Y)
		return
	}
	ln, err := c.decodeLaunch(at)
	if err != nil {
		c.fail("core (%d,%d): %v", at.X, at.Y, err)
		return
	}
	c.Launches = append(c.Launches, ln)
	if c.Program != nil {
		if err := c.Program(c, ln); err != nil {
			c.fail("core (%d,%d): program: %v", at.X, at.Y, err)
		}
	}
	if c.persist != nil {
		c.persistLaunch(at)
		return
	}
	if procs, ok := c.hang[at]; ok {
		sync := c.L1(at.X, at.Y)[c.layout.Mailbox.Base+uint32(c.layout.Msg.SubordinateSync):]
		for _, p := range procs {
			for i, n := range target.ProcessorNames {
				if n == p && i > 0 {
					sync[i-1] = 0x80 // RUN_SYNC_MSG_GO: still running
				}
			}
		}
		return
	}
	c.pending = append(c.pending, pendingDone{at: c.cycles + c.Delay, core: at})
	if c.Delay == 0 {
		c.Clock(0)
	}
}

// Cores lists the Tensix cores that ever held data, sorted.
func (c *Chip) Cores() []XY {
	var out []XY
	for k := range c.l1 {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Y < out[j].Y || out[i].Y == out[j].Y && out[i].X < out[j].X })
	return out
}
