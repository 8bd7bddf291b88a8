package persist_test

import (
	"testing"

	"github.com/tcc-dev/tcc/codegen"
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/persist"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
)

// chain compiles p0 a = x+1; p1 y = a @ w (a decode matmul, w a weight).
func chain(t *testing.T) *codegen.Build {
	t.Helper()
	b := ir.NewBuilder("chain")
	x := b.Input("x", ir.T(ir.BF16, 32, 256))
	a := b.AddScalar(x, 1)
	b.Output(b.Matmul(a, b.Weight("w.weight", ir.T(ir.BF16, 256, 512))))
	g, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	build, err := codegen.Compile(g, target.Blackhole())
	if err != nil {
		t.Fatal(err)
	}
	return build
}

// phaseOrder lists, for phase p of body, what a data-movement RISC does
// after tcc_phase_begin(p) at the top level: "wait" for a dependency wait,
// "read" for a statement that issues a NoC read (nested or not), until
// tcc_phase_end(p).
func phaseOrder(body []kir.Stmt, p int) []string {
	var out []string
	in := false
	for _, s := range body {
		switch s := s.(type) {
		case kir.PhaseBegin:
			in = s.Phase == p
			continue
		case kir.PhaseEnd:
			if s.Phase == p {
				return out
			}
		case kir.NoCSemaphoreWaitMin:
			if in {
				out = append(out, "wait")
			}
			continue
		}
		if !in {
			continue
		}
		read := false
		kir.Inspect([]kir.Stmt{s}, func(s kir.Stmt) bool {
			if _, ok := s.(kir.NoCAsyncRead); ok {
				read = true
			}
			return !read
		})
		if read && (len(out) == 0 || out[len(out)-1] != "read") {
			out = append(out, "read")
		}
	}
	return out
}

// TestLazyWaits: the matmul phase's weight reads come before its
// dependency wait (after tcc_phase_begin) on the RISC that reads the
// weights; every data-movement RISC of the phase still waits inside it.
func TestLazyWaits(t *testing.T) {
	b := chain(t)
	p, plan, err := persist.Build(b)
	if err != nil {
		t.Fatal(err)
	}
	mm := len(b.Programs) - 1
	if len(plan.Phases[mm].Deps) == 0 {
		t.Fatalf("phase %d (%s) has no dependencies", mm, plan.Phases[mm].Op)
	}
	early := 0
	for _, k := range p.Kernels {
		if k.Processor == kir.ComputeProc {
			continue
		}
		t.Run(k.Name, func(t *testing.T) {
			order := phaseOrder(k.Body, mm)
			waits := 0
			for _, o := range order {
				if o == "wait" {
					waits++
				}
			}
			if waits != len(plan.Phases[mm].Deps) {
				t.Errorf("phase %d: %v has %d dependency waits inside the phase, want %d", mm, order, waits, len(plan.Phases[mm].Deps))
			}
			if len(order) > 0 && order[0] == "read" {
				early++
			}
		})
	}
	if early == 0 {
		t.Errorf("no RISC of phase %d (%s) reads before its dependency wait", mm, plan.Phases[mm].Op)
	}
}
