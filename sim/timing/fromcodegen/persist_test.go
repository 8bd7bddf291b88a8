package fromcodegen_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tcc-dev/tcc/codegen"
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/persist"
	"github.com/tcc-dev/tcc/sim/timing"
	"github.com/tcc-dev/tcc/sim/timing/fromcodegen"
)

// TestPredictPersistent: the small config's decode step at 1x2 as one
// persistent program: one launch (one launch gap), every phase timed, a
// phase ending only after the phases it depends on ended on its device
// (the dependency waits), matmul phases starting before their dependencies
// end (their weight readers stream the first blocks while the producers
// run: the waits follow the weight reads, codegen/persist/lazy.go), and a
// step shorter than the per-program build's, which pays a fixed cost and a
// launch gap per program; and the early begins (testEarlyBeginPlan,
// testEarlyBeginOverlap).
func TestPredictPersistent(t *testing.T) {
	b := smallBuild(t, 128)
	tb, err := fromcodegen.BuildAt(b, timing.Step{Pos: 127, Tokens: 1})
	if err != nil {
		t.Fatal(err)
	}
	meta := timing.Meta{Model: "qwen27b", Stage: "fused", Mode: "decode", Batch: 1, MaxSeq: 128}
	prm := timing.Default()
	per, err := timing.Predict(tb, prm, meta)
	if err != nil {
		t.Fatal(err)
	}
	prog, plan, err := persist.Build(b)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := timing.PredictPersistent(tb, prog, prm, meta)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Persistent || rep.Phases != len(b.Programs) || len(rep.Programs) != rep.Devices*len(b.Programs) {
		t.Fatalf("report: persistent %v, %d phases, %d rows; want true, %d, %d", rep.Persistent, rep.Phases, len(rep.Programs), len(b.Programs), rep.Devices*len(b.Programs))
	}
	if rep.LaunchUSTotal != prm.LaunchGapUS {
		t.Errorf("launch gaps %.3f us, want one (%.3f us)", rep.LaunchUSTotal, prm.LaunchGapUS)
	}
	if rep.StepUS >= per.StepUS {
		t.Errorf("persistent step %.1f us, per-program step %.1f us: want the persistent one shorter", rep.StepUS, per.StepUS)
	}
	const eps = 0.002 // the rows' rounding
	early := 0        // matmul phases started before a dependency ended
	for d := 0; d < rep.Devices; d++ {
		rows := rep.Programs[d*len(b.Programs) : (d+1)*len(b.Programs)]
		for p, ph := range plan.Phases {
			end := rows[p].StartUS + rows[p].US
			if end > rep.DeviceStepUS[d]+eps {
				t.Errorf("device %d: phase %d ends at %.3f us, after the step (%.3f us)", d, p, end, rep.DeviceStepUS[d])
			}
			for _, q := range ph.Deps {
				qEnd := rows[q].StartUS + rows[q].US
				if end < qEnd-eps {
					t.Errorf("device %d: phase %d (%s) ends at %.3f us, before phase %d it depends on ends (%.3f us)", d, p, ph.Op, end, q, qEnd)
				}
				if strings.Contains(ph.Op, "matmul") && rows[p].StartUS < qEnd-eps {
					early++
				}
			}
		}
	}
	if early == 0 {
		t.Error("no matmul phase starts before a phase it depends on ends: no weights are read ahead")
	}
	t.Run("early begin plan", func(t *testing.T) { testEarlyBeginPlan(t, b, prog, plan) })
	t.Run("early begin overlap", func(t *testing.T) { testEarlyBeginOverlap(t, b, tb, meta, prog, rep) })
}

// testEarlyBeginPlan: in the small config's persistent program at 1x2 the
// weight readers (NCRISC) of matmul phases begin early (kir.EarlyBegin)
// after the GDN recurrence and after the norms, and on every core of an
// early begin the phase's early CBs are named by no merged kernel of the
// core in the phase before it except the NCRISC's, and lie above that
// phase's CBs (they are installed while its other threads still run).
func testEarlyBeginPlan(t *testing.T, b *codegen.Build, prog *kir.Program, plan *persist.Plan) {
	ps := prog.Persist
	after := map[string]bool{}
	for _, e := range ps.Early {
		m, s := b.Programs[e.Phase], b.Programs[e.Prev]
		if e.Processor != kir.RISCV1 || len(e.CBs) == 0 {
			t.Errorf("early begin of phase %d: processor %v, CBs %v; want NCRISC with CBs", e.Phase, e.Processor, e.CBs)
		}
		if plan.Phases[e.Phase].Early == 0 {
			t.Errorf("phase %d: the plan counts no early cores", e.Phase)
		}
		if strings.Contains(m.Op.Name(), "matmul") {
			after[s.Op.Name()] = true
		}
		for _, c := range e.Cores {
			// Prev is the phase before Phase on c.
			for q := e.Prev + 1; q < e.Phase; q++ {
				if containsCore(ps.Phases[q].Cores, c) {
					t.Errorf("phase %d on %s: phase %d runs between it and its early begin's previous phase %d", e.Phase, c, q, e.Prev)
				}
			}
			for _, k := range prog.Kernels {
				if k.Processor == kir.RISCV1 || !kir.InRanges(k.Cores, c) {
					continue
				}
				for _, i := range namedCBs(segmentOf(k.Body, e.Prev)) {
					if slices.Contains(e.CBs, i) {
						t.Errorf("phase %d on %s: early CB c_%d is named by %s in phase %d (%s), which still runs", e.Phase, c, i, k.Name, e.Prev, s.Op.Name())
					}
				}
			}
			if hi, lo := cbSpan(b, &ps.Phases[e.Prev], c, nil, false), cbSpan(b, &ps.Phases[e.Phase], c, e.CBs, true); lo < hi {
				t.Errorf("phase %d on %s: its early CBs start at %#x, below the end %#x of phase %d's", e.Phase, c, lo, hi, e.Prev)
			}
		}
	}
	for _, want := range []string{"gdn_recurrence", "all_reduce_add_rmsnorm"} {
		if !after[want] {
			t.Errorf("no matmul phase begins early after a %s phase (early after: %v)", want, after)
		}
	}
}

// testEarlyBeginOverlap: the small config's step at 1x2 predicted with the
// early begins and without them (the same program, ps.Early dropped): with
// them early matmul phases start earlier (their weight readers stream while
// the phase before them still runs on their cores) and the step is no
// longer. (The small config's matmuls are too small to shorten its step;
// sim/timing's TestEarlyBeginQwenLayers, a long check, predicts four
// full-size layers shorter with them.)
func testEarlyBeginOverlap(t *testing.T, b *codegen.Build, tb *timing.Build, meta timing.Meta, prog *kir.Program, with *timing.Report) {
	require.NotEmpty(t, prog.Persist.Early)
	ps := *prog.Persist
	ps.Early = nil
	late := *prog
	late.Persist = &ps
	without, err := timing.PredictPersistent(tb, &late, timing.Default(), meta)
	require.NoError(t, err)
	if with.StepUS > without.StepUS {
		t.Errorf("step %.3f us with early begins, %.3f us without: want no longer", with.StepUS, without.StepUS)
	}
	earlier := 0
	for _, e := range prog.Persist.Early {
		if !strings.Contains(b.Programs[e.Phase].Op.Name(), "matmul") {
			continue
		}
		if w, wo := with.Programs[e.Phase].StartUS, without.Programs[e.Phase].StartUS; w < wo {
			earlier++
		}
	}
	if earlier == 0 {
		t.Error("no early matmul phase starts earlier with its early begin")
	}
	t.Logf("step %.3f us with early begins, %.3f us without; %d early begins start earlier", with.StepUS, without.StepUS, earlier)
}

func containsCore(cs []kir.Core, c kir.Core) bool { return slices.Contains(cs, c) }

// namedCBs lists the CB indices body's statements and expressions name.
func namedCBs(body []kir.Stmt) []int {
	var out []int
	kir.Inspect(body, func(s kir.Stmt) bool {
		out = append(out, kir.CBsOf(s)...)
		for _, e := range kir.StmtExprs(s) {
			out = append(out, kir.ExprCBs(e)...)
		}
		return true
	})
	return out
}

// segmentOf is the statements of a merged kernel's body between
// PhaseBegin(p) and PhaseEnd(p).
func segmentOf(body []kir.Stmt, p int) []kir.Stmt {
	start := -1
	for j, s := range body {
		switch s := s.(type) {
		case kir.PhaseBegin:
			if s.Phase == p {
				start = j + 1
			}
		case kir.PhaseEnd:
			if s.Phase == p && start >= 0 {
				return body[start:j]
			}
		}
	}
	return nil
}

// cbSpan is where phase ph's CBs (only those with an index in only, when
// not nil) start on core c (lo) or end, placed as the simulator places
// them (kir.PlaceCBs: the early CBs from CBBase); CBs backed by a buffer
// take no L1 of their own.
func cbSpan(b *codegen.Build, ph *kir.Phase, c kir.Core, only []int, lo bool) uint64 {
	addrs := kir.PlaceCBs(ph.CBs, uint64(b.Target.L1UnreservedBase), ph.EarlyCBs, uint64(ph.CBBase))
	out := uint64(0)
	if lo {
		out = ^uint64(0)
	}
	for i, cb := range ph.CBs {
		if cb.Backing != "" || !kir.InRanges(cb.Cores, c) || only != nil && !slices.Contains(only, cb.Index) {
			continue
		}
		if lo {
			out = min(out, addrs[i])
		} else {
			out = max(out, addrs[i]+uint64(cb.Bytes()))
		}
	}
	if lo && out == ^uint64(0) {
		out = uint64(b.Target.L1UnreservedBase)
	}
	return out
}
