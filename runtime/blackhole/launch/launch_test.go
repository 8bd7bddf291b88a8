package launch_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/runtime/blackhole/access"
	"github.com/tcc-dev/tcc/runtime/blackhole/access/fake"
	"github.com/tcc-dev/tcc/runtime/blackhole/chip"
	"github.com/tcc-dev/tcc/runtime/blackhole/firmware"
	"github.com/tcc-dev/tcc/runtime/blackhole/firmware/fwtest"
	"github.com/tcc-dev/tcc/runtime/blackhole/launch"
)

// booted returns a fake chip with firmware booted on cores.
func booted(t testing.TB, cores []kir.Core) (*fake.Chip, *chip.Chip) {
	t.Helper()
	dir := t.TempDir()
	if err := fwtest.WriteSet(dir); err != nil {
		t.Fatal(err)
	}
	fw, err := firmware.ReadSet(dir)
	if err != nil {
		t.Fatal(err)
	}
	f := fake.New()
	c, err := chip.Open(access.NewBARDevice(f), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := firmware.Boot(c, cores, fw, time.Second); err != nil {
		t.Fatal(err)
	}
	return f, c
}

func image(seed byte, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i)
	}
	return b
}

// program is a reader/compute/writer program on two cores.
func program() (*launch.Program, [5][]byte) {
	c0, c1 := kir.Core{X: 0, Y: 0}, kir.Core{X: 1, Y: 0}
	both := []kir.Core{c0, c1}
	p := &launch.Program{
		Name:  "eltwise",
		Cores: both,
		CBs: []launch.CB{
			{Index: 0, PageSize: 2048, Pages: 2, Addr: 111104, Cores: both},
			{Index: 16, PageSize: 2048, Pages: 2, Addr: 111104 + 4096, Cores: both},
		},
		Semaphores: []launch.Semaphore{{ID: 1, Initial: 7, Cores: []kir.Core{c1}}},
		BRISCNoC:   1,
	}
	var imgs [5][]byte
	for i, n := range []int{200, 120, 300, 300, 260} {
		imgs[i] = image(byte(16*i), n)
		k := &launch.Kernel{Name: "k", ImageSize: n}
		if i <= launch.NCRISC {
			k.RTA = map[kir.Core][]uint32{c0: {0xA0 + uint32(i), 1}, c1: {0xB0 + uint32(i), 2}}
		}
		if i == launch.TRISC1 {
			k.CRTA = []uint32{42}
		}
		p.Kernels[i] = k
	}
	return p, imgs
}

func TestLaunchOnFakeChip(t *testing.T) {
	p, imgs := program()
	f, c := booted(t, p.Cores)
	f.Delay = 5000 // done arrives only after several polls
	pl, err := launch.MakePlan(p, c.Layout)
	if err != nil {
		t.Fatal(err)
	}
	if err := launch.Run(c, p, pl, imgs, time.Second); err != nil {
		t.Fatal(err)
	}
	if len(f.Errors) > 0 {
		t.Fatalf("fake chip: %v", f.Errors)
	}
	if len(f.Launches) != 2 {
		t.Fatalf("%d launches, want 2", len(f.Launches))
	}
	for i, ln := range f.Launches {
		if ln.Enables != 0b11111 || ln.BRISCNoC != 1 || ln.LocalCBMask != 1|1<<16 {
			t.Errorf("core %d: enables %#b noc %d cb mask %#x", i, ln.Enables, ln.BRISCNoC, ln.LocalCBMask)
		}
		wantCBs := map[int]fake.CB{0: {Addr: 111104, Size: 4096, Pages: 2, PageSize: 2048}, 16: {Addr: 111104 + 4096, Size: 4096, Pages: 2, PageSize: 2048}}
		if d := cmp.Diff(wantCBs, ln.CBs); d != "" {
			t.Errorf("core %d CB configs (-want +got):\n%s", i, d)
		}
		for proc := range 5 {
			if d := cmp.Diff(imgs[proc][:16], ln.Texts[proc]); d != "" {
				t.Errorf("core %d processor %d image (-want +got):\n%s", i, proc, d)
			}
			if ln.ConfigBase+ln.TextOffset[proc] != pl.TextAddr[proc] {
				t.Errorf("core %d processor %d: image at %#x, linked for %#x", i, proc, ln.ConfigBase+ln.TextOffset[proc], pl.TextAddr[proc])
			}
		}
		base := uint32(0xA0)
		if i == 1 {
			base = 0xB0
		}
		if got := f.Words(ln.Core, ln.ConfigBase+ln.RTA[launch.NCRISC], 2); got[0] != base+1 {
			t.Errorf("core %d NCRISC runtime args %v, want [%#x ...]", i, got, base+1)
		}
		if got := f.Words(ln.Core, ln.ConfigBase+ln.CRTA[launch.TRISC1], 1); got[0] != 42 {
			t.Errorf("core %d TRISC1 common runtime args %v, want [42]", i, got)
		}
		sem := f.Words(ln.Core, ln.ConfigBase+ln.SemOffset+16, 1)[0]
		if want := map[int]uint32{0: 0, 1: 7}[i]; sem != want {
			t.Errorf("core %d semaphore 1 = %d, want %d", i, sem, want)
		}
	}
	if f.Cycles() < 5000 {
		t.Errorf("the host advanced the chip %d cycles; done needed 5000", f.Cycles())
	}
}

func TestWatchdogNamesStalledCore(t *testing.T) {
	p, imgs := program()
	f, c := booted(t, p.Cores)
	f.Hang(2, 2, "trisc1") // logical (1,0)
	pl, _ := launch.MakePlan(p, c.Layout)
	err := launch.Run(c, p, pl, imgs, 50*time.Millisecond)
	var se *launch.StallError
	if !errors.As(err, &se) {
		t.Fatalf("error %v, want a StallError", err)
	}
	if len(se.Cores) != 1 || se.Cores[0].Core != (kir.Core{X: 1, Y: 0}) {
		t.Fatalf("stalled cores %+v, want only (1,0)", se.Cores)
	}
	for _, want := range []string{"program eltwise", "core (1,0) NoC (2,2)", "still running trisc1", "c_0 received", "c_16 received"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("watchdog report %q lacks %q", err, want)
		}
	}
}

func TestPlanRejectsOversizeBlob(t *testing.T) {
	p, _ := program()
	p.Kernels[launch.BRISC].ImageSize = 80 << 10
	_, c := booted(t, nil)
	if _, err := launch.MakePlan(p, c.Layout); err == nil || !strings.Contains(err.Error(), "exceeds the 70656 B kernel config ring") || !strings.Contains(err.Error(), "brisc 81920 B") {
		t.Errorf("error %v", err)
	}
}

func TestGoBeforeBootIsAProtocolError(t *testing.T) {
	p, imgs := program()
	f := fake.New()
	c, _ := chip.Open(access.NewBARDevice(f), nil)
	pl, _ := launch.MakePlan(p, c.Layout)
	_ = launch.Run(c, p, pl, imgs, 20*time.Millisecond)
	if len(f.Errors) == 0 || !strings.Contains(f.Errors[0].Error(), "go signal before the firmware booted") {
		t.Errorf("fake chip errors %v", f.Errors)
	}
}

// BenchmarkHostPerStep measures the host CPU a decode step costs on the
// fake chip (access/fake: the BAR accesses are Go memory copies, so this
// is the runtime's own work, not PCIe latency):
//
//   - launch: one slow-dispatch launch (launch.Run of the two-core test
//     program: blobs, launch messages, go signals, done polls), which the
//     per-program mode pays once per program of the step;
//   - doorbell+poll: what a persistent program's step needs from the
//     host once it runs (one control word written, one done word read
//     that already holds the step's count).
func BenchmarkHostPerStep(b *testing.B) {
	p, imgs := program()
	f, c := booted(b, p.Cores)
	pl, err := launch.MakePlan(p, c.Layout)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("launch", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if err := launch.Run(c, p, pl, imgs, time.Second); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("doorbell+poll", func(b *testing.B) {
		at, err := c.Worker(p.Cores[0])
		if err != nil {
			b.Fatal(err)
		}
		const bell, done = 0x40000, 0x40010
		l1 := f.L1(int(at.X), int(at.Y))
		for i := 0; i < b.N; i++ {
			if err := c.Write32(at, bell, uint32(i+1)); err != nil {
				b.Fatal(err)
			}
			l1[done] = byte(i + 1) // the device's side: the step finished
			v, err := c.Read32(at, done)
			if err != nil {
				b.Fatal(err)
			}
			if uint8(v) != uint8(i+1) {
				b.Fatalf("done word %d, want %d", v, uint8(i+1))
			}
		}
	})
}
