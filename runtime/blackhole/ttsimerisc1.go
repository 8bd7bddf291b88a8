package blackhole

import (
	"encoding/binary"
	"fmt"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/runtime/blackhole/chip"
	"github.com/tcc-dev/tcc/runtime/blackhole/launch"
)

// ERISC1 kernels on ttsim.
//
// ttsim's bh_x2 jumps ERISC0 into its kernel on RUN_MSG_GO but has no
// such path for ERISC1 (on a card the active-erisc firmware starts it):
// it starts ERISC1 when the soft reset releases it, at the value of its
// reset-PC register, with sp set and no other register, and parks a core
// whose pc reaches 0 by marking go_messages[0] done (which would end
// ERISC0's launch early). So for a core with an ERISC1 kernel the runtime
// writes a trampoline (erisc1Trampoline) at
// ActiveEthLayout.TTSimERISC1Trampoline that sets gp to the ERISC1
// firmware's __global_pointer$ (the kernel is linked against it), calls
// the kernel at its kernel_config_base + kernel_text_offset[DM1], then
// clears the subordinate_sync byte it waits on and spins; the kernel's
// ttsim prologue (jit ttsimeth.go) sets its rta_l1_base, crta_l1_base and
// sem_l1_base[] from the launch message. Go starts ERISC1 (reset PC, then
// the soft reset with ERISC1 released) before ERISC0's go message; Wait
// waits for the byte and puts ERISC1 back in reset.

// rv32 instruction encoders (RV32I) for the trampoline.
func rvU(op, rd, imm uint32) uint32 { return imm&0xFFFFF000 | rd<<7 | op }
func rvI(op, f3, rd, rs1, imm uint32) uint32 {
	return (imm&0xFFF)<<20 | rs1<<15 | f3<<12 | rd<<7 | op
}
func rvS(op, f3, rs1, rs2, imm uint32) uint32 {
	return (imm>>5&0x7F)<<25 | rs2<<20 | rs1<<15 | f3<<12 | (imm&0x1F)<<7 | op
}

// rvLoad returns lui rd, %hi(v); addi rd, rd, %lo(v).
func rvLoad(rd, v uint32) []uint32 {
	hi := (v + 0x800) &^ 0xFFF
	return []uint32{rvU(0x37, rd, hi), rvI(0x13, 0, rd, rd, v-hi)}
}

// erisc1Trampoline is the code ERISC1 starts at on ttsim: gp = gp, call
// entry, store 0 to the byte at done, spin.
func erisc1Trampoline(gp, entry, done uint32) []byte {
	const ra, gpReg, t0 = 1, 3, 5
	var ins []uint32
	ins = append(ins, rvLoad(gpReg, gp)...)
	ins = append(ins, rvLoad(t0, entry)...)
	ins = append(ins, rvI(0x67, 0, ra, t0, 0)) // jalr ra, 0(t0)
	ins = append(ins, rvLoad(t0, done)...)
	ins = append(ins, rvS(0x23, 0, t0, 0, 0)) // sb zero, 0(t0)
	ins = append(ins, 0x0000006F)             // jal x0, 0: spin
	b := make([]byte, 4*len(ins))
	for i, w := range ins {
		binary.LittleEndian.PutUint32(b[4*i:], w)
	}
	return b
}

// ttsimERISC1 is the ERISC1 part of a written ethernet launch on ttsim.
type ttsimERISC1 struct {
	xys   []chip.XY
	cores []kir.Core
}

// writeERISC1 writes the trampolines of the cores of ep with an ERISC1
// kernel (laid out by plan pl in layout el) and marks their
// subordinate_sync byte running. Each such core must have an ERISC0
// kernel too (ttsim starts nothing else that could end the launch).
func (d *Device) writeERISC1(ep *launch.Program, pl *launch.Plan, el *target.Layout, at func(kir.Core) (chip.XY, error)) (*ttsimERISC1, error) {
	if len(ep.Kernels[1]) == 0 {
		return nil, nil
	}
	b, ok := d.builder.(EthFirmwareBuilder)
	if !ok {
		return nil, fmt.Errorf("program %s: ERISC1 kernels on ttsim need the ERISC1 firmware's __global_pointer$; the builder (%T) builds no ethernet firmware", ep.Name, d.builder)
	}
	if d.ethFW[1] == nil {
		fw, err := b.EthFirmware()
		if err != nil {
			return nil, err
		}
		d.ethFW = fw
	}
	gp, ok := d.ethFW[1].Symbols["__global_pointer$"]
	if !ok {
		return nil, fmt.Errorf("program %s: the ERISC1 firmware %s defines no __global_pointer$", ep.Name, d.ethFW[1].Path)
	}
	a := target.BlackholeActiveEth()
	x := &ttsimERISC1{}
	for _, c := range ep.Cores {
		var k0, k1 bool
		for _, k := range ep.Kernels[0] {
			k0 = k0 || onKernel(k, c)
		}
		for _, k := range ep.Kernels[1] {
			k1 = k1 || onKernel(k, c)
		}
		if !k1 {
			continue
		}
		if !k0 {
			return nil, fmt.Errorf("program %s: core %s runs an ERISC1 kernel but no ERISC0 one; on ttsim ERISC1 runs only beside an ERISC0 kernel", ep.Name, c)
		}
		xy, err := at(c)
		if err != nil {
			return nil, err
		}
		code := erisc1Trampoline(gp, el.KernelConfig.Base+pl.Text[1], a.MailboxBase+uint32(a.TTSimERISC1Done))
		if err := d.Chip.Write(xy, uint64(a.TTSimERISC1Trampoline), code); err != nil {
			return nil, fmt.Errorf("program %s: core %s: ERISC1 trampoline: %w", ep.Name, c, err)
		}
		if err := d.Chip.Write(xy, uint64(a.MailboxBase)+uint64(a.TTSimERISC1Done), []byte{el.RunMsgGo}); err != nil {
			return nil, err
		}
		x.xys = append(x.xys, xy)
		x.cores = append(x.cores, c)
	}
	return x, nil
}

// onKernel reports whether ethernet kernel k runs on c (ethProgram gives
// every core of a kernel an RTA entry).
func onKernel(k *launch.Kernel, c kir.Core) bool {
	_, ok := k.RTA[c]
	return ok
}

// start releases ERISC1 at the trampoline (ERISC0 stays as ttsim's go
// message leaves it).
func (x *ttsimERISC1) start(c *chip.Chip) error {
	a := target.BlackholeActiveEth()
	for i, xy := range x.xys {
		if err := c.Write32(xy, uint64(a.SubordinateResetPC), a.TTSimERISC1Trampoline); err != nil {
			return fmt.Errorf("core %s: ERISC1 reset PC: %w", x.cores[i], err)
		}
		if err := c.SetReset(xy, a.ERISC0Reset); err != nil {
			return fmt.Errorf("core %s: releasing ERISC1: %w", x.cores[i], err)
		}
	}
	return nil
}

// wait waits for every ERISC1 kernel's done byte, then holds ERISC1 in
// reset again.
func (x *ttsimERISC1) wait(d *Device) error {
	a := target.BlackholeActiveEth()
	addr := uint64(a.MailboxBase) + uint64(a.TTSimERISC1Done)
	pending := map[int]bool{}
	for i := range x.xys {
		pending[i] = true
	}
	err := d.Chip.Poll(d.timeout, func() string {
		s := "ERISC1 kernels did not finish on ttsim:"
		for i := range pending {
			s += " core " + x.cores[i].String()
		}
		return s
	}, func() (bool, error) {
		for i := range pending {
			v, err := d.Chip.Read32(x.xys[i], addr)
			if err != nil {
				return false, err
			}
			if v&0xFF == 0 {
				delete(pending, i)
			}
		}
		return len(pending) == 0, nil
	})
	if err != nil {
		return err
	}
	for i, xy := range x.xys {
		if err := d.Chip.SetReset(xy, a.ERISC0Reset|a.ERISC1Reset); err != nil {
			return fmt.Errorf("core %s: holding ERISC1: %w", x.cores[i], err)
		}
	}
	return nil
}
