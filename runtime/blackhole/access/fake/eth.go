package fake

import (
	"encoding/binary"
	"fmt"
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

// ethLaunch plays ttsim's faked active-erisc firmware: the kernel runs
// (EthProgram) and, Delay cycles later, the go message reads
// RUN_MSG_DONE.
func (c *Chip) ethLaunch(at XY) {
	ln := EthLaunch{Core: at, L1: append([]byte(nil), c.L1(at.X, at.Y)[:ethLaunchCopy]...), Cycle: c.cycles}
	c.EthLaunches = append(c.EthLaunches, ln)
	if c.EthProgram != nil {
		if err := c.EthProgram(c, ln); err != nil {
			c.fail("ethernet core (%d,%d): program: %v", at.X, at.Y, err)
		}
	}
	done := func() { c.L1(at.X, at.Y)[EthGo+3] = c.layout.RunMsgDone }
	c.pending = append(c.pending, pendingDone{at: c.cycles + c.Delay, core: at, fn: done})
	if c.Delay == 0 {
		c.Clock(0)
	}
}

// ethLaunchCopy is how much of an ethernet core's L1 an EthLaunch keeps:
// the mailbox and the kernel config ring (below 0x15730).
const ethLaunchCopy = 0x16000
