package kir

import (
	"fmt"

	"github.com/tcc-dev/tcc/codegen/target"
)

// PersistentImages is the estimated L1 a persistent program's kernel
// images take on its worker cores: per core the sum of its merged kernels'
// binaries (estimate, as codegen/cpp prints them), each rounded up to the
// ring's alignment; Bytes is the largest, on Core.
type PersistentImages struct {
	Bytes int
	Core  Core
}

// EstimatePersistentImages is PersistentImages of p with each kernel's
// binaries from estimate.
func EstimatePersistentImages(p *Program, t *target.Target, estimate func(*Kernel) CodeEstimate) PersistentImages {
	s := estimateProgramCode(p, t, estimate)
	return PersistentImages{Bytes: s.Images, Core: s.ImagesCore}
}

// ValidatePersistentCode checks rule code-size for a persistent program
// (Persist) whose kernels print with their phases' bodies shared
// (codegen/cpp; estimate gives each merged kernel's binaries as printed)
// and whose images live in the L1 buffer TextBuffer, outside the kernel
// config ring (target.CodeSize). It holds when: every worker binary is at
// most XIPImageBytes; TextBuffer's page holds every worker core's images;
// the ring's remaining components (PersistentRing: the worker merged
// kernels' RingCommonArgs, their other arguments being in the tables
// buffer) end strictly below RingBytes; every ethernet kernel's image is at most EthKernelBytes (the
// ethernet cores keep their kernels in their own kernel L1). The per-
// processor budgets of Target.CodeBytes, which keep one kernel of an
// ordinary program from taking most of the ring, do not apply. Errors name
// the kernel or core, the components and the bytes over.
func ValidatePersistentCode(p *Program, t *target.Target, estimate func(*Kernel) CodeEstimate) error {
	if p == nil || p.Persist == nil {
		return fmt.Errorf("kir: ValidatePersistentCode needs a persistent program")
	}
	var errs Errors
	add := func(kernel string, c *Core, format string, a ...any) {
		errs = append(errs, &RuleError{Rule: RuleCodeSize, Program: p.Name, Kernel: kernel, Core: c, CB: NoCB, Msg: "persistent: " + fmt.Sprintf(format, a...)})
	}
	for _, k := range p.Kernels {
		e := estimate(k)
		if k.OnEth() {
			if e.Bytes > t.Code.EthKernelBytes {
				add(k.Name, nil, "the merged ethernet kernel's estimated %d bytes exceed the %d-byte ERISC kernel limit by %d", e.Bytes, t.Code.EthKernelBytes, e.Bytes-t.Code.EthKernelBytes)
			}
			continue
		}
		if e.Bytes > t.Code.XIPImageBytes {
			add(k.Name, nil, "an estimated %d-byte image exceeds MEM_MAX_KERNEL_SIZE (%d bytes) by %d", e.Bytes, t.Code.XIPImageBytes, e.Bytes-t.Code.XIPImageBytes)
		}
	}
	s := estimateProgramCode(p, t, estimate)
	text := p.Buffer(TextBuffer)
	switch {
	case text == nil:
		add("", nil, "no %s buffer for the kernel images (codegen/persist.WithTables)", TextBuffer)
	case text.PageSize < s.Images:
		c := s.ImagesCore
		add("", &c, "the kernel images need an estimated %d bytes on core %s; buffer %s holds %d", s.Images, c, TextBuffer, text.PageSize)
	}
	if r := PersistentRing(p, t); r.Bytes() >= t.Code.RingBytes {
		add("", nil, "the kernel config ring needs an estimated %d bytes of arguments (runtime %d, common %d), %d more than the %d-byte ring holds",
			r.Bytes(), r.RuntimeArgs, r.CommonArgs, r.Bytes()-t.Code.RingBytes+1, t.Code.RingBytes-1)
	}
	if len(errs) == 0 {
		return nil
	}
	return errs
}

// PersistentRingSize is what a persistent program's worker cores keep in
// the kernel config ring besides the images (which are in TextBuffer):
// their merged kernels' ring arguments, semaphores and CB configs (the
// program's own; each phase's CBs are in the tables buffer). TablesArgs
// is, for comparison, the largest worker core's argument vectors in the
// tables buffer (Tables.Args), on TablesCore.
type PersistentRingSize struct {
	RuntimeArgs, CommonArgs, Semaphores, CBConfigs int
	TablesArgs                                     int
	TablesCore                                     Core
}

// Bytes is the ring's use.
func (r PersistentRingSize) Bytes() int {
	return r.RuntimeArgs + r.CommonArgs + r.Semaphores + r.CBConfigs
}

// PersistentRing is p's PersistentRingSize: per processor with a worker
// merged kernel, its RingCommonArgs (no runtime arguments); the
// semaphores and CB configs as for any program.
func PersistentRing(p *Program, t *target.Target) PersistentRingSize {
	s := estimateProgramCode(p, t, func(*Kernel) CodeEstimate { return CodeEstimate{} })
	r := PersistentRingSize{Semaphores: s.Semaphores, CBConfigs: s.CBConfigs}
	procs := map[Processor]bool{}
	for _, k := range p.Kernels {
		if !k.OnEth() {
			procs[k.Processor] = true
		}
	}
	r.CommonArgs = len(procs) * target.AlignUp(4*len(RingCommonArgs), t.Code.Align)
	if tb, err := p.Persist.Tables(); err == nil {
		for _, c := range p.Cores() {
			if c.IsEth() {
				continue
			}
			slots, _ := tb.Args(p, c)
			n := 0
			for _, v := range slots {
				n += 4 * (v.RuntimeWords + v.CommonWords)
			}
			if n > r.TablesArgs {
				r.TablesArgs, r.TablesCore = n, c
			}
		}
	}
	return r
}
