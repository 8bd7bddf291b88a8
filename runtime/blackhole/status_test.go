package blackhole

import (
	"strings"
	"testing"

	"github.com/tcc-dev/tcc/codegen/hostcfg"
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/runtime/blackhole/access/fake"
	"github.com/tcc-dev/tcc/runtime/blackhole/firmware"
	"github.com/tcc-dev/tcc/runtime/blackhole/firmware/fwtest"
)

type fwOnly struct{ dir string }

func (b fwOnly) Firmware() (firmware.Set, error) { return firmware.ReadSet(b.dir) }
func (fwOnly) Kernel(string, *hostcfg.ProgramConfig, *hostcfg.KernelConfig) (map[int][]byte, error) {
	return nil, nil
}

func TestStatus(t *testing.T) {
	dir := t.TempDir()
	if err := fwtest.WriteSet(dir); err != nil {
		t.Fatal(err)
	}
	chip := fake.New()
	d, err := Open(Options{Backend: "fake", Fake: chip}, fwOnly{dir})
	if err != nil {
		t.Fatal(err)
	}
	s, err := d.Status()
	if err != nil {
		t.Fatal(err)
	}
	if s.Arch != "blackhole" || s.GridX != 11 || s.GridY != 10 || s.Workers != 110 || s.DRAMBanks != 8 {
		t.Errorf("status %+v: want a blackhole, 11x10 = 110 workers, 8 DRAM banks", s)
	}
	if s.Booted != 0 || !strings.HasPrefix(s.Firmware(), "not loaded (0 of 110") {
		t.Errorf("fresh chip: booted %d, firmware %q; want none", s.Booted, s.Firmware())
	}
	if err := d.boot([]kir.Core{{X: 0, Y: 0}, {X: 3, Y: 4}}); err != nil {
		t.Fatal(err)
	}
	if s, err = d.Status(); err != nil {
		t.Fatal(err)
	}
	if s.Booted != 2 || s.Idle != 2 || s.Firmware() != "loaded and idle on 2 of 110 worker cores" {
		t.Errorf("after booting 2 cores: booted %d idle %d, %q", s.Booted, s.Idle, s.Firmware())
	}
}
