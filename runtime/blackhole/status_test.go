package blackhole

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
	require.NoError(t, fwtest.WriteSet(dir))
	d, err := Open(Options{Backend: "fake", Fake: fake.New()}, fwOnly{dir})
	require.NoError(t, err)

	s, err := d.Status()
	require.NoError(t, err)
	assert.Equal(t, "blackhole", s.Arch)
	assert.Equal(t, [3]int{11, 10, 110}, [3]int{s.GridX, s.GridY, s.Workers}, "grid x, y and worker cores")
	assert.Equal(t, 8, s.DRAMBanks)
	assert.False(t, s.HarvestingRead, "tcc does not read the harvesting fuses yet")
	assert.Equal(t, "not loaded (0 of 110 worker cores booted)", s.Firmware())

	require.NoError(t, d.boot([]kir.Core{{X: 0, Y: 0}, {X: 3, Y: 4}}))
	s, err = d.Status()
	require.NoError(t, err)
	assert.Equal(t, [2]int{2, 2}, [2]int{s.Booted, s.Idle}, "booted and idle cores")
	assert.Equal(t, "loaded and idle on 2 of 110 worker cores", s.Firmware())
}

func TestStatusNotIdle(t *testing.T) {
	s := Status{Booted: 3, Idle: 1, Workers: 110}
	assert.Equal(t, "loaded on 3 of 110 worker cores, 2 not idle (running or hung)", s.Firmware())
}
