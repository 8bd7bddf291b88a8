package interp

import "fmt"

// NoC address encoding of the interpreters (what get_noc_addr returns):
// the local address in bits 0..35, the (end) x in 36..41, the (end) y in
// 42..47; a multicast address also has the start x in 48..53, the start y
// in 54..59 and bit 63 set. Address arithmetic on the low bits works as on
// a card.
const (
	nocLocalBits = 36
	nocLocalMask = 1<<nocLocalBits - 1
	nocMcastFlag = 1 << 63
)

// NoCAddress is the NoC address of L1 (or DRAM bank) byte addr at NoC
// coordinates (x, y).
func NoCAddress(x, y, addr uint64) uint64 {
	return (y&63)<<42 | (x&63)<<36 | addr&nocLocalMask
}

// MulticastAddress is the multicast address of addr on the NoC rectangle
// (x0, y0)-(x1, y1).
func MulticastAddress(x0, y0, x1, y1, addr uint64) uint64 {
	return nocMcastFlag | (y0&63)<<54 | (x0&63)<<48 | NoCAddress(x1, y1, addr)
}

// NoCTarget is a decoded NoC address: for a unicast address X0 == X1 and
// Y0 == Y1.
type NoCTarget struct {
	Mcast          bool
	X0, Y0, X1, Y1 int
	Addr           uint64
}

// DecodeNoC splits a NoC address.
func DecodeNoC(a uint64) NoCTarget {
	t := NoCTarget{Addr: a & nocLocalMask, X1: int(a >> 36 & 63), Y1: int(a >> 42 & 63)}
	t.X0, t.Y0 = t.X1, t.Y1
	if a&nocMcastFlag != 0 {
		t.Mcast = true
		t.X0, t.Y0 = int(a>>48&63), int(a>>54&63)
	}
	return t
}

func (t NoCTarget) String() string {
	if t.Mcast {
		return fmt.Sprintf("multicast (%d,%d)-(%d,%d):%#x", t.X0, t.Y0, t.X1, t.Y1, t.Addr)
	}
	return fmt.Sprintf("noc (%d,%d):%#x", t.X1, t.Y1, t.Addr)
}
