package cli

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/ir/numerics"
	"github.com/tcc-dev/tcc/runtime"
	"github.com/tcc-dev/tcc/sim/ref"
)

// programCheck compares each program of a step with the op it implements,
// evaluated by the same-formats reference on the operands the device held
// just before the program ran. A program is checked on its own inputs, so
// its verdict is neither diluted by the programs before it nor amplified by
// the ones after it (a chained comparison of the logits is both): a kernel
// that computes one row wrong fails here even when the logits barely move,
// and rounding noise that a deep network amplifies does not fail here.
// The reference models every program's data path rounding point by
// rounding point, so a program either reproduces it bit for bit or is
// reported with how many elements differ (sdpa_decode_gated's flash
// decoding always is: it rounds in its own chunked order, within the
// threshold).
type programCheck struct {
	opts      ref.Options // the reference's options (same formats, the build's SFPU code)
	graph     *ir.Graph
	threshold float64 // minimum PCC of an inexact program's results
	// weights caches each device's weight values: they do not change
	// during a run.
	weights []map[*ir.Value][]float32

	programs, checked, exact int
	unchecked                map[string]int // op kind -> programs whose values have no device buffer
	inexact                  []programDiff
}

// programDiff is one program whose results differ from the reference's.
type programDiff struct {
	where         string
	differ, total int
	pcc           float64
}

func newProgramCheck(g *ir.Graph, threshold float64, opts ref.Options) *programCheck {
	pc := &programCheck{graph: g, threshold: threshold, opts: opts, weights: make([]map[*ir.Value][]float32, g.Mesh.Devices())}
	for d := range pc.weights {
		pc.weights[d] = map[*ir.Value][]float32{}
	}
	return pc
}

// reset starts a new step.
func (pc *programCheck) reset() {
	pc.programs, pc.checked, pc.exact, pc.unchecked, pc.inexact = 0, 0, 0, map[string]int{}, nil
}

// download reads v on device d, or reports that v has no device buffer
// (a value kept inside a fused program).
func (pc *programCheck) download(exe *runtime.Executable, d int, v *ir.Value) ([]float32, bool, error) {
	if exe.Build.BufferOf(v) == nil {
		return nil, false, nil
	}
	if v.Kind == ir.KindWeight {
		if w, ok := pc.weights[d][v]; ok {
			return w, true, nil
		}
	}
	data, err := exe.DownloadFrom(d, v)
	if err != nil {
		return nil, false, err
	}
	if v.Kind == ir.KindWeight {
		pc.weights[d][v] = data
	}
	return data, true, nil
}

// readAll reads vals on every device (res[d][i] is device d's value of
// vals[i]); ok is false when one of them has no device buffer.
func (pc *programCheck) readAll(exe *runtime.Executable, vals []*ir.Value) (res [][]ref.Tensor, ok bool, err error) {
	res = make([][]ref.Tensor, pc.graph.Mesh.Devices())
	for d := range res {
		for _, v := range vals {
			data, has, err := pc.download(exe, d, v)
			if err != nil || !has {
				return nil, false, err
			}
			res[d] = append(res[d], ref.Tensor{Shape: v.Type.Shape.Clone(), Data: data})
		}
	}
	return res, true, nil
}

// around runs program i (run) between reading its operands and its
// results on every device, and compares the results with the reference's.
func (pc *programCheck) around(exe *runtime.Executable, i int, run func() error) error {
	op := exe.Build.Programs[i].Op
	pc.programs++
	before, ok, err := pc.readAll(exe, op.Operands)
	if err != nil {
		return err
	}
	if err := run(); err != nil {
		return err
	}
	if afterProgram != nil {
		if err := afterProgram(exe, i); err != nil {
			return err
		}
	}
	var got [][]ref.Tensor
	if ok {
		if got, ok, err = pc.readAll(exe, op.Results); err != nil {
			return err
		}
	}
	if !ok {
		pc.unchecked[op.Kind.String()]++
		return nil
	}
	want, err := ref.EvalMeshOp(op, pc.graph.Mesh, before, pc.opts)
	if err != nil {
		return fmt.Errorf("reference evaluator: %w", err)
	}
	pc.checked++
	diff := programDiff{where: op.Where(), pcc: 1}
	for d := range got {
		for r := range got[d] {
			w, g := want[d][r].Data, got[d][r].Data
			diff.total += len(w)
			for j := range w {
				if !sameValue(w[j], g[j]) {
					diff.differ++
				}
			}
			diff.pcc = min(diff.pcc, numerics.PCC(w, g))
		}
	}
	if diff.differ == 0 {
		pc.exact++
		return nil
	}
	pc.inexact = append(pc.inexact, diff)
	return nil
}

// afterProgram, when set (tests only), runs after program i and before
// its results are read.
var afterProgram func(exe *runtime.Executable, i int) error

// sameValue: bit for bit (zeros by sign too: the reference writes -0
// where the card's SFPU would, +0 where its FPU would), except that NaN
// equals NaN.
func sameValue(a, b float32) bool {
	return math.Float32bits(a) == math.Float32bits(b) || (a != a && b != b)
}

// fails lists the programs below the threshold.
func (pc *programCheck) fails() []programDiff {
	var out []programDiff
	for _, d := range pc.inexact {
		if d.pcc < pc.threshold {
			out = append(out, d)
		}
	}
	return out
}

// String is the step's one-line summary: programs checked and bit-exact,
// the worst inexact ones, the ops whose values stay inside fused programs.
func (pc *programCheck) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "programs: %d of %d checked on their own inputs, %d bit for bit", pc.checked, pc.programs, pc.exact)
	if n := len(pc.inexact); n > 0 {
		worst := append([]programDiff(nil), pc.inexact...)
		sort.SliceStable(worst, func(i, j int) bool { return worst[i].pcc < worst[j].pcc })
		fmt.Fprintf(&b, ", %d differ", n)
		for i, d := range worst[:min(n, 3)] {
			sep := "; "
			if i == 0 {
				sep = " ("
			}
			fmt.Fprintf(&b, "%s%s: %d of %d elements, PCC %.7f", sep, d.where, d.differ, d.total, d.pcc)
		}
		if n > 3 {
			fmt.Fprintf(&b, "; %d more", n-3)
		}
		b.WriteString(")")
	}
	if len(pc.unchecked) > 0 {
		kinds := make([]string, 0, len(pc.unchecked))
		for k, n := range pc.unchecked {
			kinds = append(kinds, fmt.Sprintf("%s x%d", k, n))
		}
		sort.Strings(kinds)
		fmt.Fprintf(&b, "; not checked (values inside fused programs): %s", strings.Join(kinds, ", "))
	}
	if f := pc.fails(); len(f) > 0 {
		fmt.Fprintf(&b, " FAIL: %d below PCC %.7f", len(f), pc.threshold)
	} else {
		b.WriteString(" ok")
	}
	return b.String()
}
