package fake

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/tcc-dev/tcc/codegen/target"
)

// Ethernet boot results (tt-metal blackhole eth_fw_api.h boot_results_t
// at MEM_SYSENG_BOOT_RESULTS_BASE), as the base firmware leaves them and
// ttsim's multi-chip libraries fake them: port_status, and for an up port
// the local and remote chip_info (asic_location +1, eth_id +2,
// board_id_hi +4, board_id_lo +8).
const (
	bootResults    = 0x7CC00
	bootPortStatus = bootResults + 4
	bootLocalInfo  = bootResults + 0x3C0
	bootRemoteInfo = bootResults + 0x3E0
	portUp         = 1
	portDown       = 2
)

// P300Board is the board id NewChips gives its chips (ttsim's bh_x2 uses it).
const P300Board = uint64(0x440)<<32 | 1

// Cable connects ethernet channel cha of chip a with channel chb of chip
// b: both ports report a trained link naming the other end (board id and
// ASIC location from NewChips: board P300Board, location = chip index).
// Ports never cabled report PORT_DOWN once any port of the chip is cabled.
func Cable(a *Chip, cha int, b *Chip, chb int) error {
	for _, e := range []struct {
		c, peer    *Chip
		ch, peerCh int
	}{{a, b, cha, chb}, {b, a, chb, cha}} {
		x, y, err := e.c.t.EthNoC(e.ch)
		if err != nil {
			return fmt.Errorf("fake chip %s: %w", e.c.info.Path, err)
		}
		e.c.downPorts()
		mem := e.c.L1(x, y)
		binary.LittleEndian.PutUint32(mem[bootPortStatus:], portUp)
		e.c.putInfo(mem[bootLocalInfo:], e.ch)
		e.peer.putInfo(mem[bootRemoteInfo:], e.peerCh)
	}
	return nil
}

// downPorts marks every port without a status PORT_DOWN.
func (c *Chip) downPorts() {
	for ch := 0; c.t.InEth(ch); ch++ {
		x, y, _ := c.t.EthNoC(ch)
		mem := c.L1(x, y)
		if binary.LittleEndian.Uint32(mem[bootPortStatus:]) == 0 {
			binary.LittleEndian.PutUint32(mem[bootPortStatus:], portDown)
		}
	}
}

// putInfo writes c's chip_info for its channel ch at b.
func (c *Chip) putInfo(b []byte, ch int) {
	b[1] = byte(c.info.Chip)
	b[2], b[3] = byte(ch), byte(ch)
	binary.LittleEndian.PutUint32(b[4:], uint32(P300Board>>32))
	binary.LittleEndian.PutUint32(b[8:], uint32(P300Board&0xFFFFFFFF))
}

// EthGo is the go message of an active ethernet core (go_messages[0] of
// the active-erisc mailbox), where ttsim's bh_x2 takes RUN_MSG_GO as the
// start of the kernel the launch message names.
const EthGo = 0x590

// EthLaunch is one go message an ethernet core got: the core and a copy
// of the start of its L1 (ethLaunchCopy bytes) at that moment (the launch message and the kernel config
// blob, in the layout the host wrote them: runtime/blackhole/launch
// TTSimEthLayout).
type EthLaunch struct {
	Core XY
	L1   []byte
	// Cycle is the chip's clock when the go message arrived.
	Cycle int
}

// ethGo is the go message of an active ethernet core: ttsim's (EthGo) or,
// with CardEth, the pinned release's (target.BlackholeActiveEth's mailbox
// + Layout.Msg.GoMessages).
func (c *Chip) ethGo() uint64 {
	if c.CardEth {
		return uint64(target.BlackholeActiveEth().MailboxBase) + uint64(c.layout.Msg.GoMessages)
	}
	return EthGo
}

// eth is an access to ethernet core at: its L1 or, with CardEth, its
// registers (soft reset).
func (c *Chip) eth(at XY, addr uint64, p []byte, write bool) error {
	if c.CardEth && addr >= uint64(c.layout.LocalBase) {
		if len(p) != 4 || addr%4 != 0 {
			return fmt.Errorf("fake chip: ethernet core (%d,%d) register %#x: %d-byte access (registers are 32-bit)", at.X, at.Y, addr, len(p))
		}
		regs := c.local[at]
		if regs == nil {
			regs = map[uint32]uint32{}
			c.local[at] = regs
		}
		if write {
			regs[uint32(addr)] = binary.LittleEndian.Uint32(p)
		} else {
			binary.LittleEndian.PutUint32(p, regs[uint32(addr)])
		}
		return nil
	}
	if addr+uint64(len(p)) > uint64(c.t.Eth.L1Size) {
		return fmt.Errorf("fake chip: ethernet core (%d,%d) L1 access [%#x, %#x) past its %d B", at.X, at.Y, addr, addr+uint64(len(p)), c.t.Eth.L1Size)
	}
	mem := c.L1(at.X, at.Y)
	if !write {
		copy(p, mem[addr:])
		return nil
	}
	copy(mem[addr:], p)
	g := c.ethGo()
	if addr <= g+3 && g+3 < addr+uint64(len(p)) && mem[g+3] == c.layout.RunMsgGo {
		if c.CardEth && !slices.Contains(c.EthBoots, at) {
			c.fail("ethernet core (%d,%d): go message before its active-erisc firmware was started", at.X, at.Y)
			return nil
		}
		c.ethLaunch(at)
	}
	if a := target.BlackholeActiveEth(); c.CardEth && addr == uint64(a.FWMailbox) && len(p) == 4 {
		c.ethMailbox(at, a)
	}
	return nil
}

// ethMailbox plays the base firmware's mailbox 0 on a card: on
// ETH_MSG_CALL | ETH_MSG_RELEASE_CORE it checks what the active-erisc
// firmware needs (argument 0 its base, both ERISCs' images there, ERISC1
// held in reset, the core_info magic, go_messages[0] RUN_MSG_INIT), then
// plays that firmware's init: the go message reads RUN_MSG_DONE and the
// mailbox ETH_MSG_DONE. A check that fails is recorded in Errors and the
// core stays in init.
func (c *Chip) ethMailbox(at XY, a *target.ActiveEthLayout) {
	mem := c.L1(at.X, at.Y)
	box := mem[a.FWMailbox:]
	if binary.LittleEndian.Uint32(box) != a.MsgCall|a.MsgReleaseCore {
		c.fail("ethernet core (%d,%d): base firmware mailbox message %#x (want %#x)", at.X, at.Y, binary.LittleEndian.Uint32(box), a.MsgCall|a.MsgReleaseCore)
		return
	}
	l := c.layout
	goAt := a.MailboxBase + uint32(l.Msg.GoMessages)
	ci := mem[a.MailboxBase+uint32(a.CoreInfo):]
	for _, chk := range []struct {
		ok   bool
		what string
	}{
		{binary.LittleEndian.Uint32(box[4:]) == a.FirmwareBase[0], fmt.Sprintf("release address %#x, want the active-erisc firmware base %#x", binary.LittleEndian.Uint32(box[4:]), a.FirmwareBase[0])},
		{binary.LittleEndian.Uint32(mem[a.FirmwareBase[0]:]) != 0, fmt.Sprintf("no ERISC0 firmware at %#x", a.FirmwareBase[0])},
		{binary.LittleEndian.Uint32(mem[a.FirmwareBase[1]:]) != 0, fmt.Sprintf("no ERISC1 firmware at %#x", a.FirmwareBase[1])},
		{c.local[at][l.SoftReset] == a.ResetHold, fmt.Sprintf("soft reset %#x, want %#x (every RISC-V but ERISC0 held)", c.local[at][l.SoftReset], a.ResetHold)},
		{binary.LittleEndian.Uint32(ci[l.Msg.CoreInfoMagic:]) == a.CoreMagic, fmt.Sprintf("core_info magic %#x, want ACTIVE_ETH %#x", binary.LittleEndian.Uint32(ci[l.Msg.CoreInfoMagic:]), a.CoreMagic)},
		{mem[goAt+3] == l.RunMsgInit, fmt.Sprintf("go signal %#x, want RUN_MSG_INIT", mem[goAt+3])},
	} {
		if !chk.ok {
			c.fail("ethernet core (%d,%d): firmware release: %s", at.X, at.Y, chk.what)
			return
		}
	}
	binary.LittleEndian.PutUint32(box, a.MsgDone|a.MsgReleaseCore)
	mem[goAt+3] = l.RunMsgDone
	c.EthBoots = append(c.EthBoots, at)
}

// ethLaunch plays the active-erisc firmware (ttsim's fake of it, or with
// CardEth the one the host loaded): the kernel runs (EthProgram) and,
// Delay cycles later, the go message reads RUN_MSG_DONE.
func (c *Chip) ethLaunch(at XY) {
	ln := EthLaunch{Core: at, L1: append([]byte(nil), c.L1(at.X, at.Y)[:ethLaunchCopy]...), Cycle: c.cycles}
	c.EthLaunches = append(c.EthLaunches, ln)
	if c.EthProgram != nil {
		if err := c.EthProgram(c, ln); err != nil {
			c.fail("ethernet core (%d,%d): program: %v", at.X, at.Y, err)
		}
	}
	g := c.ethGo()
	done := func() { c.L1(at.X, at.Y)[g+3] = c.layout.RunMsgDone }
	c.pending = append(c.pending, pendingDone{at: c.cycles + c.Delay, core: at, fn: done})
	if c.Delay == 0 {
		c.Clock(0)
	}
}

// ethLaunchCopy is how much of an ethernet core's L1 an EthLaunch keeps:
// the mailbox and the kernel config ring (below 0x15730).
const ethLaunchCopy = 0x16000
