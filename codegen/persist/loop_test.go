package persist_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/tcc-dev/tcc/codegen"
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/persist"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/sim/kexec"
)

// oneTile compiles a step whose state y (one 32x32 tile) is updated in
// place: y2 = y+1.
func oneTile(t *testing.T) (*codegen.Build, *ir.Value) {
	t.Helper()
	b := ir.NewBuilder("onetile")
	y := b.State("y", ir.T(ir.BF16, 32, 32))
	y2 := b.AddScalar(y, 1)
	b.Output(y2)
	b.UpdateState(y, y2)
	g, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	build, err := codegen.Compile(g, target.Blackhole())
	if err != nil {
		t.Fatal(err)
	}
	return build, y2
}

// TestBuildLoop: BuildLoop loops every merged kernel over the steps and
// declares a history of one page per step; bad input is an error naming
// what is wrong.
func TestBuildLoop(t *testing.T) {
	tile, y2 := oneTile(t)
	dia := diamond(t)
	cases := []struct {
		name   string
		b      *codegen.Build
		steps  int
		tokens *ir.Value
		err    string
	}{
		{"ok", tile, 3, y2, ""},
		{"no steps", tile, 0, y2, "want at least 1"},
		{"no tokens", tile, 3, nil, "needs a build and its tokens value"},
		{"tokens of many pages", dia, 3, dia.Graph.Outputs[0], "want a one-page interleaved DRAM buffer"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, _, err := persist.BuildLoop(tc.b, tc.steps, tc.tokens)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("BuildLoop: error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p.Persist.Steps != tc.steps {
				t.Errorf("Persist.Steps = %d, want %d", p.Persist.Steps, tc.steps)
			}
			if h := p.Buffer(persist.HistoryBuffer); h == nil || h.Pages != tc.steps || !h.Mem.Kind.IsDRAM() {
				t.Errorf("history buffer %+v, want %d DRAM pages", h, tc.steps)
			}
			for _, k := range p.Kernels {
				f, ok := k.Body[0].(kir.For)
				if len(k.Body) != 1 || !ok || f.Var.Name != persist.StepVar.Name {
					t.Errorf("kernel %s: body is not one step loop", k.Name)
				}
			}
		})
	}
}

// TestBuildLoopProtocol: the step protocol's words (kir.StepProtocol) lie
// in the control block; the step leader waits for the host's doorbell in
// the barrier that starts each step, writes the done word after the step
// and waits for the stop after the last; every data-movement kernel keeps
// its phase word (started, ended) for every phase it runs, and every
// signaling kernel its core's finished word.
func TestBuildLoopProtocol(t *testing.T) {
	b, y2 := oneTile(t)
	p, _, err := persist.BuildLoop(b, 3, y2)
	if err != nil {
		t.Fatal(err)
	}
	lp := p.Persist.Loop
	if lp == nil || lp.History != persist.HistoryBuffer {
		t.Fatalf("Persist.Loop = %+v, want the step protocol with history %q", lp, persist.HistoryBuffer)
	}
	words := []uint32{lp.Doorbell, lp.Done, lp.Finished, lp.Phase[0], lp.Phase[1]}
	seen := map[uint32]bool{}
	for _, w := range words {
		if seen[w] || w%kir.CtlStride != 0 || int(w)+4 > p.Persist.CtlBytes || w < uint32(kir.CtlSize(len(p.Persist.Phases), p.Persist.SemSlots)) {
			t.Errorf("protocol word at %d: shared, unaligned, or outside the step words of the %d B block", w, p.Persist.CtlBytes)
		}
		seen[w] = true
	}
	ctlWord := func(e kir.Expr) (uint32, bool) {
		if b, ok := e.(kir.Bin); ok && b.Op == kir.OpAdd {
			if a, ok := b.X.(kir.ArgRef); ok && a.Name == "persist_ctl" {
				if c, ok := b.Y.(kir.Const); ok {
					return c.V, true
				}
			}
		}
		return 0, false
	}
	for _, k := range p.Kernels {
		var doorbellWaits, doneWrites, finished int
		phaseWords := map[uint32]bool{}
		kir.Inspect(k.Body, func(s kir.Stmt) bool {
			switch s := s.(type) {
			case kir.NoCSemaphoreWaitMin:
				if w, ok := ctlWord(s.Addr); ok && w == lp.Doorbell {
					doorbellWaits++
				}
			case kir.L1Write32:
				w, ok := ctlWord(s.Addr)
				switch {
				case !ok:
				case w == lp.Done:
					doneWrites++
				case w == lp.Finished:
					finished++
				case w == lp.Phase[kir.PhaseWordIndex(k.Processor)] && k.Processor != kir.ComputeProc:
					if c, ok := s.Value.(kir.Const); ok {
						phaseWords[c.V] = true
					}
				}
			}
			return true
		})
		leader := kir.InRanges(k.Cores, lp.Leader) && k.Processor == kir.RISCV0
		if want := map[bool]int{true: 2, false: 0}[leader]; doorbellWaits != want || doneWrites != want/2 {
			t.Errorf("kernel %s: %d doorbell waits, %d done writes; want %d, %d (step leader %v)", k.Name, doorbellWaits, doneWrites, want, want/2, leader)
		}
		if k.Processor == kir.RISCV0 && finished != 1 {
			t.Errorf("kernel %s: %d finished-word writes, want 1", k.Name, finished)
		}
		if k.Processor == kir.ComputeProc {
			continue
		}
		for ph := range p.Persist.Phases {
			for _, ended := range []bool{false, true} {
				if !phaseWords[kir.PhaseWord(ph, ended)] {
					t.Errorf("kernel %s: no phase word %d (phase %d, ended %v)", k.Name, kir.PhaseWord(ph, ended), ph, ended)
				}
			}
		}
	}
}

// TestBuildLoopWaitsForDoorbell: on the simulator the step leader waits
// for the doorbell: the program runs its steps when the simulator rings
// the protocol's doorbell word, and deadlocks in the leader's start
// barrier when it rings another word.
func TestBuildLoopWaitsForDoorbell(t *testing.T) {
	b, y2 := oneTile(t)
	p, _, err := persist.BuildLoop(b, 2, y2)
	if err != nil {
		t.Fatal(err)
	}
	run := func(p *kir.Program) error {
		d := kexec.NewDevice(target.Blackhole())
		for _, buf := range p.Buffers {
			if _, err := d.Alloc(buf); err != nil {
				t.Fatal(err)
			}
		}
		_, err := d.Run(p, kexec.RunOptions{})
		return err
	}
	if err := run(p); err != nil {
		t.Fatalf("rung: %v", err)
	}
	ps := *p.Persist
	lp := *ps.Loop
	lp.Doorbell = lp.Finished // the simulator rings a word nobody waits on
	ps.Loop = &lp
	q := *p
	q.Persist = &ps
	err = run(&q)
	var de *kexec.DeadlockError
	if !errors.As(err, &de) {
		t.Fatalf("doorbell not rung: %v, want a deadlock", err)
	}
	// The leader's BRISC waits for doorbell >= 1 (step 0); its other
	// threads wait for it at the first phase's barrier.
	if want := `kernel "persist_brisc_0": noc_semaphore_wait_min waits for value >= 1, has 0`; !strings.Contains(err.Error(), want) {
		t.Errorf("deadlock %v, want the leader's doorbell wait (%s)", err, want)
	}
}
