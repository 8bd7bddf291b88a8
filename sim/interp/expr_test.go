package interp

import (
	"errors"
	"fmt"
	"testing"

	"github.com/tcc-dev/tcc/codegen/kir"
)

// TestExpressions: every kind of expression evaluates as on the card (the
// NoC addresses in this package's encoding), and the ones that cannot be
// evaluated fault with their rule.
func TestExpressions(t *testing.T) {
	dx, dy, _ := bh.DRAMNoC(1)
	for _, tc := range []struct {
		name string
		e    kir.Expr
		want uint64
		rule kir.Rule // 0: no fault
	}{
		{"add", kir.Add(kir.C(3), kir.C(4)), 7, 0},
		{"sub wraps", kir.Sub(kir.C(3), kir.C(4)), 0xFFFFFFFF, 0},
		{"mul", kir.Mul(kir.C(6), kir.C(7)), 42, 0},
		{"div", kir.Div(kir.C(7), kir.C(2)), 3, 0},
		{"shr", kir.Shr(kir.C(0x80), kir.C(3)), 0x10, 0},
		{"le", kir.Le(kir.C(3), kir.C(3)), 1, 0},
		{"lor", kir.Bin{Op: kir.OpLOr, X: kir.C(0), Y: kir.C(5)}, 1, 0},
		{"div by zero", kir.Div(kir.C(1), kir.C(0)), 0, kir.RuleMalformed},
		{"write ptr", kir.GetWritePtr{CB: 0}, 0x10000, 0},
		{"tile size", kir.GetTileSize{CB: 0}, 2048, 0},
		{"no CB", kir.GetReadPtr{CB: 5}, 0, kir.RuleCBCount},
		{"semaphore", kir.GetSemaphore{ID: kir.C(3)}, 0x1000 + 3*SemaphoreStride, 0},
		{"no semaphore", kir.GetSemaphore{ID: kir.C(2)}, 0, kir.RuleSemaphore},
		{"eth semaphore on a worker", kir.GetEthSemaphore{ID: kir.C(2)}, 0x2000 + 2*SemaphoreStride, 0},
		{"noc addr", kir.NoCAddr{X: kir.C(2), Y: kir.C(3), Addr: kir.C(0x40)}, NoCAddress(2, 3, 0x40), 0},
		{"bank addr", kir.DRAMBankAddr{Bank: kir.C(1), Offset: kir.C(0x80)}, NoCAddress(uint64(dx), uint64(dy), 0x80), 0},
		{"no bank", kir.DRAMBankAddr{Bank: kir.Ci(bh.DRAMBanks), Offset: kir.C(0)}, 0, kir.RuleMemory},
		{"mcast addr", kir.MulticastAddr{X0: kir.C(1), Y0: kir.C(2), X1: kir.C(3), Y1: kir.C(4), Addr: kir.C(8)}, MulticastAddress(1, 2, 3, 4, 8), 0},
		{"u64 plus", kir.Add(kir.NoCAddr{X: kir.C(2), Y: kir.C(3), Addr: kir.C(0)}, kir.C(0x10)), NoCAddress(2, 3, 0x10), 0},
		{"l1 read", kir.L1Read32{Addr: kir.C(0x200)}, 99, 0},
		{"my noc", kir.Add(kir.Mul(kir.MyNoCX{}, kir.C(100)), kir.MyNoCY{}), 203, 0},
		{"banks", kir.NumDRAMBanks{}, uint64(bh.DRAMBanks), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := reader(func(b *kir.Builder) {
				v := b.Let("v", tc.e)
				b.Emit(kir.NoCSemaphoreInc{Addr: v, Incr: kir.C(0)}) // logs v
			})
			th, st := runKernel(t, k, testCore(t), map[uint64]uint64{0x200: 99})
			if tc.rule != 0 {
				var f *Fault
				if st != Failed || !errors.As(th.Err, &f) || f.Rule != tc.rule {
					t.Fatalf("status %d, error %v; want a fault of rule %s", st, th.Err, tc.rule)
				}
				return
			}
			if st != 0 {
				t.Fatalf("status %d, error %v", st, th.Err)
			}
			if want := fmt.Sprint("noc_semaphore_inc", []uint64{tc.want, 0}); th.S.log[0] != want {
				t.Errorf("got %s, want %s", th.S.log[0], want)
			}
		})
	}
}

func TestNoCEncoding(t *testing.T) {
	a := NoCAddress(13, 11, 0x12345)
	if got := DecodeNoC(a); got != (NoCTarget{X0: 13, Y0: 11, X1: 13, Y1: 11, Addr: 0x12345}) {
		t.Errorf("decode(unicast) = %+v", got)
	}
	m := MulticastAddress(1, 2, 3, 4, 0x40)
	if got := DecodeNoC(m); got != (NoCTarget{Mcast: true, X0: 1, Y0: 2, X1: 3, Y1: 4, Addr: 0x40}) {
		t.Errorf("decode(multicast) = %+v", got)
	}
	if got := DecodeNoC(a + 0x100); got.Addr != 0x12445 {
		t.Errorf("address arithmetic on a NoC address: local %#x, want 0x12445", got.Addr)
	}
}

// TestReadTileValue: read_tile_value reads word offset of page tile from
// the CB's read pointer, through the machine's ReadL1, and faults (rule
// cb-flow) on a page not waited for or a word outside the page.
func TestReadTileValue(t *testing.T) {
	for _, tc := range []struct {
		name         string
		pop          int // pages popped before the wait, moving the read pointer
		tile, offset uint32
		want         uint64
		rule         kir.Rule
	}{
		{"front page", 0, 0, 0, 7, 0},
		{"second page, word 3", 0, 1, 3, 42, 0},
		{"after a pop", 1, 0, 3, 42, 0},
		{"page not waited for", 0, 2, 0, 0, kir.RuleCBFlow},
		{"word outside the page", 0, 0, 512, 0, kir.RuleCBFlow},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := reader(func(b *kir.Builder) {
				b.CBReserveBack(0, kir.C(3))
				b.CBPushBack(0, kir.C(3))
				if tc.pop > 0 {
					b.CBWaitFront(0, kir.Ci(tc.pop))
					b.CBPopFront(0, kir.Ci(tc.pop))
				}
				b.CBWaitFront(0, kir.C(2))
				v := b.Let("v", kir.ReadTileValue{CB: 0, Tile: kir.C(tc.tile), Offset: kir.C(tc.offset)})
				b.Emit(kir.NoCSemaphoreInc{Addr: v, Incr: kir.C(0)}) // logs v
			})
			mem := map[uint64]uint64{0x10000: 7, 0x10000 + 2048 + 12: 42, 0x10000 + 2*2048 + 12: 43}
			th, st := runKernel(t, k, testCore(t), mem)
			if tc.rule != 0 {
				var f *Fault
				if st != Failed || !errors.As(th.Err, &f) || f.Rule != tc.rule {
					t.Fatalf("status %d, error %v; want a fault of rule %s", st, th.Err, tc.rule)
				}
				return
			}
			if st != 0 {
				t.Fatalf("status %d, error %v", st, th.Err)
			}
			if want := fmt.Sprint("noc_semaphore_inc", []uint64{tc.want, 0}); th.S.log[len(th.S.log)-1] != want {
				t.Errorf("got %s, want %s", th.S.log[len(th.S.log)-1], want)
			}
		})
	}
}
