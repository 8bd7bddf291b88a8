package timing

import (
	"fmt"

	"github.com/tcc-dev/tcc/codegen/kir"
)

// PredictPersistent predicts b's step run as the persistent program prog
// (codegen/persist, built from b's programs in order): ONE simulation of
// prog per device (a mesh row together when prog has ethernet kernels),
// so phases overlap where their dataflow allows and share the DRAM banks,
// NoC ports and links; one launch, so the step is the last thread's
// finish plus one fixed program cost (prm.FixedProgramUS, fitted on
// measured programs: kept once, for the launch) and one launch gap. The
// report's Programs are the phases (StartUS and US from a phase's first
// PhaseBegin to its last PhaseEnd on the device; phases overlap, so their
// US do not add up to the step); LaunchUSTotal is the one launch gap.
func PredictPersistent(b *Build, prog *kir.Program, prm *Params, meta Meta) (*Report, error) {
	if b == nil || prog == nil || prog.Persist == nil {
		return nil, fmt.Errorf("timing: PredictPersistent needs a build and its persistent program")
	}
	if prm == nil {
		prm = Default()
	}
	ps := prog.Persist
	if len(ps.Phases) != len(b.Programs) {
		return nil, fmt.Errorf("timing: persistent program %q has %d phases; the build has %d programs", prog.Name, len(ps.Phases), len(b.Programs))
	}
	r := newReport(b, meta)
	r.Persistent, r.Phases = true, len(ps.Phases)
	r.Signatures = 1
	contents := map[string][]uint32{}
	for _, s := range b.Buffers {
		if s.Words != nil && prog.Buffer(s.Name) != nil {
			contents[s.Name] = s.Words
		}
	}
	n := 1
	rowDevices := max(b.Mesh.Cols, 1)
	if IsMesh(prog) {
		n = rowDevices
	}
	pt, err := Simulate(prog, b.Target, prm, Options{Devices: n, Contents: contents})
	if err != nil {
		return nil, fmt.Errorf("timing: persistent program: %w", err)
	}
	r.SimulatedSteps = pt.Steps
	for d := range r.DeviceStepUS {
		dt := pt.Devices[(d%rowDevices)%len(pt.Devices)]
		r.DeviceStepUS[d] = round3(dt.US + prm.LaunchGapUS)
		for i, p := range b.Programs {
			span := PhaseSpan{}
			if i < len(dt.Phases) {
				span = dt.Phases[i]
			}
			row := ProgramRow{Device: d, Index: i, Op: p.Op.Name(), Layer: regionIndex(p.Op), Region: regionKind(p.Op), Cores: len(ps.Phases[i].Cores),
				US: round3(span.EndUS - span.StartUS), StartUS: round3(span.StartUS), MathFidelity: fidelity(p.Kernel),
				Inputs: shapes(p.Op.Operands), Outputs: shapes(p.Op.Results), Operands: tensorTypes(p.Op.Operands), Results: tensorTypes(p.Op.Results)}
			r.Programs = append(r.Programs, row)
		}
	}
	r.LaunchUSTotal = round3(prm.LaunchGapUS)
	return r, r.finish(b, prm)
}
