package srcbtable

import (
	"fmt"
	"strconv"

	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/models"
	"github.com/tcc-dev/tcc/passes"
)

// SharingArgs are the steps whose graphs decide the table of args'
// weights: args itself for a model without a mode parameter; for a model
// with one, its decode step (args' other parameters, mode decode). Decode
// is the most fused step: its fusions read weights other than as a
// matmul's weight where a prefill step's do not (qwen27b's lm_head is a
// norm prologue's weight in decode and a plain matmul's in a 64-token
// prefill). A prefill step that reads a weight of the table any other
// way is refused by Store, loudly; the prefill graphs are not built here
// because their pipeline costs about 1 s each at full size (against 0.14
// s for decode), which every build would pay.
func SharingArgs(m models.Model, args models.Args) []models.Args {
	if !hasParam(m, "mode") {
		return []models.Args{args}
	}
	dec := models.Args{}
	for k, v := range args {
		dec[k] = v
	}
	dec["mode"] = "decode"
	return []models.Args{dec}
}

// Names is the table of m built from args on mesh with the pipeline
// options opts: the sorted names of the weights every SharingArgs graph
// multiplies only as a matmul's weight (passes.WeightNamesOnSrcB). It
// fails, naming the step, when one of those graphs does not build. The
// result does not depend on args' mode or prefill length.
func Names(m models.Model, args models.Args, mesh ir.Mesh, opts passes.Options) ([]string, error) {
	var gs []*ir.Graph
	for _, a := range SharingArgs(m, args) {
		g, err := m.Build(a, mesh)
		if err != nil {
			return nil, fmt.Errorf("weights on SrcB: building the %s step that shares the weights: %w", StepName(a), err)
		}
		if _, err := passes.Run(g, opts); err != nil {
			return nil, fmt.Errorf("weights on SrcB: the %s step that shares the weights: %w", StepName(a), err)
		}
		gs = append(gs, g)
	}
	return passes.WeightNamesOnSrcB(gs...), nil
}

// Store marks g's weights named in names as stored in transposed tiles
// (passes.StoreWeightsOnSrcB); step names g's step in errors. It fails,
// naming the weight and the op, when g reads a named weight other than
// as a matmul's weight (then g is left unmarked): the shared copy cannot
// be in both layouts.
func Store(g *ir.Graph, names []string, step string) error {
	if len(names) == 0 {
		return nil
	}
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	eligible := map[*ir.Value]bool{}
	for _, w := range passes.WeightsOnSrcB(g) {
		eligible[w] = true
	}
	for _, w := range g.Weights {
		if want[w.Name] && !eligible[w] {
			return fmt.Errorf("weights on SrcB: %s step: weight %s (%s) is stored in transposed tiles for the model's other steps, but %s reads it other than as a matmul's weight; rebuild with --weights-on-srcb=false", step, w.Name, w.Type, readerOf(g, w))
		}
	}
	passes.StoreWeightsOnSrcB(g, names)
	return nil
}

// readerOf names the first op of g that reads w, or the graph's outputs.
func readerOf(g *ir.Graph, w *ir.Value) string {
	for _, r := range g.Regions {
		for _, op := range r.Ops {
			for _, v := range op.Operands {
				if v == w {
					return fmt.Sprintf("op %s in %s", op.Kind, r.Label())
				}
			}
		}
	}
	return "the graph's outputs"
}

// StepName names the step args build: "decode", "prefill of N tokens"
// (the model's mode and seq parameters), or "model" for a model without
// modes.
func StepName(args models.Args) string {
	switch args["mode"] {
	case "":
		return "model"
	case "prefill":
		if n, err := strconv.Atoi(args["seq"]); err == nil {
			return fmt.Sprintf("prefill of %d tokens", n)
		}
	}
	return args["mode"]
}

func hasParam(m models.Model, name string) bool {
	for _, p := range m.Params() {
		if p.Name == name {
			return true
		}
	}
	return false
}
