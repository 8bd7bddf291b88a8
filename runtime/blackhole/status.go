package blackhole

import (
	"fmt"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/runtime/blackhole/firmware"
)

// Status is what `tcc devices` reports about one chip.
type Status struct {
	// Backend ("kmd", "ttsim" or "fake") and Path (device node or library).
	Backend string `json:"backend"`
	Path    string `json:"path"`
	// Chip is the chip's index in a multi-chip ttsim library (0 else).
	Chip int `json:"chip"`
	// Arch names the chip from its PCI ids ("blackhole", or why not).
	Arch string `json:"arch"`
	// GridX x GridY are tcc's logical worker grid on this chip.
	GridX int `json:"grid_x"`
	GridY int `json:"grid_y"`
	// Harvested lists the harvested Tensix NoC0 columns the runtime uses;
	// HarvestingRead says whether it was read from the chip (false: tcc
	// assumed an unharvested chip).
	Harvested      []int `json:"harvested_columns"`
	HarvestingRead bool  `json:"harvesting_read"`
	// DRAMBanks is the number of DRAM banks programs are given.
	DRAMBanks int `json:"dram_banks"`
	// Booted counts the worker cores whose BRISC reset PC holds a jal to
	// the pinned firmware's base; Idle those of them whose go signal says
	// done (RUN_MSG_DONE); Workers is the number of worker cores probed.
	Booted  int `json:"booted_cores"`
	Idle    int `json:"idle_cores"`
	Workers int `json:"worker_cores"`
}

// Firmware says in words what Booted and Idle mean.
func (s Status) Firmware() string {
	switch {
	case s.Booted == 0:
		return fmt.Sprintf("not loaded (0 of %d worker cores booted)", s.Workers)
	case s.Idle == s.Booted:
		return fmt.Sprintf("loaded and idle on %d of %d worker cores", s.Booted, s.Workers)
	}
	return fmt.Sprintf("loaded on %d of %d worker cores, %d not idle (running or hung)", s.Booted, s.Workers, s.Booted-s.Idle)
}

// Status probes the chip without changing it: for every worker core it
// reads BRISC's reset PC and the go signal of the mailbox.
func (d *Device) Status() (Status, error) {
	c := d.Chip
	info := c.Dev.Info()
	s := Status{Backend: info.Backend, Path: info.Path, Chip: info.Chip, Arch: info.Arch(), GridX: c.Target.GridX, GridY: c.Target.GridY,
		Harvested: c.Harvested, DRAMBanks: c.Target.DRAMBanks}
	l := c.Layout
	jal, err := firmware.JAL(l.Firmware[0].Base)
	if err != nil {
		return s, err
	}
	goAddr := uint64(l.Mailbox.Base) + uint64(l.Msg.GoMessages)
	for y := 0; y < c.Target.GridY; y++ {
		for x := 0; x < c.Target.GridX; x++ {
			at, err := c.Worker(kir.Core{X: x, Y: y})
			if err != nil {
				return s, err
			}
			s.Workers++
			w, err := c.Read32(at, uint64(l.BootCodeBase))
			if err != nil {
				return s, fmt.Errorf("core (%d,%d): reading the reset PC: %w", x, y, err)
			}
			if w != jal {
				continue
			}
			s.Booted++
			g, err := c.Read32(at, goAddr)
			if err != nil {
				return s, fmt.Errorf("core (%d,%d): reading the go signal: %w", x, y, err)
			}
			if uint8(g>>24) == l.RunMsgDone {
				s.Idle++
			}
		}
	}
	return s, nil
}
