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

// program is a reader/compute/writer program on two cores; imgs are its
// images by processor.
func program() (p *launch.Program, imgs [5][]byte) {
	c0, c1 := kir.Core{X: 0, Y: 0}, kir.Core{X: 1, Y: 0}
	both := []kir.Core{c0, c1}
	p = &launch.Program{
		Name:  "eltwise",
		Cores: both,
		CBs: []launch.CB{
			{Index: 0, PageSize: 2048, Pages: 2, Addr: 111104, Cores: both},
			{Index: 16, PageSize: 2048, Pages: 2, Addr: 111104 + 4096, Cores: both},
		},
		Semaphores: []launch.Semaphore{{ID: 1, Initial: 7, Cores: []kir.Core{c1}}},
	}
	for i, n := range []int{200, 120, 300, 300, 260} {
		imgs[i] = image(byte(16*i), n)
		k := &launch.Kernel{Name: "k", Image: imgs[i]}
		if i == launch.BRISC {
			k.NoC = 1
		}
		if i <= launch.NCRISC {
			k.RTA = map[kir.Core][]uint32{c0: {0xA0 + uint32(i), 1}, c1: {0xB0 + uint32(i), 2}}
		}
		if i == launch.TRISC1 {
			k.CRTA = []uint32{42}
		}
		p.Kernels[i] = []*launch.Kernel{k}
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
	if err := launch.Run(c, p, pl, time.Second); err != nil {
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
	p, _ := program()
	f, c := booted(t, p.Cores)
	f.Hang(2, 2, "trisc1") // logical (1,0)
	pl, _ := launch.MakePlan(p, c.Layout)
	err := launch.Run(c, p, pl, 50*time.Millisecond)
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
	p.Kernels[launch.BRISC][0].Image = make([]byte, 80<<10)
	_, c := booted(t, nil)
	if _, err := launch.MakePlan(p, c.Layout); err == nil || !strings.Contains(err.Error(), "exceeds the 70656 B kernel config ring") || !strings.Contains(err.Error(), "brisc 81920 B") {
		t.Errorf("error %v", err)
	}
}

// TestPlanKernelsPerCore checks the plan of a processor that runs
// different kernels on disjoint cores: its slots fit the largest image and
// args, each core's blob holds its own kernel, and two kernels of the
// processor on one core are refused, naming program, core and processor.
func TestPlanKernelsPerCore(t *testing.T) {
	c0, c1 := kir.Core{X: 0, Y: 0}, kir.Core{X: 1, Y: 0}
	small := &launch.Kernel{Name: "read_a", Image: image(0x40, 64), RTA: map[kir.Core][]uint32{c0: {1}}}
	large := &launch.Kernel{Name: "read_b", Image: image(0x80, 200), RTA: map[kir.Core][]uint32{c1: {2, 3, 4}}, CRTA: []uint32{9}}
	p := &launch.Program{Name: "gates", Cores: []kir.Core{c0, c1}}
	p.Kernels[launch.NCRISC] = []*launch.Kernel{small, large}
	_, c := booted(t, nil)
	pl, err := launch.MakePlan(p, c.Layout)
	if err != nil {
		t.Fatal(err)
	}
	if got := [3]int{int(pl.TextSize[launch.NCRISC]), pl.RTAWords[launch.NCRISC], pl.CRTAWords[launch.NCRISC]}; got != [3]int{200, 3, 1} {
		t.Errorf("NCRISC slots (image B, args, common args) = %v, want [200 3 1]", got)
	}
	for _, tc := range []struct {
		core kir.Core
		k    *launch.Kernel
	}{{c0, small}, {c1, large}} {
		blob, _, err := launch.Blob(p, pl, tc.core, c.Layout)
		if err != nil {
			t.Fatal(err)
		}
		text := pl.Text[launch.NCRISC]
		if d := cmp.Diff(tc.k.Image, blob[text:text+uint32(len(tc.k.Image))]); d != "" {
			t.Errorf("core %s NCRISC image (-want +got):\n%s", tc.core, d)
		}
	}

	p.Kernels[launch.NCRISC][0].RTA[c1] = nil // read_a now on c1 too
	_, err = launch.MakePlan(p, c.Layout)
	for _, want := range []string{"program gates", "core (1,0)", "two kernels on ncrisc", "read_a, read_b"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want one containing %q", err, want)
		}
	}
}

func TestGoBeforeBootIsAProtocolError(t *testing.T) {
	p, _ := program()
	f := fake.New()
	c, _ := chip.Open(access.NewBARDevice(f), nil)
	pl, _ := launch.MakePlan(p, c.Layout)
	_ = launch.Run(c, p, pl, 20*time.Millisecond)
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
	p, _ := program()
	f, c := booted(b, p.Cores)
	pl, err := launch.MakePlan(p, c.Layout)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("launch", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if err := launch.Run(c, p, pl, time.Second); err != nil {
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
