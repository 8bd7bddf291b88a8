package firmware

import (
	"encoding/binary"
	"fmt"
	"strings"
	"time"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/runtime/blackhole/chip"
)

// JAL returns the RISC-V instruction "jal x0, target" placed at address 0
// (tt-metal hal.cpp generate_risc_startup_addr).
func JAL(target uint32) (uint32, error) {
	if target >= 1<<19 || target%2 != 0 {
		return 0, fmt.Errorf("firmware base %#x is not reachable by a jal from address 0", target)
	}
	imm := (target&0x7fe)<<20 | (target&0x800)<<9 | target&0xff000
	return imm | 0x6f, nil
}

// Boot loads fw onto the Tensix at each logical core of cores and waits,
// up to timeout, until every one reports its firmware initialised. The
// error of a core that does not names it and its go signal.
func Boot(c *chip.Chip, cores []kir.Core, fw Set, timeout time.Duration) error {
	l := c.Layout
	var placed [5][]Segment
	for i, im := range fw {
		if im == nil {
			return fmt.Errorf("firmware: no %s image", procName(i))
		}
		var err error
		if placed[i], err = im.Placement(l); err != nil {
			return err
		}
	}
	jal, err := JAL(l.Firmware[0].Base)
	if err != nil {
		return err
	}
	banks, l2v := c.BankTables(), c.LogicalToVirtual()
	if len(banks) > int(l.BankToNoC.Size) || len(l2v) > int(l.LogicalToVirtual.Size) {
		return fmt.Errorf("firmware: bank tables (%d B) or logical maps (%d B) overflow their scratch areas", len(banks), len(l2v))
	}
	xys := make([]chip.XY, len(cores))
	for i, lc := range cores {
		at, err := c.Worker(lc)
		if err != nil {
			return err
		}
		xys[i] = at
		if err := c.SetReset(at, l.ResetAll); err != nil {
			return fmt.Errorf("core %s %s: holding in reset: %w", lc, at, err)
		}
		for p := range placed {
			for _, s := range placed[p] {
				if err := c.Write(at, uint64(s.Addr), s.Data); err != nil {
					return fmt.Errorf("core %s: writing %s firmware: %w", lc, procName(p), err)
				}
			}
		}
		mbox := make([]byte, l.Mailbox.Size)
		ci := mbox[l.Msg.CoreInfo:]
		ci[l.Msg.CoreInfoNoCSizeX], ci[l.Msg.CoreInfoNoCSizeX+1] = 17, 12
		ci[l.Msg.CoreInfoGridSizeX], ci[l.Msg.CoreInfoGridSizeX+1] = byte(c.Target.GridX), byte(c.Target.GridY)
		ci[l.Msg.CoreInfoLogicalX], ci[l.Msg.CoreInfoLogicalX+1] = byte(lc.X), byte(lc.Y)
		binary.LittleEndian.PutUint32(ci[l.Msg.CoreInfoL1Unreserved:], l.Unreserved)
		binary.LittleEndian.PutUint32(ci[l.Msg.CoreInfoMagic:], l.CoreMagicWorker)
		for i := range 4 { // harvested_coords and virtual_harvested_coords: none
			ci[l.Msg.CoreInfoHarvested+i] = 0xFF
		}
		mbox[l.Msg.GoMessages+3] = l.RunMsgInit
		for _, w := range []struct {
			addr uint32
			data []byte
		}{
			{l.Mailbox.Base, mbox},
			{l.BankToNoC.Base, banks},
			{l.LogicalToVirtual.Base, l2v},
			{l.BootCodeBase, binary.LittleEndian.AppendUint32(nil, jal)},
		} {
			if err := c.Write(at, uint64(w.addr), w.data); err != nil {
				return fmt.Errorf("core %s: firmware init data: %w", lc, err)
			}
		}
	}
	for i, at := range xys {
		if err := c.SetReset(at, l.ResetAll&^l.ResetBRISC); err != nil {
			return fmt.Errorf("core %s: releasing BRISC: %w", cores[i], err)
		}
	}
	return waitRunMsgDone(c, timeout, "firmware init", xys, func(i int) string { return fmt.Sprintf("core %s", cores[i]) },
		uint64(l.Mailbox.Base)+uint64(l.Msg.GoMessages))
}

// waitRunMsgDone polls the go message at goAddr on every core of xys
// until each reports RUN_MSG_DONE (the firmware finished its init).
// Postcondition: nil once all have; otherwise, after timeout, an error
// that starts with what and names up to eight pending cores (label(i),
// coordinates, last go signal), or the first read's error.
func waitRunMsgDone(c *chip.Chip, timeout time.Duration, what string, xys []chip.XY, label func(i int) string, goAddr uint64) error {
	l := c.Layout
	pending := map[int]uint32{}
	for i := range xys {
		pending[i] = uint32(l.RunMsgInit)
	}
	return c.Poll(timeout, func() string {
		var b strings.Builder
		fmt.Fprintf(&b, "%s: %d of %d cores never reported RUN_MSG_DONE:", what, len(pending), len(xys))
		n := 0
		for i := range xys {
			if s, ok := pending[i]; ok && n < 8 {
				fmt.Fprintf(&b, " %s %s go signal %#x;", label(i), xys[i], s)
				n++
			}
		}
		return strings.TrimSuffix(b.String(), ";")
	}, func() (bool, error) {
		for i := range pending {
			v, err := c.Read32(xys[i], goAddr)
			if err != nil {
				return false, err
			}
			if s := v >> 24; s == uint32(l.RunMsgDone) {
				delete(pending, i)
			} else {
				pending[i] = s
			}
		}
		return len(pending) == 0, nil
	})
}

func procName(i int) string { return target.ProcessorNames[i] }
