package lower

import (
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower/blocks"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/ir/sfpu"
)

// splitProgram is the skeleton most lowerings share: op's program (its
// buffers declared by newProgram) whose work items are split over cores
// (by plan: its first plan.Cores worker cores), with a CB plan on those
// cores and an accessBinder for the kernels' buffer arguments. It keeps
// the first error (bind, planned, fail) while the lowering emits its
// kernels; finish and done return it instead of the program.
type splitProgram struct {
	accessBinder
	p     *kir.Program
	plan  Split
	cores []kir.Core
	rs    []ir.CoreRange
	cbs   *blocks.CBPlan
}

// startProgram starts op's program on the first plan.Cores cores: its CB
// plan is empty and no kernel is added yet. A buffer newProgram cannot
// declare is kept as the first error.
func startProgram(op *ir.Op, ctx *Context, plan Split) *splitProgram {
	cores, rs := firstCores(ctx.Target, plan.Cores)
	sp := startProgramOn(op, ctx, cores, rs)
	sp.plan = plan
	return sp
}

// startProgramOn is startProgram on cores (covered by ranges rs) that
// split the work their own way (plan is zero).
func startProgramOn(op *ir.Op, ctx *Context, cores []kir.Core, rs []ir.CoreRange) *splitProgram {
	p, err := newProgram(op, ctx)
	return &splitProgram{accessBinder: accessBinder{ctx: ctx, err: err}, p: p, cores: cores, rs: rs, cbs: blocks.NewCBPlan(p, ctx.Target, rs)}
}

// newSplitProgram and newProgramOn are startProgram and startProgramOn
// returning that error at once (and no program).
func newSplitProgram(op *ir.Op, ctx *Context, plan Split) (*splitProgram, error) {
	cores, rs := firstCores(ctx.Target, plan.Cores)
	sp, err := newProgramOn(op, ctx, cores, rs)
	if err != nil {
		return nil, err
	}
	sp.plan = plan
	return sp, nil
}

func newProgramOn(op *ir.Op, ctx *Context, cores []kir.Core, rs []ir.CoreRange) (*splitProgram, error) {
	sp := startProgramOn(op, ctx, cores, rs)
	if sp.err != nil {
		return nil, sp.err
	}
	return sp, nil
}

// planned keeps the CB plan's error, cbs.Err(what) (fail). Kernels may
// still be emitted against the plan (a CB past the limit is index -1);
// finish or done returns the error.
func (s *splitProgram) planned(what string) { s.fail(s.cbs.Err(what)) }

// reader adds the reader kernel on the program's cores.
func (s *splitProgram) reader() *kir.Kernel { return newReader(s.p, s.rs) }

// writerOf adds the writer kernel on the program's cores with v's buffer
// bound to its argument arg (bind).
func (s *splitProgram) writerOf(arg string, v *ir.Value) (*kir.Kernel, *blocks.Access) {
	wr := newWriter(s.p, s.rs)
	return wr, s.bind(wr, arg, v)
}

// compute adds the compute kernel on the program's cores (fp32Compute).
func (s *splitProgram) compute() (*kir.Kernel, *blocks.Compute) {
	return fp32Compute(s.p, s.rs, s.ctx)
}

// rangeCompute is compute with its item count as the runtime arg count.
func (s *splitProgram) rangeCompute(count string) (*kir.Kernel, *blocks.Compute, kir.ArgRef) {
	cp, c := s.compute()
	return cp, c, cp.RuntimeArg(count)
}

// fp32Compute adds a compute kernel on rs with an fp32 DEST at ctx's
// fidelity and returns it with the blocks.Compute that emits into it.
func fp32Compute(p *kir.Program, rs []ir.CoreRange, ctx *Context) (*kir.Kernel, *blocks.Compute) {
	k := blocks.NewComputeKernel(p, rs, kir.ComputeConfig{MathFidelity: ctx.Fidelity, FP32DestAccEn: true})
	c := blocks.NewCompute(p, k)
	c.Chains = ctx.Target.SFPU == sfpu.CodeTCC
	return k, c
}

// finish adds the writer of a program whose work items are the result's
// pages: it stores the pages cbOut receives to out (runtime args
// start_tile and num_tiles). It then gives core i its share (start, count)
// = plan.Range(i) as the runtime args (start, count) of rd and of the
// writer, and (count) of cp unless cp is nil, and returns the program, or
// the first error kept (done).
func (s *splitProgram) finish(out *ir.Value, cbOut int, rd, cp *kir.Kernel) (*kir.Program, error) {
	return s.finishRows(out, cbOut, rd, cp, "", 1)
}

// finishRows is finish for work items of n result pages each (tile rows
// of n tiles) unless arg is "" (finish): the writer's compile arg arg is
// n, its runtime args are start_row and num_rows, and it stores pages
// [start*n, (start+count)*n).
func (s *splitProgram) finishRows(out *ir.Value, cbOut int, rd, cp *kir.Kernel, arg string, n int) (*kir.Program, error) {
	wr, oAcc := s.writerOf("out_addr", out)
	if arg == "" {
		wstart, wcount := wr.RuntimeArg("start_tile"), wr.RuntimeArg("num_tiles")
		blocks.WritePages(wr.Builder(), oAcc, cbOut, wstart, wcount)
	} else {
		wn := wr.CompileArg(arg, uint32(n))
		wstart, wrows := wr.RuntimeArg("start_row"), wr.RuntimeArg("num_rows")
		blocks.WritePages(wr.Builder(), oAcc, cbOut, kir.Mul(wstart, wn), kir.Mul(wrows, wn))
	}
	s.plan.SetArgs(s.cores, rd, cp, wr)
	return s.done(s.p)
}
