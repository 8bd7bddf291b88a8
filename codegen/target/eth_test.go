package target

import "testing"

func TestEthernet(t *testing.T) {
	bh := Blackhole()
	if bh.Eth == nil || bh.Eth.Cores != 14 {
		t.Fatalf("Blackhole has %v ethernet description, want 14 cores", bh.Eth)
	}
	seen := map[[2]int]bool{}
	for ch := 0; ch < bh.Eth.Cores; ch++ {
		x, y, err := bh.EthNoC(ch)
		if err != nil {
			t.Fatal(err)
		}
		if y != 1 || seen[[2]int{x, y}] {
			t.Errorf("channel %d at NoC (%d,%d): want a distinct core on row 1", ch, x, y)
		}
		seen[[2]int{x, y}] = true
		if back, ok := bh.EthAt(x, y); !ok || back != ch {
			t.Errorf("EthAt(%d,%d) = %d, %t; want %d", x, y, back, ok, ch)
		}
		if _, _, ok := bh.WorkerAt(x, y); ok {
			t.Errorf("channel %d's NoC (%d,%d) is also a worker", ch, x, y)
		}
	}
	if x, _, _ := bh.EthNoC(1); x != 16 {
		t.Errorf("channel 1 is at NoC x %d, want 16 (blackhole_140_arch.yaml order)", x)
	}
	if _, _, err := bh.EthNoC(14); err == nil {
		t.Error("channel 14 accepted")
	}
	if got := bh.EthL1Budget(); got != 455_264-87_872 {
		t.Errorf("EthL1Budget = %d, want %d", got, 455_264-87_872)
	}
	if len(bh.Eth.RingEast) != len(bh.Eth.RingWest) {
		t.Error("ring cabling has unequal east and west channel lists")
	}
}
