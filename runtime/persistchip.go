package runtime

import (
	"fmt"
	"slices"
	"time"

	"github.com/tcc-dev/tcc/codegen/persist"
	"github.com/tcc-dev/tcc/runtime/blackhole"
)

// ChipStep is one step of a persistent launch on the chip: the tokens the
// host read from the chip's history while the device ran, the simulator's
// for the same step, and the host's wall time for the step (doorbell,
// done polls, token read; on the fake chip this includes the fake's play
// of the step, which the fake times separately).
type ChipStep struct {
	Step        int
	Tokens, Sim []float32
	Match       bool
	Host        time.Duration
}

// PersistentChipRun is what DrivePersistent did.
type PersistentChipRun struct {
	// Launches is the number of launches on the chip: 1.
	Launches int
	Steps    []ChipStep
}

// DrivePersistent runs the multi-step persistent program
// (LoadPersistentLoop) of a chip mesh (OpenChip, one device): the
// simulator runs it first as the reference (one launch, its token history
// holds every step's tokens), from the same buffers the chip gets; then
// the chip runs it in ONE launch (blackhole.Device.LaunchPersistent): per
// step the host rings the doorbell, polls the done word (a step that does
// not finish in time is a *blackhole.PersistentStallError naming the
// stalled cores, their processors and phases), and reads the step's
// tokens from the chip's history without stopping the device; after the
// last step it stops the launch. onStep, when not nil, sees each step as
// it completes. The chip's Builder builds the merged kernels: those
// persist.Sources prints for p, compiled by the JIT. Every step's tokens
// are compared with the simulator's (ChipStep.Match).
func (e *Executable) DrivePersistent(onStep func(ChipStep) error) (*PersistentChipRun, error) {
	p := e.persistent
	if p == nil || p.Persist == nil || p.Persist.Loop == nil {
		return nil, fmt.Errorf("runtime: no multi-step persistent program loaded (LoadPersistentLoop)")
	}
	dev := e.Mesh.chip
	if dev == nil {
		return nil, fmt.Errorf("runtime: mesh backend %s has no chip (OpenChip); the simulator runs persistent programs with RunPersistent", e.Mesh.Backend)
	}
	if len(e.Mesh.chips) > 1 {
		return nil, fmt.Errorf("runtime: persistent programs run on one chip; mesh %s has %d", e.Mesh.Shape, len(e.Mesh.chips))
	}
	sim := e.Mesh.devices[0]
	ref := blackhole.Reference{Mem: simMemory{sim}, Binding: e.binding}
	names := make([]string, len(p.Buffers))
	for i, b := range p.Buffers {
		names[i] = b.Name
	}
	if err := dev.UploadBuffers(names, ref); err != nil {
		return nil, fmt.Errorf("runtime: persistent program %s: %w", p.Name, err)
	}
	if _, err := e.Mesh.launch(0, p, e.binding); err != nil {
		return nil, fmt.Errorf("runtime: persistent program %s on the simulator: %w", p.Name, err)
	}
	hname := e.binding[persist.HistoryBuffer]
	ht := e.Mesh.tensors[hname]
	want, err := e.Mesh.download(0, ht)
	if err != nil {
		return nil, err
	}
	row := ht
	row.Pages, row.Shape = 1, ht.Shape[1:]
	per := row.Shape.Numel()
	pb, err := e.persistentBuilder(p)
	if err != nil {
		return nil, err
	}
	s, err := dev.LaunchPersistentWith(p, ref, pb)
	if err != nil {
		return nil, fmt.Errorf("runtime: %w", err)
	}
	run := &PersistentChipRun{Launches: 1}
	page := make([]byte, ht.PageSize)
	for step := 0; step < p.Persist.Steps; step++ {
		t0 := time.Now()
		if err := s.Ring(step + 1); err != nil {
			return run, err
		}
		if err := s.WaitStep(step); err != nil {
			return run, err
		}
		if err := s.ReadHistory(step, page); err != nil {
			return run, err
		}
		host := time.Since(t0)
		got, err := Decode(row, page)
		if err != nil {
			return run, err
		}
		cs := ChipStep{Step: step, Tokens: got, Sim: want[step*per : (step+1)*per], Host: host}
		cs.Match = slices.Equal(cs.Tokens, cs.Sim)
		run.Steps = append(run.Steps, cs)
		if onStep != nil {
			if err := onStep(cs); err != nil {
				return run, err
			}
		}
	}
	if err := s.Stop(); err != nil {
		return run, err
	}
	return run, nil
}
