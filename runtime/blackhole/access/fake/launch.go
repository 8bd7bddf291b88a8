package fake

import (
	"encoding/binary"
	"fmt"
	"math/bits"
)

// Launch is one decoded launch message with the kernel config blob it
// points at, as a core's firmware would read them.
type Launch struct {
	Core XY
	// ConfigBase is kernel_config_base[TENSIX]; the offsets are relative to it.
	ConfigBase uint32
	SemOffset  uint32
	// Enables has bit i set when processor i (target.ProcessorNames) runs.
	Enables uint32
	// RTA and CRTA are the runtime-arg and common-runtime-arg offsets per
	// processor; TextOffset the kernel image offsets.
	RTA, CRTA, TextOffset [5]uint32
	Mode                  uint8
	BRISCNoC              uint8
	LocalCBMask           uint64
	// CBs are the local CB configs of the CBs in LocalCBMask, by index.
	CBs map[int]CB
	// Texts are the first bytes of each enabled processor's kernel image.
	Texts [5][]byte
}

// CB is one local CB config of the blob: 4 words.
type CB struct{ Addr, Size, Pages, PageSize uint32 }

func (c *Chip) decodeLaunch(at XY) (*Launch, error) {
	l := c.layout
	mem := c.L1(at.X, at.Y)
	mb := l.Mailbox.Base
	rd := binary.LittleEndian.Uint32(mem[mb+uint32(l.Msg.LaunchRdPtr):])
	if rd >= uint32(l.Msg.LaunchEntries) {
		return nil, fmt.Errorf("launch_msg_rd_ptr %d out of range", rd)
	}
	m := mem[mb+uint32(l.Msg.Launch)+rd*uint32(l.Msg.LaunchSize):]
	f := l.Launch
	u16 := func(off int) uint32 { return uint32(binary.LittleEndian.Uint16(m[off:])) }
	u32 := func(off int) uint32 { return binary.LittleEndian.Uint32(m[off:]) }
	ln := &Launch{
		Core:        at,
		ConfigBase:  u32(f.KernelConfigBase),
		SemOffset:   u16(f.SemOffset),
		Enables:     u32(f.Enables),
		Mode:        m[f.Mode],
		BRISCNoC:    m[f.BRISCNoCID],
		LocalCBMask: binary.LittleEndian.Uint64(m[f.LocalCBMask:]),
		CBs:         map[int]CB{},
	}
	if ln.Mode != l.DispatchModeHost {
		return nil, fmt.Errorf("launch message mode %d, want host dispatch %d", ln.Mode, l.DispatchModeHost)
	}
	if ln.ConfigBase != l.KernelConfig.Base {
		return nil, fmt.Errorf("kernel_config_base %#x, want the kernel config ring at %#x", ln.ConfigBase, l.KernelConfig.Base)
	}
	if ln.Enables == 0 || ln.Enables>>l.Processors != 0 {
		return nil, fmt.Errorf("launch message enables %#x: no processor or one past the %d", ln.Enables, l.Processors)
	}
	cbOff := u16(f.LocalCBOffset)
	end := l.KernelConfig.End()
	for i := 0; i < l.Processors; i++ {
		ln.RTA[i] = u16(f.RTAOffset + 4*i)
		ln.CRTA[i] = u16(f.RTAOffset + 4*i + 2)
		ln.TextOffset[i] = u32(f.KernelTextOffset + 4*i)
		if ln.Enables&(1<<i) != 0 {
			a := ln.ConfigBase + ln.TextOffset[i]
			// An image lies in the ring, or (a persistent program's,
			// kir.TextBuffer: position-independent, executed in place)
			// anywhere in L1 above it.
			if a < ln.ConfigBase || a+16 > l.L1Size {
				return nil, fmt.Errorf("processor %d: kernel image at %#x outside L1 above the kernel config ring", i, a)
			}
			ln.Texts[i] = append([]byte(nil), mem[a:a+16]...)
		}
	}
	for mask := ln.LocalCBMask; mask != 0; mask &= mask - 1 {
		i := bits.TrailingZeros64(mask)
		a := ln.ConfigBase + cbOff + uint32(i*4*l.CBConfigWords)
		if a+16 > end {
			return nil, fmt.Errorf("CB %d config at %#x outside the kernel config ring", i, a)
		}
		w := func(k uint32) uint32 { return binary.LittleEndian.Uint32(mem[a+4*k:]) }
		cb := CB{Addr: w(0), Size: w(1), Pages: w(2), PageSize: w(3)}
		if cb.Addr < l.Unreserved || cb.Addr+cb.Size > l.L1Size || cb.PageSize == 0 || cb.Pages*cb.PageSize != cb.Size {
			return nil, fmt.Errorf("CB %d config {addr %#x, size %d, pages %d, page size %d} is not a CB in unreserved L1", i, cb.Addr, cb.Size, cb.Pages, cb.PageSize)
		}
		ln.CBs[i] = cb
	}
	return ln, nil
}

// Words reads n little-endian words at L1 address addr of core at.
func (c *Chip) Words(at XY, addr uint32, n int) []uint32 {
	mem := c.L1(at.X, at.Y)
	out := make([]uint32, n)
	for i := range out {
		out[i] = binary.LittleEndian.Uint32(mem[addr+uint32(4*i):])
	}
	return out
}
