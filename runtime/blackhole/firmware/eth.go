package firmware

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/runtime/blackhole/chip"
)

// Active ethernet firmware.
//
// On a card every active ethernet core runs the base firmware on ERISC0;
// tt-metal's 2-ERISC mode (the pinned release's default) loads its own
// firmware for both ERISCs before any ethernet kernel runs
// (impl/context/metal_context.cpp initialize_firmware, ACTIVE_ETH), and
// BootEth does the same, per core:
//
//  1. write the core's core_info (ACTIVE_ETH magic, logical (0, channel)),
//     the bank-to-NoC tables the firmware reads at init;
//  2. hold every RISC-V but ERISC0 (which runs the base firmware) in soft
//     reset (ActiveEthLayout.ResetHold);
//  3. write each ERISC's firmware: segments linked in L1 at their
//     addresses (inside the ERISC's firmware region), those linked in
//     core-local memory to its init scratch (ERISC0's less the base
//     firmware's local bytes: bh_hal.cpp relocate_func_);
//  4. write the launch ring (host dispatch mode), go_messages[0] =
//     RUN_MSG_INIT, launch_msg_rd_ptr = go_message_index = 0, and clear
//     ncrisc_halt;
//  5. ask the base firmware to jump ERISC0 into the active-erisc firmware:
//     once its mailbox 0 is free (status 0 or done), write the arguments
//     (the firmware base, 0, 0), then ETH_MSG_CALL | ETH_MSG_RELEASE_CORE
//     (llrt.cpp send_msg_to_eth_mailbox);
//
// and then waits until every core's go message reads RUN_MSG_DONE (the
// firmware has released ERISC1, which reported in, and waits for launches
// in the pinned release's layout: launch.CardEthLayout).
//
// ttsim's bh_x2 does not run this firmware (its ethernet base firmware is
// a stub: a RUN_MSG_INIT written to 0x590 is acked at once, RUN_MSG_GO
// jumps into the kernel): the runtime does not load it there.

// EthSet is the active-erisc firmware of both ERISCs (ERISC0: active_erisc,
// ERISC1: subordinate_erisc).
type EthSet [2]*Image

// EthNames are the firmware names of the two ERISCs (the JIT's directory
// layout: <name>/<name>.elf).
var EthNames = [2]string{"active_erisc", "subordinate_erisc"}

// ReadEthSet reads both ERISCs' firmware ELFs of dir.
func ReadEthSet(dir string) (EthSet, error) {
	var s EthSet
	for i, n := range EthNames {
		p := filepath.Join(dir, n, n+".elf")
		if _, err := os.Stat(p); err != nil {
			return s, fmt.Errorf("ethernet firmware directory %s has no ERISC%d firmware %s/%s.elf", dir, i, n, n)
		}
		var err error
		if s[i], err = ReadELF(p, i); err != nil {
			return s, err
		}
	}
	return s, nil
}

// EthPlacement returns where ERISC i's firmware im is written: L1
// segments at their link addresses, which must lie in the ERISC's
// firmware region, and core-local segments at the ERISC's init scratch.
func EthPlacement(im *Image, i int, l *target.Layout, e *target.ActiveEthLayout) ([]Segment, error) {
	var out []Segment
	lo, hi := e.FirmwareBase[i], e.FirmwareBase[i]+e.FirmwareSize
	for _, s := range im.Segments {
		end := s.Addr + uint32(len(s.Data))
		switch {
		case s.Addr >= l.LocalBase:
			off := s.Addr - l.LocalBase
			if i == 0 {
				if off < e.BaseFWLocal {
					return nil, fmt.Errorf("ethernet firmware %s: ERISC0 local segment at %#x is below the base firmware's %d B", im.Path, s.Addr, e.BaseFWLocal)
				}
				off -= e.BaseFWLocal
			}
			out = append(out, Segment{Addr: e.InitScratch[i] + off, Data: s.Data})
		case s.Addr >= lo && end <= hi:
			out = append(out, s)
		default:
			return nil, fmt.Errorf("ethernet firmware %s: segment [%#x, %#x) is outside ERISC%d's firmware region [%#x, %#x)", im.Path, s.Addr, end, i, lo, hi)
		}
	}
	return out, nil
}

// EthCore is an active ethernet core to boot: its channel and NoC
// coordinate.
type EthCore struct {
	Channel int
	At      chip.XY
}

// BootEth loads fw on the active ethernet cores cores of c and waits, up
// to timeout, until each reports its firmware initialised (see above).
// The error of a core that does not names its channel, coordinate and go
// signal; a base firmware whose mailbox stays busy names the message.
func BootEth(c *chip.Chip, cores []EthCore, fw EthSet, timeout time.Duration) error {
	l, e := c.Layout, target.BlackholeActiveEth()
	var placed [2][]Segment
	for i, im := range fw {
		if im == nil {
			return fmt.Errorf("firmware: no ERISC%d (%s) image", i, EthNames[i])
		}
		var err error
		if placed[i], err = EthPlacement(im, i, l, e); err != nil {
			return err
		}
	}
	banks := c.BankTables()
	if len(banks) > int(l.BankToNoC.Size) {
		return fmt.Errorf("firmware: bank tables (%d B) overflow their scratch area", len(banks))
	}
	mb := uint64(e.MailboxBase)
	for _, ec := range cores {
		at := ec.At
		fail := func(what string, err error) error {
			return fmt.Errorf("ethernet channel %d %s: %s: %w", ec.Channel, at, what, err)
		}
		ci := make([]byte, l.Msg.CoreInfoSize)
		ci[l.Msg.CoreInfoNoCSizeX], ci[l.Msg.CoreInfoNoCSizeX+1] = 17, 12
		ci[l.Msg.CoreInfoGridSizeX], ci[l.Msg.CoreInfoGridSizeX+1] = byte(c.Target.GridX), byte(c.Target.GridY)
		ci[l.Msg.CoreInfoLogicalX], ci[l.Msg.CoreInfoLogicalX+1] = 0, byte(ec.Channel)
		binary.LittleEndian.PutUint32(ci[l.Msg.CoreInfoL1Unreserved:], uint32(c.Target.Eth.L1UnreservedBase))
		binary.LittleEndian.PutUint32(ci[l.Msg.CoreInfoMagic:], e.CoreMagic)
		for i := range 4 {
			ci[l.Msg.CoreInfoHarvested+i] = 0xFF
		}
		if err := c.Write(at, mb+uint64(e.CoreInfo), ci); err != nil {
			return fail("core info", err)
		}
		if err := c.Write(at, uint64(e.BankToNoC), banks); err != nil {
			return fail("bank tables", err)
		}
		if err := c.SetReset(at, e.ResetHold); err != nil {
			return fail("holding ERISC1 in reset", err)
		}
		for i := range placed {
			for _, s := range placed[i] {
				if err := c.Write(at, uint64(s.Addr), s.Data); err != nil {
					return fail(fmt.Sprintf("writing ERISC%d firmware", i), err)
				}
			}
		}
		ring := make([]byte, l.Msg.LaunchSize*l.Msg.LaunchEntries)
		for k := range l.Msg.LaunchEntries {
			ring[k*l.Msg.LaunchSize+l.Launch.Mode] = l.DispatchModeHost
		}
		for _, w := range []struct {
			off  int
			data []byte
		}{
			{l.Msg.Launch, ring},
			{l.Msg.GoMessages, []byte{0, 0, 0, l.RunMsgInit}},
			{l.Msg.LaunchRdPtr, make([]byte, 4)},
			{l.Msg.GoMessageIndex, make([]byte, 4)},
			{l.Msg.NCRISCHalt, make([]byte, l.Msg.SubordinateSync-l.Msg.NCRISCHalt)},
		} {
			if err := c.Write(at, mb+uint64(w.off), w.data); err != nil {
				return fail("launch and go messages", err)
			}
		}
		if err := releaseCore(c, at, e, timeout); err != nil {
			return fail("base firmware mailbox", err)
		}
	}
	xys := make([]chip.XY, len(cores))
	for i, ec := range cores {
		xys[i] = ec.At
	}
	return waitRunMsgDone(c, timeout, "ethernet firmware init", xys, func(i int) string { return fmt.Sprintf("channel %d", cores[i].Channel) },
		mb+uint64(l.Msg.GoMessages))
}

// releaseCore sends the base firmware ETH_MSG_RELEASE_CORE with the
// active-erisc firmware's base once its mailbox 0 is free.
func releaseCore(c *chip.Chip, at chip.XY, e *target.ActiveEthLayout, timeout time.Duration) error {
	box := uint64(e.FWMailbox)
	var last uint32
	err := c.Poll(timeout, func() string {
		return fmt.Sprintf("mailbox 0 at %#x stays busy (%#x): the base firmware takes no message", box, last)
	}, func() (bool, error) {
		v, err := c.Read32(at, box)
		last = v
		s := v & e.MsgStatusMask
		return s == 0 || s == e.MsgDone, err
	})
	if err != nil {
		return err
	}
	args := make([]byte, 4*e.FWMailboxArgs)
	binary.LittleEndian.PutUint32(args, e.FirmwareBase[0])
	if err := c.Write(at, box+4, args); err != nil {
		return err
	}
	return c.Write32(at, box, e.MsgCall|e.MsgReleaseCore)
}
