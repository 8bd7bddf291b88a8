package persist_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tcc-dev/tcc/codegen"
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/persist"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
)

// diamond compiles
//
//	p0 a = x+1; p1 b = x+2; p2 c = a+b; p3 d = a+3; p4 e = c+d; p5 f = e+a; p6 x2 = f*2 (new state x)
//
// where x is a state updated in place by p6.
func diamond(t *testing.T) *codegen.Build {
	t.Helper()
	b := ir.NewBuilder("diamond")
	x := b.State("x", ir.T(ir.BF16, 32, 64))
	a := b.AddScalar(x, 1)
	bb := b.AddScalar(x, 2)
	c := b.Add(a, bb)
	d := b.AddScalar(a, 3)
	e := b.Add(c, d)
	f := b.Add(e, a)
	b.Output(f)
	b.UpdateState(x, b.MulScalar(f, 2))
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

func TestDependencies(t *testing.T) {
	b := diamond(t)
	_, plan, err := persist.Build(b)
	if err != nil {
		t.Fatal(err)
	}
	var got [][]int
	for _, ph := range plan.Phases {
		got = append(got, ph.Deps)
	}
	// d (p3) takes b's DRAM buffer once p2 has read b (codegen's liveness
	// reuse), so p3 waits for p2 (WAR on the shared name), which implies its
	// RAW on a (p0); p4 reads c (p2) and d (p3), p2 implied by p3; p5 reads
	// a (p0) but p0 is implied by p4; p6 writes x, read by p0 and p1 (WAR),
	// both implied by p5 (RAW on f).
	want := [][]int{nil, nil, {0, 1}, {2}, {3}, {4}, {5}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("dependencies (-want +got):\n%s", diff)
	}
}

// TestMergedKernels: every core of every phase runs one merged kernel per
// RISC; each runs the core's phases in order between PhaseBegin and
// PhaseEnd, the data-movement ones after their dependency waits; no
// get_semaphore is left (re-homed into the control block); the runtime
// values of every core fill the merged argument table.
func TestMergedKernels(t *testing.T) {
	b := diamond(t)
	p, plan, err := persist.Build(b)
	if err != nil {
		t.Fatal(err)
	}
	if p.Persist == nil || len(p.Persist.Phases) != len(b.Programs) || len(plan.Phases) != len(b.Programs) {
		t.Fatalf("persistent program has %d phases, want %d", len(p.Persist.Phases), len(b.Programs))
	}
	if p.Buffer(persist.CtlBuffer) == nil {
		t.Errorf("program does not declare the control buffer %q", persist.CtlBuffer)
	}
	perCore := map[kir.Core]int{}
	for _, k := range p.Kernels {
		t.Run(k.Name, func(t *testing.T) {
			cores := kir.CoresOf(k.Cores)
			for _, c := range cores {
				perCore[c]++
			}
			var phases []int
			open, waits := -1, 0
			for _, s := range k.Body {
				if _, ok := s.(kir.NoCSemaphoreWaitMin); ok {
					waits++ // a dependency wait: before or inside its phase (lazy.go)
				}
			}
			kir.Inspect(k.Body, func(s kir.Stmt) bool {
				switch s := s.(type) {
				case kir.PhaseBegin:
					if open >= 0 {
						t.Errorf("PhaseBegin(%d) inside phase %d", s.Phase, open)
					}
					open = s.Phase
					phases = append(phases, s.Phase)
				case kir.PhaseEnd:
					if open != s.Phase {
						t.Errorf("PhaseEnd(%d) closes phase %d", s.Phase, open)
					}
					open = -1
				}
				for _, e := range kir.StmtExprs(s) {
					kir.InspectExpr(e, func(e kir.Expr) bool {
						if _, ok := e.(kir.GetSemaphore); ok {
							t.Errorf("get_semaphore left in the merged body")
						}
						return true
					})
				}
				return true
			})
			for i := 1; i < len(phases); i++ {
				if phases[i] <= phases[i-1] {
					t.Errorf("phases %v are not increasing", phases)
				}
			}
			wantWaits := 0
			if k.Processor != kir.ComputeProc {
				for _, ph := range phases {
					wantWaits += len(plan.Phases[ph].Deps)
				}
			}
			if waits != wantWaits {
				t.Errorf("%d dependency waits, want %d", waits, wantWaits)
			}
			n := len(k.ArgsOfKind(kir.RuntimeArg))
			for _, c := range cores {
				if got := len(k.RuntimeValuesOn(c)); got != n {
					t.Errorf("core %s: %d runtime values, want %d", c, got, n)
				}
			}
		})
	}
	for c, n := range perCore {
		if n != 3 {
			t.Errorf("core %s runs %d merged kernels, want 3 (BRISC, NCRISC, compute)", c, n)
		}
	}
}

func TestBuildErrors(t *testing.T) {
	if _, _, err := persist.Build(nil); err == nil || !strings.Contains(err.Error(), "no programs") {
		t.Errorf("Build(nil) = %v, want a no-programs error", err)
	}
	b := diamond(t)
	// Two kernels of one phase on one RISC of a core.
	k := *b.Programs[1].Kernel.Kernels[0]
	k.Name = "twin"
	b.Programs[1].Kernel.Kernels = append(b.Programs[1].Kernel.Kernels, &k)
	_, _, err := persist.Build(b)
	if err == nil || !strings.Contains(err.Error(), "phase 1") || !strings.Contains(err.Error(), `"twin"`) {
		t.Errorf("Build with two kernels on one RISC = %v, want an error naming phase 1 and the kernels", err)
	}
}

// TestValidate: the diamond's persistent program is valid phase by phase;
// a merged kernel naming a CB its phase does not configure is refused
// naming the phase.
func TestValidate(t *testing.T) {
	p, _, err := persist.Build(diamond(t))
	if err != nil {
		t.Fatal(err)
	}
	bh := target.Blackhole()
	if err := persist.Validate(p, bh); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	// Phase 2's CBs without its first: its kernels name a CB it lacks.
	ph := &p.Persist.Phases[2]
	ph.CBs = ph.CBs[1:]
	err = persist.Validate(p, bh)
	if err == nil || !strings.Contains(err.Error(), "phase 2 (") || !strings.Contains(err.Error(), "cb-count") {
		t.Errorf("Validate without a CB of phase 2 = %v, want a cb-count error naming phase 2", err)
	}
}

// TestBuildDeterministic: two builds of one program are identical.
func TestBuildDeterministic(t *testing.T) {
	a, _, err := persist.Build(diamond(t))
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := persist.Build(diamond(t))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(a, b); diff != "" {
		t.Errorf("second build differs (-first +second):\n%s", diff)
	}
}

// TestDoneMulticast: a phase's leader sets the done word of its worker
// dependents by multicast (noc_semaphore_set_multicast of its count word),
// not by one atomic increment per dependent core: in the diamond build no
// merged kernel increments another worker core's done word.
func TestDoneMulticast(t *testing.T) {
	b := diamond(t)
	p, _, err := persist.Build(b)
	if err != nil {
		t.Fatal(err)
	}
	ps := p.Persist
	mcasts, incs := 0, 0
	for _, k := range p.Kernels {
		kir.Inspect(k.Body, func(s kir.Stmt) bool {
			switch s := s.(type) {
			case kir.NoCSemaphoreSetMulticast:
				mcasts++
			case kir.NoCSemaphoreInc:
				// A done word's offset is below the count words'.
				if a, ok := s.Addr.(kir.NoCAddr); ok {
					if add, ok := a.Addr.(kir.Bin); ok {
						if off, ok := add.Y.(kir.Const); ok && uint32(off.V) < ps.CountWord(0) && !persistSelf(a, k) {
							incs++
						}
					}
				}
			}
			return true
		})
	}
	if mcasts == 0 {
		t.Error("no done multicast in the merged kernels")
	}
	if incs != 0 {
		t.Errorf("%d increments of another core's done word; want the multicast", incs)
	}
}

// persistSelf reports whether a's NoC coordinates are the arguments of one
// of k's own cores (the leader increments its own done word).
func persistSelf(a kir.NoCAddr, k *kir.Kernel) bool {
	x, ok := a.X.(kir.ArgRef)
	if !ok {
		return false
	}
	for _, c := range kir.CoresOf(k.Cores) {
		if x.Name == fmt.Sprintf("persist_nx_%d_%d", c.X, c.Y) {
			return true
		}
	}
	return false
}
