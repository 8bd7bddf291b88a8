package persist

import (
	"fmt"

	"github.com/tcc-dev/tcc/codegen"
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
)

// HistoryBuffer is the DRAM buffer a multi-step program (BuildLoop)
// appends each step's tokens to: page s holds the tokens step s wrote.
const HistoryBuffer = "persist.history"

// StepVar is the step loop's variable in a multi-step program's kernels;
// StepsArg is the common argument holding the number of steps.
var StepVar = kir.Var{Name: "persist_step"}

// StepsArg is the common runtime argument of every merged kernel of a
// multi-step program holding its number of steps.
const StepsArg = "persist_steps"

// StepBody is the statements a merged kernel runs per step: the body of
// its step loop (BuildLoop), else the body itself.
func StepBody(body []kir.Stmt) []kir.Stmt {
	if len(body) == 1 {
		if f, ok := body[0].(kir.For); ok && f.Var.Name == StepVar.Name {
			return f.Body
		}
	}
	return body
}

// BuildLoop is Build for a program that runs steps decode steps in ONE
// launch: every merged kernel loops over the steps; a step barrier of the
// cores' signaling RISCs starts each step once the host rang its doorbell,
// another ends it and makes the control block reusable:
//
//	start of step s, every core's signaling RISC: arrive[leader]++;
//	        wait go >= 2s+1
//	the step leader: wait arrive == 2s+1 times the cores, wait for the
//	        doorbell >= s+1 (kir.StepProtocol), then go++ on every core
//	the step's phases (each data-movement RISC keeps its phase word)
//	end of step s, every core: finished = s+1; arrive[leader]++;
//	        wait go >= 2s+2
//	the step leader: wait arrive == 2s+2 times the cores, append the
//	        tokens (page 0 of tokens' buffer) to HistoryBuffer page s,
//	        done = s+1; after the last step wait for the doorbell's stop
//	        flag; then go++ on every core
//	every core: reset its done, count and semaphore words (zeros, then the
//	        initial values of its phases' semaphores)
//
// The end barrier holds every core until all have finished step s (so no
// increment of step s is still in flight towards a word being reset); the
// next step's start barrier holds them until all have reset (so no
// increment of step s+1 lands before a reset) and until the host allows
// the step. The arrive, go, scratch and protocol words lie after the reset
// words and are never reset: they count barriers and steps. The step
// leader is the first worker core: the host writes one doorbell word and
// polls one done word per step, on that core only (the other cores are
// held by the leader's barriers, so a per-core doorbell would cost the
// host a write per core and step for nothing); the per-core finished and
// phase words are read only by the host's watchdog. Only the signaling
// RISC of a core takes part in the barriers; its other RISCs meet it at
// the next phase's core-local barrier.
//
// tokens is the value whose buffer holds the step's next tokens (for a
// device-loop graph, the tokens state the argmax writes); its buffer must
// be one page in DRAM. The program's Persist.Loop gives the protocol's
// words; the simulator rings every step at the launch.
func BuildLoop(b *codegen.Build, steps int, tokens *ir.Value) (*kir.Program, *Plan, error) {
	if steps < 1 {
		return nil, nil, fmt.Errorf("persist: %d steps: want at least 1", steps)
	}
	if b == nil || tokens == nil {
		return nil, nil, fmt.Errorf("persist: a multi-step program needs a build and its tokens value")
	}
	spec := b.BufferOf(tokens)
	if spec == nil {
		return nil, nil, fmt.Errorf("persist: tokens %s (%q) has no buffer in the build", tokens, tokens.Name)
	}
	if !spec.Mem.Kind.IsDRAM() || spec.Pages != 1 || spec.Blocks != nil {
		return nil, nil, fmt.Errorf("persist: tokens buffer %q (%v, %d pages): the step leader appends one DRAM page per step; want a one-page interleaved DRAM buffer", spec.Name, spec.Mem.Kind, spec.Pages)
	}
	hist := kir.Buffer{Name: HistoryBuffer, DType: spec.DType, Layout: spec.Layout, PageSize: spec.PageSize, Pages: steps,
		Mem: ir.MemoryConfig{Kind: ir.DRAMInterleaved}}
	lp := &loopPlan{steps: steps, tokens: spec.Name, page: spec.PageSize, history: hist}
	p, plan, err := build(b, lp, true)
	if err != nil {
		return nil, nil, err
	}
	p.Persist.Steps = steps
	proto := lp.proto
	proto.History = HistoryBuffer
	p.Persist.Loop = &proto
	return p, plan, nil
}

// HistoryTensor is the history buffer of p (BuildLoop) and the shape of
// its contents: steps rows of the tokens value's elements.
func HistoryTensor(p *kir.Program, tokens *ir.Value) (kir.Buffer, ir.Shape, error) {
	hb := p.Buffer(HistoryBuffer)
	if hb == nil || p.Persist == nil {
		return kir.Buffer{}, nil, fmt.Errorf("persist: program %q has no token history (BuildLoop)", p.Name)
	}
	return *hb, append(ir.Shape{hb.Pages}, tokens.Type.Shape...), nil
}

// loopPlan is what BuildLoop adds to Build.
type loopPlan struct {
	steps   int
	tokens  string // the tokens' buffer
	page    int    // its page size
	history kir.Buffer
	// Offsets in the control block, after the words the step resets.
	reset, arrive, goWord, scratch uint32
	leader                         kir.Core
	// proto holds the step protocol's words (Leader set by pickLeader).
	proto kir.StepProtocol
}

// layout places the step words after ps's control words and grows it:
// the barrier words, the leader's scratch page, then the step protocol's
// words (kir.StepProtocol).
func (lp *loopPlan) layout(b *codegen.Build, ps *kir.Persist) error {
	lp.reset = uint32(ps.CtlBytes)
	lp.arrive = lp.reset
	lp.goWord = lp.arrive + kir.CtlStride
	lp.scratch = uint32(target.AlignUp(int(lp.goWord+kir.CtlStride), b.Target.DRAMReadAlign))
	w := uint32(target.AlignUp(int(lp.scratch)+target.AlignUp(lp.page, b.Target.DRAMReadAlign), kir.CtlStride))
	next := func() uint32 { w += kir.CtlStride; return w - kir.CtlStride }
	lp.proto = kir.StepProtocol{Doorbell: next(), Done: next(), Finished: next()}
	lp.proto.Phase = [2]uint32{next(), next()}
	ps.CtlBytes = int(w)
	return nil
}

func (lp *loopPlan) pickLeader(cores []kir.Core) error {
	for _, c := range cores {
		if !c.IsEth() {
			lp.leader = c
			lp.proto.Leader = c
			return nil
		}
	}
	return fmt.Errorf("persist: a multi-step program needs a worker core to lead its step barrier")
}

// stepEnd adds the step barriers (see BuildLoop) to the signaling RISC's
// kernel of m's cores: the start barrier (m.start, run before the step's
// phases) and the end barrier and reset (appended to m.body); cores are
// every core of the program.
func (m *merger) stepEnd(cores []kir.Core) {
	lp, ps := m.loop, m.ps
	step := kir.Expr(StepVar)
	n := kir.Ci(len(cores))
	leader := m.cores[0] == lp.leader
	wait := func(addr, v kir.Expr, min bool) kir.Stmt {
		switch {
		case m.eth && min:
			return kir.EthNoCSemaphoreWaitMin{Addr: addr, Value: v}
		case m.eth:
			return kir.EthNoCSemaphoreWait{Addr: addr, Value: v}
		case min:
			return kir.NoCSemaphoreWaitMin{Addr: addr, Value: v}
		}
		return kir.NoCSemaphoreWait{Addr: addr, Value: v}
	}
	local := func(off uint32) kir.Expr { return kir.Add(m.ctl(), kir.C(off)) }
	// barrier k (1: the step's start, 2: its end) of step s: arrive, the
	// leader's release, the wait.
	barrier := func(k int, before, between []kir.Stmt) []kir.Stmt {
		round := kir.Add(kir.Mul(step, kir.C(2)), kir.Ci(k))
		out := append([]kir.Stmt{kir.Comment{Text: fmt.Sprintf("step barrier %d", k)}}, before...)
		out = append(out, kir.NoCSemaphoreInc{Addr: m.nocAddr(lp.leader, lp.arrive), Incr: kir.C(1)}, kir.NoCAsyncAtomicBarrier{})
		if leader {
			out = append(out, wait(local(lp.arrive), kir.Mul(round, n), false))
			out = append(out, between...)
			for _, c := range cores {
				out = append(out, kir.NoCSemaphoreInc{Addr: m.nocAddr(c, lp.goWord), Incr: kir.C(1)})
			}
			out = append(out, kir.NoCAsyncAtomicBarrier{})
		}
		return append(out, wait(local(lp.goWord), round, true))
	}
	// The step starts once the host rang its doorbell.
	m.start = barrier(1, nil, []kir.Stmt{
		kir.Comment{Text: "wait for the host's doorbell: step s runs once it reaches s+1"},
		wait(local(lp.proto.Doorbell), kir.Add(step, kir.C(1)), true),
	})
	// The leader appends the step's tokens to the history, then tells the
	// host the step is done; after the last step it waits for the stop.
	m.k.CommonArg("persist_tokens", kir.BufferAddr(lp.tokens, 0))
	m.k.CommonArg("persist_history", kir.BufferAddr(HistoryBuffer, 0))
	banks := m.t.Target.DRAMBanks
	stride := m.t.Target.DRAMPageSize(lp.page)
	scratch := local(lp.scratch)
	end := []kir.Stmt{
		kir.Comment{Text: "append the step's tokens to the history"},
		kir.NoCAsyncRead{Src: kir.DRAMBankAddr{Bank: kir.C(0), Offset: kir.ArgRef{Name: "persist_tokens"}}, Dst: scratch, Size: kir.Ci(lp.page)},
		kir.NoCAsyncReadBarrier{},
		kir.NoCAsyncWrite{Src: scratch, Dst: kir.DRAMBankAddr{Bank: kir.Mod(step, kir.Ci(banks)),
			Offset: kir.Add(kir.ArgRef{Name: "persist_history"}, kir.Mul(kir.Div(step, kir.Ci(banks)), kir.Ci(stride)))}, Size: kir.Ci(lp.page)},
		kir.NoCAsyncWriteBarrier{},
		kir.Comment{Text: "step s done: the host may read its tokens"},
		kir.L1Write32{Addr: local(lp.proto.Done), Value: kir.Add(step, kir.C(1))},
		kir.If{Cond: kir.Eq(kir.Add(step, kir.C(1)), kir.ArgRef{Name: StepsArg}), Then: []kir.Stmt{
			kir.Comment{Text: "the last step: wait for the host's stop"},
			wait(local(lp.proto.Doorbell), kir.C(kir.DoorbellStop), true),
		}},
	}
	finished := []kir.Stmt{kir.L1Write32{Addr: local(lp.proto.Finished), Value: kir.Add(step, kir.C(1))}}
	m.body = append(m.body, barrier(2, finished, end)...)
	// Reset this core's control words for the next step.
	w := kir.Var{Name: "persist_w"}
	m.body = append(m.body, kir.Comment{Text: "reset the control words for the next step"},
		kir.For{Var: w, Start: kir.C(0), End: kir.C(lp.reset), Step: kir.C(kir.CtlStride), Body: []kir.Stmt{
			kir.L1Write32{Addr: kir.Add(m.ctl(), w), Value: kir.C(0)},
		}})
	for p := range ps.Phases {
		ph := &ps.Phases[p]
		if !inCores(ph.Cores, m.cores[0]) {
			continue
		}
		for _, s := range ph.Semaphores {
			if s.Initial != 0 && anyIn(s.Cores, m.cores) {
				m.body = append(m.body, kir.L1Write32{Addr: local(ps.SemWord(ph.SemSlot + s.ID)), Value: kir.C(s.Initial)})
			}
		}
	}
}

// anyIn reports whether any of cs lies in rs. A semaphore's word is reset
// on every core of a merged kernel when any of them holds the semaphore:
// on the others no kernel uses the word.
func anyIn(rs []ir.CoreRange, cs []kir.Core) bool {
	for _, c := range cs {
		if kir.InRanges(rs, c) {
			return true
		}
	}
	return false
}

// phaseWord is the statement storing w in this RISC's phase word
// (kir.StepProtocol), or nil when the kernel has none (not a multi-step
// program, or a compute kernel).
func (m *merger) phaseWord(w uint32) kir.Stmt {
	if m.loop == nil {
		return nil
	}
	i := kir.PhaseWordIndex(m.proc)
	if i < 0 {
		return nil
	}
	return kir.L1Write32{Addr: kir.Add(m.ctl(), kir.C(m.loop.proto.Phase[i])), Value: kir.C(w)}
}
