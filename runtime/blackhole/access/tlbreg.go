package access

import (
	"encoding/binary"
	"fmt"
)

// Window register file of Blackhole (tt-kmd blackhole.c): 202 2 MiB
// windows at the start of BAR0 then 8 4 GiB windows (BAR4), each with a
// 12-byte config register at BAR0 + TLBRegs + index*12.
const (
	TLBRegs      = 0x1FC00000
	TLBRegSize   = 12
	Windows2M    = 202
	Windows4G    = 8
	KernelWindow = Windows2M - 1 // the driver keeps the last 2 MiB window
)

// field is one bit field of a window config register.
type field struct{ lo, bits uint }

// Field layouts of TLB_2M_REG and TLB_4G_REG (tt-kmd blackhole.c): the
// address (Addr >> 21 or >> 32) then end x/y, start x/y, noc, multicast,
// ordering, linked, static-vc.
var (
	fields2M = tlbFields(43)
	fields4G = tlbFields(32)
)

type tlbLayout struct{ addr, xEnd, yEnd, xStart, yStart, noc, mcast, ordering, linked field }

func tlbFields(addrBits uint) tlbLayout {
	var l tlbLayout
	at := uint(0)
	next := func(bits uint) field { f := field{at, bits}; at += bits; return f }
	l.addr = next(addrBits)
	l.xEnd, l.yEnd, l.xStart, l.yStart = next(6), next(6), next(6), next(6)
	l.noc, l.mcast, l.ordering, l.linked = next(2), next(1), next(2), next(1)
	return l
}

// reg96 is a 96-bit little-endian register.
type reg96 [3]uint32

func (r *reg96) set(f field, v uint64) {
	for i := uint(0); i < f.bits; i++ {
		if v>>i&1 != 0 {
			b := f.lo + i
			r[b/32] |= 1 << (b % 32)
		}
	}
}

func (r reg96) get(f field) uint64 {
	var v uint64
	for i := uint(0); i < f.bits; i++ {
		b := f.lo + i
		v |= uint64(r[b/32]>>(b%32)&1) << i
	}
	return v
}

func (r reg96) bytes() []byte {
	b := make([]byte, TLBRegSize)
	for i, w := range r {
		binary.LittleEndian.PutUint32(b[4*i:], w)
	}
	return b
}

// EncodeTLB returns the 12 register bytes configuring a window of size
// (Window2M or Window4G) as c.
func EncodeTLB(size uint64, c TLBConfig) ([]byte, error) {
	l, shift, err := layoutFor(size)
	if err != nil {
		return nil, err
	}
	if c.Addr%size != 0 {
		return nil, fmt.Errorf("TLB window of %d B cannot start at %#x: not a multiple of its size", size, c.Addr)
	}
	for _, v := range []int{c.XStart, c.YStart, c.XEnd, c.YEnd} {
		if v < 0 || v >= 64 {
			return nil, fmt.Errorf("TLB config %s: NoC coordinate %d is outside 0..63", c, v)
		}
	}
	if c.NoC < 0 || c.NoC > 1 || c.Ordering > Posted {
		return nil, fmt.Errorf("TLB config %s: noc %d or ordering %d out of range", c, c.NoC, c.Ordering)
	}
	var r reg96
	r.set(l.addr, c.Addr>>shift)
	r.set(l.xEnd, uint64(c.XEnd))
	r.set(l.yEnd, uint64(c.YEnd))
	r.set(l.xStart, uint64(c.XStart))
	r.set(l.yStart, uint64(c.YStart))
	r.set(l.noc, uint64(c.NoC))
	if c.Multicast {
		r.set(l.mcast, 1)
	}
	r.set(l.ordering, uint64(c.Ordering))
	return r.bytes(), nil
}

// DecodeTLB is EncodeTLB's inverse.
func DecodeTLB(size uint64, b []byte) (TLBConfig, error) {
	l, shift, err := layoutFor(size)
	if err != nil {
		return TLBConfig{}, err
	}
	if len(b) != TLBRegSize {
		return TLBConfig{}, fmt.Errorf("TLB register: %d bytes, want %d", len(b), TLBRegSize)
	}
	var r reg96
	for i := range r {
		r[i] = binary.LittleEndian.Uint32(b[4*i:])
	}
	return TLBConfig{
		Addr: r.get(l.addr) << shift,
		XEnd: int(r.get(l.xEnd)), YEnd: int(r.get(l.yEnd)),
		XStart: int(r.get(l.xStart)), YStart: int(r.get(l.yStart)),
		NoC: int(r.get(l.noc)), Multicast: r.get(l.mcast) == 1, Ordering: Ordering(r.get(l.ordering)),
	}, nil
}

func layoutFor(size uint64) (tlbLayout, uint, error) {
	switch size {
	case Window2M:
		return fields2M, 21, nil
	case Window4G:
		return fields4G, 32, nil
	}
	return tlbLayout{}, 0, fmt.Errorf("no TLB window of %d B on Blackhole (2 MiB or 4 GiB)", size)
}
