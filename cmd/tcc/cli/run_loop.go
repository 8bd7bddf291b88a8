package cli

import (
	"fmt"
	"io"

	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/ir/numerics"
	"github.com/tcc-dev/tcc/models"
	"github.com/tcc-dev/tcc/runtime"
	"github.com/tcc-dev/tcc/sim/ref"
)

// loopLaunch reports whether the decode steps of dg run as ONE launch of
// a multi-step persistent program (--persistent with a device-loop graph:
// the steps take no host input).
func loopLaunch(rf runFlags, runner models.Runner, dg *stepGraph) bool {
	_, ok := runner.(loopRunner)
	return rf.persistent && ok && len(dg.graph.Inputs) == 0
}

// loopRun is what runLoop needs of runModel's run.
type loopRun struct {
	w, info io.Writer
	rf      runFlags
	runner  models.Runner
	dg      *stepGraph
	byName  []map[string][]float32
	batch   int
}

// runLoop runs rf.steps decode steps of lr.dg from tokens at pos in ONE
// launch of the multi-step persistent program (runtime.LoadPersistentLoop):
// the host writes the tokens and position once, launches once, and reads
// the step's tokens from the device's token history after the launch.
// With --check the reference runs the same steps from the same initial
// state, free-running (its own state) but fed the device's tokens of the
// step before, and the run compares every step's tokens (near ties
// allowed), the last step's logits and the final state. It returns the
// failed comparisons and the last step's tokens.
func (lr *loopRun) run(tokens [][]int, pos int) (int, [][]int, error) {
	w, info, rf, dg := lr.w, lr.info, lr.rf, lr.dg
	loop, err := loopState(lr.runner, dg, tokens, pos)
	if err != nil {
		return 0, nil, err
	}
	wrote := 0
	for d, in := range loop {
		for v, data := range in {
			if err := dg.exe.UploadTo(d, v, data); err != nil {
				return 0, nil, err
			}
			wrote += len(data) * v.Type.DType.ElemBytes()
		}
	}
	var pre []map[string][]float32
	if rf.check {
		if pre, err = deviceState(dg); err != nil {
			return 0, nil, err
		}
	}
	chipFailed := 0
	if dg.exe.OnChip() {
		// The chip runs the printed program in one launch; the simulator
		// ran it first as the reference (its history is read below).
		run, err := dg.exe.DrivePersistent(func(cs runtime.ChipStep) error {
			status := "matches the simulator"
			if !cs.Match {
				status, chipFailed = fmt.Sprintf("DIFFERS from the simulator's %v", cs.Sim), chipFailed+1
			}
			fmt.Fprintf(info, "decode %d on %s: tokens %v %s (host %v for the doorbell, done polls and token read)\n", cs.Step, rf.backend, cs.Tokens, status, cs.Host)
			return nil
		})
		if err != nil {
			return 0, nil, fmt.Errorf("%s: %w", rf.backend, err)
		}
		fmt.Fprintf(info, "decode 0..%d on %s: launches: %d (%d steps), %d steps' tokens differ from the simulator's\n", rf.steps-1, rf.backend, run.Launches, len(run.Steps), chipFailed)
	} else {
		if err := dg.exe.RunPersistent(); err != nil {
			return 0, nil, err
		}
		fmt.Fprintf(info, "decode 0..%d: launches: 1 (%d steps), host wrote %d bytes before it and reads the token history after it\n", rf.steps-1, rf.steps, wrote)
	}
	hist, err := dg.exe.History(0)
	if err != nil {
		return 0, nil, err
	}
	steps := make([][][]int, len(hist))
	for s, row := range hist {
		steps[s] = lastTokens(row, lr.batch)
	}
	if !rf.check {
		for s, toks := range steps {
			fmt.Fprintf(w, "%-9s next tokens %v\n", fmt.Sprintf("decode %d", s), toks)
		}
		return chipFailed, steps[len(steps)-1], nil
	}
	failed := chipFailed
	g := dg.graph
	logitsV, nextV := g.Outputs[0], g.Outputs[1]
	state := cloneNamed(pre)
	none := make([]map[*ir.Value][]float32, dg.exe.Mesh.Devices())
	var want map[*ir.Value]ref.Tensor
	feed := tokens
	for s, toks := range steps {
		// The reference is fed the device's tokens of the step before.
		in, err := loopState(lr.runner, dg, feed, pos+s)
		if err != nil {
			return 0, nil, err
		}
		for d, m := range in {
			for v, data := range m {
				state[d][v.Name] = append([]float32(nil), data...)
			}
		}
		if want, err = evalStep(g, lr.byName, state, none, lr.rf.sameFormats(), false); err != nil {
			return 0, nil, fmt.Errorf("reference evaluator (decode %d): %w", s, err)
		}
		line := fmt.Sprintf("%-9s next tokens %v", fmt.Sprintf("decode %d", s), toks)
		if bad := tokenMismatch(want[logitsV].Data, want[nextV].Data, logitsV.Type.DType, toks, lr.batch); bad != "" {
			line += "  tokens FAIL: " + bad
			failed++
		} else {
			line += "  tokens ok (free-running same formats reference)"
		}
		fmt.Fprintln(w, line)
		feed = toks
	}
	logits, err := dg.exe.Download(logitsV)
	if err != nil {
		return 0, nil, err
	}
	pcc := numerics.PCC(want[logitsV].Data, logits)
	status := "ok"
	if pcc < rf.threshold {
		status, failed = "FAIL", failed+1
	}
	fmt.Fprintf(w, "%-9s last step's logits: free-running same formats PCC %.6f (max rel %.3g) %s\n", "", pcc, numerics.MaxRelErr(want[logitsV].Data, logits), status)
	post, err := deviceState(dg)
	if err != nil {
		return 0, nil, err
	}
	sc := compareState(checkedStates(g), pre, post, state, rf.threshold)
	failed += len(sc.fails)
	fmt.Fprintf(w, "%-9s final %s\n", "", sc)
	fmt.Fprintf(w, "%-9s not checked in one launch: the logits and state of the steps before the last (the device keeps only the last), the fp32 and unfused references, each program on its own inputs\n", "")
	return failed, steps[len(steps)-1], nil
}
