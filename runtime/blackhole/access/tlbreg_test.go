package access

import (
	"encoding/binary"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestTLBRoundTrip(t *testing.T) {
	for _, c := range []struct {
		name string
		size uint64
		cfg  TLBConfig
	}{
		{"unicast 2M", Window2M, TLBConfig{Addr: 3 << 21, XEnd: 16, YEnd: 11, Ordering: Strict}},
		{"multicast 2M noc1", Window2M, TLBConfig{Addr: 0, XStart: 1, YStart: 2, XEnd: 7, YEnd: 11, NoC: 1, Multicast: true, Ordering: Posted}},
		{"dram 4G", Window4G, TLBConfig{Addr: 1 << 32, XEnd: 9, YEnd: 5}},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, err := EncodeTLB(c.size, c.cfg)
			if err != nil {
				t.Fatal(err)
			}
			got, err := DecodeTLB(c.size, b)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(c.cfg, got); d != "" {
				t.Errorf("round trip (-want +got):\n%s", d)
			}
		})
	}
}

// The bit positions of tt-kmd's TLB_2M_REG: address 43 bits, then x_end at
// 43, y_end 49, x_start 55, y_start 61 (straddling the second and third
// word), noc 67, multicast 69, ordering 70.
func TestTLB2MBitPositions(t *testing.T) {
	b, err := EncodeTLB(Window2M, TLBConfig{Addr: 5 << 21, XStart: 0, YStart: 7, XEnd: 1, YEnd: 2, NoC: 1, Multicast: true, Ordering: Strict})
	if err != nil {
		t.Fatal(err)
	}
	var want [3]uint32
	set := func(bit uint, v uint64) {
		for i := uint(0); v>>i != 0; i++ {
			if v>>i&1 == 1 {
				want[(bit+i)/32] |= 1 << ((bit + i) % 32)
			}
		}
	}
	set(0, 5)
	set(43, 1)
	set(49, 2)
	set(61, 7)
	set(67, 1)
	set(69, 1)
	set(70, 1)
	for i := range want {
		if got := binary.LittleEndian.Uint32(b[4*i:]); got != want[i] {
			t.Errorf("word %d = %#08x, want %#08x", i, got, want[i])
		}
	}
}

func TestTLBRejects(t *testing.T) {
	for _, c := range []struct {
		name string
		size uint64
		cfg  TLBConfig
	}{
		{"unaligned", Window2M, TLBConfig{Addr: 4096}},
		{"coordinate", Window2M, TLBConfig{XEnd: 64}},
		{"noc", Window2M, TLBConfig{NoC: 2}},
		{"size", 1 << 20, TLBConfig{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := EncodeTLB(c.size, c.cfg); err == nil {
				t.Error("no error")
			}
		})
	}
}
