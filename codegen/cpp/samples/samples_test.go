package samples_test

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tcc-dev/tcc/codegen/cpp/samples"
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/sim/kexec"
)

var bh = target.Blackhole()

func TestAllValidate(t *testing.T) {
	names := map[string]bool{}
	for _, s := range samples.All() {
		if err := kir.Validate(s.Program, bh); err != nil {
			t.Errorf("sample %s: %v", s.Name, err)
		}
		if names[s.Program.Name] {
			t.Errorf("program name %s appears twice in All", s.Program.Name)
		}
		names[s.Program.Name] = true
	}
	for _, s := range samples.Cards() {
		if !names[s.Program.Name] {
			t.Errorf("card sample %s is not in All", s.Name)
		}
	}
}

// TestEthRingShift runs the ring shift on rings of 2 and 4 cards: page d
// of "dst" on card d must be page d-1 of "src" on card d-1 (mod N), each
// card sending one tile.
// EthRingShiftChannels does the same with the channel calls.
func TestEthRingShift(t *testing.T) {
	for _, p := range []*kir.Program{samples.EthRingShift(), samples.EthRingShiftChannels()} {
		testEthRingShift(t, p)
	}
}

func testEthRingShift(t *testing.T, p *kir.Program) {
	const pageBytes = 2048
	for _, n := range []int{2, 4} {
		t.Run(fmt.Sprintf("%s %d cards", p.Name, n), func(t *testing.T) {
			c, err := kexec.NewCluster(bh, n, kexec.RingLinks(n, []int{samples.EthSendChannel}, []int{samples.EthRecvChannel}))
			if err != nil {
				t.Fatal(err)
			}
			srcs := make([][]byte, n)
			for d, dev := range c.Devices {
				for _, b := range p.Buffers {
					if _, err := dev.Alloc(b); err != nil {
						t.Fatal(err)
					}
				}
				srcs[d] = make([]byte, samples.EthRingShiftPages*pageBytes)
				for i := range srcs[d] {
					srcs[d][i] = byte(d*31 + i*7 + i/pageBytes)
				}
				if err := dev.WritePages("src", 0, srcs[d]); err != nil {
					t.Fatal(err)
				}
			}
			stats, err := c.RunAll(p, kexec.RunOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for d, dev := range c.Devices {
				got, err := dev.ReadPages("dst", d, 1)
				if err != nil {
					t.Fatal(err)
				}
				from := (d + n - 1) % n
				want := srcs[from][from*pageBytes : (from+1)*pageBytes]
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("card %d dst page %d should be card %d's src page %d (-want +got):\n%s", d, d, from, from, diff)
				}
				if stats[d].EthBytes != pageBytes {
					t.Errorf("card %d sent %d bytes over ethernet, want %d", d, stats[d].EthBytes, pageBytes)
				}
			}
		})
	}
}
