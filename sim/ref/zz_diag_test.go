package ref

// THROWAWAY diagnostic: delete before reporting.

import (
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
	"testing"

	"github.com/tcc-dev/tcc/codegen"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/models"
	_ "github.com/tcc-dev/tcc/models/qwen27b"
	"github.com/tcc-dev/tcc/passes"
	"github.com/tcc-dev/tcc/runtime"
	"github.com/tcc-dev/tcc/sim/numerics"
)

type diagRow struct {
	i                  int
	op                 string
	res                int
	dt                 string
	pccS, errS         float64
	pccE, errE         float64
	nS                 int // count of elements differing from same-format ref
	n                  int
}

func TestZZDiag(t *testing.T) {
	if os.Getenv("TCC_DIAG") == "" {
		t.Skip()
	}
	targetStep, _ := strconv.Atoi(os.Getenv("TCC_DIAG_STEP"))
	m, err := models.Lookup("qwen27b")
	if err != nil {
		t.Fatal(err)
	}
	args, err := models.DefaultArgs(m, map[string]string{"config": "../../models/qwen27b/testdata/small.json"})
	if err != nil {
		t.Fatal(err)
	}
	mesh := ir.Mesh{Rows: 1, Cols: 2}
	runner := m.(models.Runner)
	dg, err := m.Build(args, mesh)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := passes.Run(dg, passes.Options{}); err != nil {
		t.Fatal(err)
	}
	pargs := models.Args{}
	for k, v := range args {
		pargs[k] = v
	}
	prefill := 8
	pargs["mode"], pargs["seq"] = "prefill", strconv.Itoa(prefill)
	pg, err := m.Build(pargs, mesh)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := passes.Run(pg, passes.Options{}); err != nil {
		t.Fatal(err)
	}
	dev, err := runtime.Open("sim", mesh)
	if err != nil {
		t.Fatal(err)
	}
	pb, err := codegen.Compile(pg, target.Blackhole())
	if err != nil {
		t.Fatal(err)
	}
	pe, err := runtime.Load(dev, pb)
	if err != nil {
		t.Fatal(err)
	}
	db, err := codegen.Compile(dg, target.Blackhole())
	if err != nil {
		t.Fatal(err)
	}
	de, err := runtime.Load(dev, db)
	if err != nil {
		t.Fatal(err)
	}
	envs, err := runner.DeviceEnv(args, dg, 1)
	if err != nil {
		t.Fatal(err)
	}
	for d, env := range envs {
		for v, data := range env {
			if err := de.UploadTo(d, v, data); err != nil {
				t.Fatal(err)
			}
		}
	}
	vocab := 0
	for _, op := range dg.Ops() {
		if op.Kind == ir.OpEmbedding {
			vocab = op.Operands[1].Type.Shape[0]
		}
	}
	if vocab == 0 {
		vocab = 1
	}
	batch := dg.Outputs[1].Type.Shape[0]
	tokens := make([][]int, batch)
	for b := range tokens {
		tokens[b] = []int{int((1*7919 + int64(b)*104729) % int64(vocab))}
	}
	pos := 0
	upload := func(a models.Args, g *ir.Graph, e *runtime.Executable, toks [][]int) {
		ins, err := runner.StepInputs(a, g, toks, pos)
		if err != nil {
			t.Fatal(err)
		}
		for d, in := range ins {
			for v, data := range in {
				if err := e.UploadTo(d, v, data); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	next := func(g *ir.Graph, e *runtime.Executable) [][]int {
		n, err := e.Download(g.Outputs[1])
		if err != nil {
			t.Fatal(err)
		}
		per := len(n) / batch
		out := make([][]int, batch)
		for b := range out {
			out[b] = []int{int(n[(b+1)*per-1])}
		}
		return out
	}
	prompt := make([][]int, batch)
	for b := range prompt {
		for s := 0; s < prefill; s++ {
			prompt[b] = append(prompt[b], (tokens[b][0]+s*31)%vocab)
		}
	}
	upload(pargs, pg, pe, prompt)
	if err := pe.Run(); err != nil {
		t.Fatal(err)
	}
	tokens = next(pg, pe)
	pos += prefill
	for s := 0; s < targetStep; s++ {
		upload(args, dg, de, tokens)
		if err := de.Run(); err != nil {
			t.Fatal(err)
		}
		tokens = next(dg, de)
		pos++
	}
	t.Logf("step %d tokens %v pos %d", targetStep, tokens, pos)
	upload(args, dg, de, tokens)
	// state alias: new value -> state
	alias := map[*ir.Value]*ir.Value{}
	for s, nv := range dg.StateUpdates {
		alias[nv] = s
	}
	dl := func(d int, v *ir.Value) []float32 {
		if s, ok := alias[v]; ok {
			v = s
		}
		x, err := de.DownloadFrom(d, v)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	nd := mesh.Devices()
	var rows []diagRow
	for i, p := range db.Programs {
		op := p.Op
		valsS := make([]map[*ir.Value]Tensor, nd)
		valsE := make([]map[*ir.Value]Tensor, nd)
		for d := 0; d < nd; d++ {
			valsS[d] = map[*ir.Value]Tensor{}
			valsE[d] = map[*ir.Value]Tensor{}
			for _, v := range op.Operands {
				tt := Tensor{Shape: v.Type.Shape.Clone(), Data: dl(d, v)}
				valsS[d][v] = tt
				valsE[d][v] = tt.Clone()
			}
		}
		if err := de.RunProgram(i); err != nil {
			t.Fatal(err)
		}
		eval := func(vals []map[*ir.Value]Tensor, opts Options) {
			var err error
			switch {
			case isFusedCollective(op.Kind):
				err = evalFusedCollectiveInto(op, mesh, vals, opts)
			case IsCollective(op.Kind):
				err = evalCollectiveInto(op, mesh, vals, opts)
			default:
				for d := range vals {
					if err = evalInto(op, vals[d], opts); err != nil {
						break
					}
				}
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		eval(valsS, DefaultOptions())
		eval(valsE, ExactOptions())
		for ri, r := range op.Results {
			var got, ws, we []float64
			nS := 0
			for d := 0; d < nd; d++ {
				g := dl(d, r)
				for k := range g {
					got = append(got, float64(g[k]))
					ws = append(ws, float64(valsS[d][r].Data[k]))
					we = append(we, float64(valsE[d][r].Data[k]))
					if g[k] != valsS[d][r].Data[k] {
						nS++
					}
				}
			}
			rows = append(rows, diagRow{i: i, op: op.Where(), res: ri, dt: r.Type.DType.String(),
				pccS: pcc64(ws, got), errS: relErr(ws, got), pccE: pcc64(we, got), errE: relErr(we, got), nS: nS, n: len(got)})
		}
	}
	sort.SliceStable(rows, func(a, b int) bool { return rows[a].errS > rows[b].errS })
	for _, r := range rows {
		fmt.Printf("%3d r%d %-8s same: pcc %.7f err %.3g diff %d/%d | fp32: pcc %.7f err %.3g | %s\n", r.i, r.res, r.dt, r.pccS, r.errS, r.nS, r.n, r.pccE, r.errE, r.op)
	}
	// final logits vs ref graph
	_ = numerics.PCC
}

func pcc64(a, b []float64) float64 {
	var ma, mb float64
	for i := range a {
		ma += a[i]
		mb += b[i]
	}
	ma /= float64(len(a))
	mb /= float64(len(b))
	var sab, saa, sbb float64
	for i := range a {
		x, y := a[i]-ma, b[i]-mb
		sab += x * y
		saa += x * x
		sbb += y * y
	}
	if saa == 0 || sbb == 0 {
		if saa == sbb {
			return 1
		}
		return 0
	}
	return sab / math.Sqrt(saa*sbb)
}

// relErr is max |a-b| / max |a|.
func relErr(a, b []float64) float64 {
	var me, ms float64
	for i := range a {
		me = math.Max(me, math.Abs(a[i]-b[i]))
		ms = math.Max(ms, math.Abs(a[i]))
	}
	if ms == 0 {
		return me
	}
	return me / ms
}
