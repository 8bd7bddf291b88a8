package persist

import (
	"errors"
	"fmt"
	"strings"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/target"
)

// Validate checks a persistent program against the card's rules. The
// whole program: at most one merged kernel per RISC of a core, and every
// kernel's phases balanced (each PhaseBegin closed by its PhaseEnd, in
// increasing phase order). Each phase: kir.Validate on the phase as a
// program of its own (its CBs, the program's buffers, the control buffer
// included, and each merged kernel's statements between the phase's
// PhaseBegin and PhaseEnd with the phase's argument table and runtime
// values), so CB, argument (per phase: on the card each phase's
// arguments are a table of their own), DEST, L1 and code rules hold per
// phase. Exempt, because they are properties of the phase and not of the
// merged kernel: the CBs a merged kernel names (configured per phase), the
// argument table's size over all phases, and the code size of the whole
// merged kernel (its text holds every phase's; codegen/cpp prints it with
// the phases' bodies shared, checked by kir.ValidatePersistentCode in
// Prepare). The errors name the phase.
func Validate(p *kir.Program, t *target.Target) error {
	if p == nil || p.Persist == nil {
		return errors.New("persist: not a persistent program")
	}
	var errs []error
	type slot struct {
		c    kir.Core
		proc kir.Processor
	}
	seen := map[slot]string{}
	for _, k := range p.Kernels {
		for _, c := range kir.CoresOf(k.Cores) {
			if o, dup := seen[slot{c, k.Processor}]; dup {
				errs = append(errs, &kir.RuleError{Rule: kir.RuleProcessor, Program: p.Name, Kernel: k.Name, Core: &c, CB: kir.NoCB,
					Msg: fmt.Sprintf("kernels %q and %q both run on %s", o, k.Name, k.Processor)})
			}
			seen[slot{c, k.Processor}] = k.Name
		}
		if err := balanced(k); err != nil {
			errs = append(errs, fmt.Errorf("persist: program %q, kernel %q: %w", p.Name, k.Name, err))
		}
	}
	for i := range p.Persist.Phases {
		view := phaseView(p, i)
		if err := kir.Validate(view, t); err != nil {
			errs = append(errs, fmt.Errorf("persist: phase %d (%s): %w", i, p.Persist.Phases[i].Name, err))
		}
	}
	return errors.Join(errs...)
}

// balanced checks that k's top-level body opens and closes its phases in
// increasing order.
func balanced(k *kir.Kernel) error {
	open, last := -1, -1
	for _, s := range StepBody(k.Body) {
		switch s := s.(type) {
		case kir.PhaseBegin:
			if open >= 0 || s.Phase <= last {
				return fmt.Errorf("tcc_phase_begin(%d) after phase %d (open: %d)", s.Phase, last, open)
			}
			open, last = s.Phase, s.Phase
		case kir.PhaseEnd:
			if open != s.Phase {
				return fmt.Errorf("tcc_phase_end(%d) closes phase %d", s.Phase, open)
			}
			open = -1
		}
	}
	if open >= 0 {
		return fmt.Errorf("phase %d is not closed", open)
	}
	return nil
}

// phaseView is phase i of p as a program of its own (see Validate): one
// kernel per kernel of the phase's source program, over the source
// kernel's cores (the merged kernels split them by phase sequence; the
// static checks, which take an argument the same on every core of a kernel
// as a constant, must see the cores the source kernel had), with the
// phase's statements, arguments and runtime values of the merged kernels.
func phaseView(p *kir.Program, i int) *kir.Program {
	ph := &p.Persist.Phases[i]
	v := &kir.Program{Name: fmt.Sprintf("%s/phase%d", p.Name, i), CBs: ph.CBs, Buffers: p.Buffers}
	prefix := ArgPrefix(i)
	views := map[*kir.PhaseKernel]*kir.Kernel{}
	for _, k := range p.Kernels {
		body, ok := segment(StepBody(k.Body), i)
		cores := kir.CoresOf(k.Cores)
		pk := ph.KernelOn(cores[0], k.Processor)
		if !ok || pk == nil {
			continue
		}
		lo, n := -1, 0
		for _, a := range k.Args {
			if a.Kind == kir.RuntimeArg && strings.HasPrefix(a.Name, prefix) {
				if lo < 0 {
					lo = a.Index
				}
				n++
			}
		}
		vk := views[pk]
		if vk == nil {
			vk = &kir.Kernel{Name: k.Name, Role: k.Role, Processor: k.Processor, NoC: pk.NoC, TXQ: pk.TXQ, Cores: pk.Cores, Compute: pk.Compute, Defines: pk.Defines, Body: body}
			idx := map[kir.ArgKind]int{}
			for _, a := range k.Args {
				if strings.HasPrefix(a.Name, prefix) || strings.HasPrefix(a.Name, "persist_") && a.Kind != kir.RuntimeArg {
					a.Index = idx[a.Kind]
					idx[a.Kind]++
					vk.Args = append(vk.Args, a)
				}
			}
			views[pk] = vk
			v.Kernels = append(v.Kernels, vk)
		}
		if n > 0 {
			for _, c := range cores {
				vk.SetRuntimeArgs(c, k.RuntimeValuesOn(c)[lo:lo+n]...)
			}
		}
	}
	return v
}

// segment is the statements of body between PhaseBegin(p) and PhaseEnd(p)
// (the phase's dependency waits before and its signals after are the
// persistent program's own), and whether the body runs phase p.
func segment(body []kir.Stmt, p int) ([]kir.Stmt, bool) {
	start := -1
	for j, s := range body {
		switch s := s.(type) {
		case kir.PhaseBegin:
			if s.Phase == p {
				start = j + 1
			}
		case kir.PhaseEnd:
			if s.Phase == p && start >= 0 {
				return body[start:j], true
			}
		}
	}
	return nil, false
}

// CodeBytes is the largest estimated binary of p's merged kernels
// (kir.EstimateCode) and that kernel's name.
func CodeBytes(p *kir.Program) (int, string) {
	best, name := 0, ""
	for _, k := range p.Kernels {
		if b := kir.EstimateCode(k).Bytes; b > best {
			best, name = b, k.Name
		}
	}
	return best, name
}
