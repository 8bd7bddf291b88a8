package persist

import (
	"github.com/tcc-dev/tcc/codegen"
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/ir"
)

// Lazy dependency waits: a data-movement RISC of a worker core waits for
// its phase's dependencies (done[q]) after tcc_phase_begin, just before the
// first top-level statement of its phase body that may touch a buffer other
// than a weight (fixedBuffers), and at the latest before tcc_phase_end. The
// statements before it read only weights, which no phase of the step
// writes, so they may run while the dependencies are still running: a
// matmul's weight reader streams its first blocks into its CB (installed
// at PhaseBegin, after the core's previous phase ended) while the
// activation's producers finish. Every data-movement RISC still waits for
// every dependency before the phase ends on its core, so done[p] still
// implies done[q] for every q that p depends on.
//
// A phase with a CB backed by a buffer (kir.CB.Backing) that is not a
// weight keeps its waits before tcc_phase_begin: its compute thread reads
// that buffer through the CB with no data movement that could wait.

// fixedBuffers returns the names of b's buffers that hold a weight
// (ir.KindWeight, one value per buffer) no program of b writes.
func fixedBuffers(b *codegen.Build) map[string]bool {
	fixed := map[string]bool{}
	for _, s := range b.Buffers {
		if s.Value != nil && s.Value.Kind == ir.KindWeight && len(s.Values) == 0 {
			fixed[s.Name] = true
		}
	}
	for _, bp := range b.Programs {
		for _, r := range bp.Op.Results {
			if s := b.BufferOf(r); s != nil {
				delete(fixed, s.Name)
			}
		}
	}
	return fixed
}

// lazyPhase reports whether phase ph's dependency waits may follow its
// tcc_phase_begin: no CB of the phase is backed by a buffer outside fixed.
func lazyPhase(ph *kir.Phase, fixed map[string]bool) bool {
	for _, cb := range ph.CBs {
		if cb.Backing != "" && !fixed[cb.Backing] {
			return false
		}
	}
	return true
}

// firstTouch returns the index of the first top-level statement of k's body
// that may touch a buffer outside fixed on any of cores (len(k.Body) when
// none does): a statement is taken to touch one when it, or a statement
// nested in it, names an argument whose value on some core is the address
// of such a buffer, or a variable assigned (Let, Assign, For) from an
// expression that names one. The analysis ignores control flow, so it
// may only take too many statements as touching.
func firstTouch(k *kir.Kernel, cores []kir.Core, fixed map[string]bool) int {
	tainted := map[string]bool{} // "a:" + argument, "v:" + variable
	bad := func(v kir.ArgValue) bool { return v.Kind == kir.ValBufferAddr && !fixed[v.Buffer] }
	for _, a := range k.Args {
		if bad(a.Value) {
			tainted["a:"+a.Name] = true
			continue
		}
		if a.Kind != kir.RuntimeArg {
			continue
		}
		for _, c := range cores {
			if vals := k.RuntimeValuesOn(c); a.Index < len(vals) && bad(vals[a.Index]) {
				tainted["a:"+a.Name] = true
				break
			}
		}
	}
	uses := func(s kir.Stmt) bool {
		hit := false
		for _, e := range kir.StmtExprs(s) {
			kir.InspectExpr(e, func(e kir.Expr) bool {
				switch e := e.(type) {
				case kir.ArgRef:
					hit = hit || tainted["a:"+e.Name]
				case kir.Var:
					hit = hit || tainted["v:"+e.Name]
				}
				return !hit
			})
		}
		return hit
	}
	for changed := true; changed; {
		changed = false
		kir.Inspect(k.Body, func(s kir.Stmt) bool {
			var def string
			switch s := s.(type) {
			case kir.Let:
				def = s.Var.Name
			case kir.Assign:
				def = s.Var.Name
			case kir.For:
				def = s.Var.Name
			}
			if def != "" && !tainted["v:"+def] && uses(s) {
				tainted["v:"+def] = true
				changed = true
			}
			return true
		})
	}
	for i, s := range k.Body {
		hit := false
		kir.Inspect([]kir.Stmt{s}, func(s kir.Stmt) bool {
			hit = hit || uses(s)
			return !hit
		})
		if hit {
			return i
		}
	}
	return len(k.Body)
}
