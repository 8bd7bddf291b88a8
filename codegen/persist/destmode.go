package persist

import (
	"github.com/tcc-dev/tcc/codegen/kir"
)

// One DEST mode per merged compute binary.
//
// fp32_dest_acc_en is compiled into a compute binary (DST_ACCUM_MODE), so
// every phase of a merged compute kernel must run with the same DEST
// width. The per-program build gives each kernel its own: the ring
// all-reduce's adders (bf16 local + received, and + residual, each add
// packed to a bf16 CB) run with a 16-bit DEST, every other compute phase
// of qwen27b with fp32 DEST. Where the phases of a merged compute kernel
// disagree, unifyDestModes runs every one of them with fp32 DEST:
//
//   - the phase's kernel (kir.PhaseKernel.Compute, which the simulator,
//     the timing model and the printer all read) is changed, not the
//     source program's, so the per-program build stays as it was;
//   - a DEST holds half the tiles with fp32 DEST: Validate checks every
//     phase's DEST indices against the capacity of the phase's new mode
//     and refuses a phase whose blocks do not fit (rule DEST, naming the
//     phase); the adders use one DEST tile;
//   - numerics: an FPU add or subtract of two bf16 tiles packed to a bf16
//     CB gives the same bits with either DEST (the 16-bit DEST rounds the
//     sum once, as the packer rounds the exact fp32 sum:
//     ir/numerics TestFPUAddDestModes), so the adders' sums, and the
//     persistent run, are bit for bit the per-program build's. Any other
//     promoted phase computes at least as precisely; the simulator runs
//     what is printed.
//
// Promoting a phase kernel changes it on all its cores, which may leave
// another merged kernel mixed, so it repeats until none is.

// unifyDestModes gives every merged compute kernel of prog one DEST width
// (see above) and returns the phase kernels it promoted to fp32 DEST, in
// phase order. Postcondition: the phases of every
// merged compute kernel agree in FP32DestAccEn.
func unifyDestModes(prog *kir.Program) []Promotion {
	ps := prog.Persist
	promoted := map[*kir.PhaseKernel]int{}
	for changed := true; changed; {
		changed = false
		for _, k := range prog.Kernels {
			if k.Processor != kir.ComputeProc {
				continue
			}
			c0 := kir.CoresOf(k.Cores)[0]
			var pks []*kir.PhaseKernel
			var phases []int
			fp32 := false
			for i := range ps.Phases {
				ph := &ps.Phases[i]
				if !inCores(ph.Cores, c0) {
					continue
				}
				if pk := ph.KernelOn(c0, kir.ComputeProc); pk != nil {
					pks, phases = append(pks, pk), append(phases, i)
					fp32 = fp32 || pk.Compute.FP32DestAccEn
				}
			}
			if !fp32 {
				continue
			}
			for j, pk := range pks {
				if !pk.Compute.FP32DestAccEn {
					pk.Compute.FP32DestAccEn = true
					promoted[pk] = phases[j]
					changed = true
				}
			}
		}
	}
	var out []Promotion
	for i := range ps.Phases {
		for j := range ps.Phases[i].Kernels {
			if _, ok := promoted[&ps.Phases[i].Kernels[j]]; ok {
				out = append(out, Promotion{Phase: i, Kernel: ps.Phases[i].Kernels[j].Name})
			}
		}
	}
	return out
}

// Promotion is a phase's compute kernel that runs with fp32 DEST in the
// persistent program, though its program runs it with a 16-bit DEST
// (unifyDestModes).
type Promotion struct {
	Phase  int
	Kernel string
}
