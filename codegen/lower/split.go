package lower

import (
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower/blocks"
	"github.com/tcc-dev/tcc/ir"
)

// splitProgram is the skeleton most lowerings share: op's program (its
// buffers declared by newProgram) whose work items are split over the
// first plan.Cores worker cores by plan, with a CB plan on those cores and
// an accessBinder for the kernels' buffer arguments (bind keeps the first
// failure in err).
type splitProgram struct {
	accessBinder
	p     *kir.Program
	plan  Split
	cores []kir.Core
	rs    []ir.CoreRange
	cbs   *blocks.CBPlan
}

// newSplitProgram starts op's program on the first plan.Cores cores; on
// success its CB plan is empty and no kernel is added yet.
func newSplitProgram(op *ir.Op, ctx *Context, plan Split) (*splitProgram, error) {
	p, err := newProgram(op, ctx)
	if err != nil {
		return nil, err
	}
	cores, rs := firstCores(ctx.Target, plan.Cores)
	return &splitProgram{accessBinder: accessBinder{ctx: ctx}, p: p, plan: plan, cores: cores, rs: rs, cbs: blocks.NewCBPlan(p, ctx.Target, rs)}, nil
}

// reader adds the reader kernel on the program's cores.
func (s *splitProgram) reader() *kir.Kernel { return newReader(s.p, s.rs) }

// compute adds the compute kernel on the program's cores (fp32Compute).
func (s *splitProgram) compute() (*kir.Kernel, *blocks.Compute) {
	return fp32Compute(s.p, s.rs, s.ctx)
}

// fp32Compute adds a compute kernel on rs with an fp32 DEST at ctx's
// fidelity and returns it with the blocks.Compute that emits into it.
func fp32Compute(p *kir.Program, rs []ir.CoreRange, ctx *Context) (*kir.Kernel, *blocks.Compute) {
	k := newCompute(p, rs, kir.ComputeConfig{MathFidelity: ctx.Fidelity, FP32DestAccEn: true})
	return k, blocks.NewCompute(p, k)
}

// finish adds the writer of the result's pages (writeSplitPages: out's
// pages from cbOut, the plan's runtime args on rd, cp and the writer) and
// returns the program, or the first error of bind or of the writer.
func (s *splitProgram) finish(out *ir.Value, cbOut int, rd, cp *kir.Kernel) (*kir.Program, error) {
	if s.err != nil {
		return nil, s.err
	}
	if err := writeSplitPages(s.ctx, s.p, s.rs, out, cbOut, s.cores, s.plan, rd, cp); err != nil {
		return nil, err
	}
	return s.p, nil
}
