package persist

import (
	"fmt"
	"sort"
	"strings"

	"github.com/tcc-dev/tcc/codegen"
	"github.com/tcc-dev/tcc/codegen/kir"
)

// WithTables prepares a persistent program of b (Build, BuildLoop) for the
// card: Prepare, then MergeComputeConfigs. Its errors are theirs.
func WithTables(p *kir.Program, b *codegen.Build) error {
	if err := Prepare(p, b); err != nil {
		return err
	}
	return MergeComputeConfigs(p)
}

// Prepare readies a persistent program of b for codegen/cpp and
// codegen/hostcfg: it declares the tables buffer (kir.TablesBuffer: the
// core-local barrier words, every phase's CB record and the worker merged
// kernels' argument vectors, see kir.Persist.Tables) and the images buffer (kir.TextBuffer, sized
// by the printed kernels' estimated images) on every worker core, gives
// every worker merged kernel the common arguments persist_ctl and
// persist_tables (the two buffers' addresses) and every merged kernel the
// defines its headers need (MergeDefines), then checks the images
// (kir.ValidatePersistentCode), that every phase's early CBs end below
// every L1 buffer, the two included (earlyOver; Build plans them so), and
// validates the program again (the two buffers take L1 the phases' CBs may
// not use). Errors name the rule.
func Prepare(p *kir.Program, b *codegen.Build) error {
	if p == nil || p.Persist == nil {
		return fmt.Errorf("persist: not a persistent program")
	}
	if p.Buffer(kir.TablesBuffer) != nil {
		return fmt.Errorf("persist: program %q already has its tables", p.Name)
	}
	t := b.Target
	for _, k := range p.Kernels {
		k.Defines = MergeDefines(p, k)
		if !k.OnEth() {
			withCardArgs(k)
		}
	}
	// The tables and the images, as printed, outside the ring
	// (kir.TextBuffer).
	c, err := cardBuffers(p, b)
	if err != nil {
		return err
	}
	p.Buffers = append(p.Buffers, c.tables, c.text)
	estimate := func(k *kir.Kernel) kir.CodeEstimate { return c.est[k] }
	if err := kir.ValidatePersistentCode(p, t, estimate); err != nil {
		return err
	}
	// Early CBs are placed above the CBs of the phase before (a gap the
	// per-phase L1 rule of Validate does not see): they must end below
	// every L1 buffer, these two included (build plans them so).
	if err := earlyOver(t, p.Name, p.Persist, l1Top(t, p.Buffers)); err != nil {
		return err
	}
	return Validate(p, t)
}

// MergeComputeConfigs sets every merged compute kernel's ComputeConfig to
// the one its binaries are built with (MergeCompute). The error lists
// every kernel whose phases cannot share a binary.
func MergeComputeConfigs(p *kir.Program) error {
	var errs []string
	for _, k := range p.Kernels {
		if k.Processor != kir.ComputeProc {
			continue
		}
		cc, err := MergeCompute(p, k)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		k.Compute = cc
	}
	if len(errs) > 0 {
		return fmt.Errorf("persist: %s", strings.Join(errs, "; "))
	}
	return nil
}

// MergeCompute is the compute configuration the binaries of merged compute
// kernel k are built with: what tt-metal compiles into a compute binary
// (MATH_FIDELITY, DST_ACCUM_MODE, APPROX, DST_SYNC_MODE, the unpack-to-DEST
// modes) cannot change between phases: fp32_dest_acc_en, math_approx_mode
// and dst_full_sync_en must agree over the phases (the error names the
// first two phases that disagree; Build already gave every merged compute
// kernel one fp32_dest_acc_en, destmode.go); the math fidelity is the highest of the
// phases'. tcc's default fidelities are exact (each keeps HiFi4's
// products, e.g. HiFi3 for a bfp8_b weight), so the highest computes the
// products the simulator computes; a lossy --prefill-fidelity would not. Its UnpackToDestFP32
// lists merged CB indices (kir.Persist.CBMap), which give every index one
// data format and one unpack-to-DEST mode.
func MergeCompute(p *kir.Program, k *kir.Kernel) (kir.ComputeConfig, error) {
	ps := p.Persist
	c0 := kir.CoresOf(k.Cores)[0]
	var out kir.ComputeConfig
	first := -1
	var phases []int
	for i := range ps.Phases {
		pk := ps.Phases[i].KernelOn(c0, kir.ComputeProc)
		if pk == nil || !inCores(ps.Phases[i].Cores, c0) {
			continue
		}
		phases = append(phases, i)
		c := pk.Compute
		if first < 0 {
			first, out = i, c
			out.UnpackToDestFP32 = nil
		} else {
			if c.FP32DestAccEn != out.FP32DestAccEn || c.MathApproxMode != out.MathApproxMode || c.DstFullSyncEn != out.DstFullSyncEn {
				return kir.ComputeConfig{}, fmt.Errorf("kernel %q: phase %d (%s) and phase %d (%s) differ in fp32_dest_acc_en / math_approx_mode / dst_full_sync_en (%v/%v/%v against %v/%v/%v), which are compiled into the merged compute binary",
					k.Name, first, ps.Phases[first].Name, i, ps.Phases[i].Name, out.FP32DestAccEn, out.MathApproxMode, out.DstFullSyncEn, c.FP32DestAccEn, c.MathApproxMode, c.DstFullSyncEn)
			}
			out.MathFidelity = max(out.MathFidelity, c.MathFidelity)
		}
	}
	// The merged CB indices (kir.Persist.CBMap) give every index one
	// data format and one unpack-to-DEST mode over all phases.
	cbMap, err := ps.CBMap()
	if err != nil {
		return kir.ComputeConfig{}, fmt.Errorf("kernel %q: %w", k.Name, err)
	}
	merged := map[int]bool{}
	for _, i := range phases {
		pk := ps.Phases[i].KernelOn(c0, kir.ComputeProc)
		for _, cb := range pk.Compute.UnpackToDestFP32 {
			merged[cbMap[i][cb]] = true
		}
	}
	out.UnpackToDestFP32 = nil
	for cb := range merged {
		out.UnpackToDestFP32 = append(out.UnpackToDestFP32, cb)
	}
	sort.Ints(out.UnpackToDestFP32)
	return out, nil
}

// headerDefines are the defines a header tcc's kernels include reads:
// compute_kernel_api/reduce.h's default template arguments. Every call
// tcc prints passes them explicitly (reduce_init / reduce_tile<op, dim>),
// so their value does not matter, only that they are defined. The other
// defines of tcc's kernels (MM_CORES, CCL_STEPS, ...) record a phase's
// plan for the reader and are read by no code.
var headerDefines = map[string]bool{"REDUCE_OP": true, "REDUCE_DIM": true}

// MergeDefines is the defines merged kernel k is built with (a binary has
// one set): the headerDefines any of its phase kernels defines, each with
// the first such phase's value. The phases' other defines are notes read
// by no code and are left out. The result is nil when there are none.
func MergeDefines(p *kir.Program, k *kir.Kernel) map[string]string {
	ps := p.Persist
	c0 := kir.CoresOf(k.Cores)[0]
	var out map[string]string
	for i := range ps.Phases {
		if !inCores(ps.Phases[i].Cores, c0) {
			continue
		}
		pk := ps.Phases[i].KernelOn(c0, k.Processor)
		if pk == nil {
			continue
		}
		for n, v := range pk.Defines {
			if !headerDefines[n] {
				continue
			}
			if out == nil {
				out = map[string]string{}
			}
			if _, ok := out[n]; !ok {
				out[n] = v
			}
		}
	}
	return out
}
