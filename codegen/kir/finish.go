package kir

import (
	"sort"

	"github.com/tcc-dev/tcc/ir"
)

// Finishing a program: what every lowered program gets once its kernels
// are built, so that no lowering can forget it. Finish applies all of it;
// Validate checks the results (RuleDefines, RuleUnpackMode) and the
// simulator checks what only shows at run time (RuleAtomicBarrier).

// Finish applies DefineReduceDefaults, EndAtomics and ChooseUnpackModes to
// every kernel of p.
func Finish(p *Program) {
	for _, k := range p.Kernels {
		k.DefineReduceDefaults()
		k.EndAtomics()
		k.ChooseUnpackModes(p)
	}
}

// ReduceOpDefine and ReduceDimDefine are the defines api/compute/reduce.h uses as the default
// template arguments of reduce_init and reduce_tile.
const (
	ReduceOpDefine  = "REDUCE_OP"
	ReduceDimDefine = "REDUCE_DIM"
)

// FirstReduce returns the first reduce_init or reduce_tile of body (in
// program order) and whether there is one.
func FirstReduce(body []Stmt) (ReduceOp, ReduceDim, bool) {
	var op ReduceOp
	var dim ReduceDim
	found := false
	Inspect(body, func(s Stmt) bool {
		if found {
			return false
		}
		switch s := s.(type) {
		case ReduceInit:
			op, dim, found = s.Op, s.Dim, true
		case ReduceTile:
			op, dim, found = s.Op, s.Dim, true
		}
		return !found
	})
	return op, dim, found
}

// DefineReduceDefaults sets REDUCE_OP and REDUCE_DIM (when not already set)
// from k's first reduce call, so that the kernel compiles against tt-metal's
// reduce.h; kernels without reduce calls are left alone. Postcondition:
// Validate's RuleDefines holds for k.
func (k *Kernel) DefineReduceDefaults() {
	op, dim, ok := FirstReduce(k.Body)
	if !ok {
		return
	}
	if _, set := k.Defines[ReduceOpDefine]; !set {
		k.Define(ReduceOpDefine, ReduceOpCpp[op])
	}
	if _, set := k.Defines[ReduceDimDefine]; !set {
		k.Define(ReduceDimDefine, ReduceDimCpp[dim])
	}
}

// EndAtomics appends noc_async_atomic_barrier() to a data-movement kernel
// that issues noc_semaphore_inc anywhere and does not already end with the
// barrier. Postcondition: the kernel never ends with increments in flight.
func (k *Kernel) EndAtomics() {
	if k.Role == RoleCompute {
		return
	}
	inc := false
	Inspect(k.Body, func(s Stmt) bool {
		if _, ok := s.(NoCSemaphoreInc); ok {
			inc = true
		}
		return !inc
	})
	if !inc {
		return
	}
	if n := len(k.Body); n > 0 {
		if _, ok := k.Body[n-1].(NoCAsyncAtomicBarrier); ok {
			return
		}
	}
	k.Body = append(k.Body, NoCAsyncAtomicBarrier{})
}

// ChooseUnpackModes sets k.Compute.UnpackToDestFP32 for a compute kernel
// with fp32 DEST: every Float32 CB (on the kernel's cores in p) that the
// kernel reads only with copy_tile unpacks straight to DEST, so copies of
// fp32 data (the GDN recurrent state, fp32 intermediates) stay exact. A
// Float32 CB that is also an FPU operand stays in the default mode (its
// copies are truncated to tf32 like its FPU reads); a lowering that needs
// such a CB copied exactly must give the copy its own CB. Postcondition:
// Validate's RuleUnpackMode holds for k.
func (k *Kernel) ChooseUnpackModes(p *Program) {
	if k.Role != RoleCompute || !k.Compute.FP32DestAccEn || len(k.Cores) == 0 {
		k.Compute.UnpackToDestFP32 = nil
		return
	}
	c := Core{X: k.Cores[0].X0, Y: k.Cores[0].Y0}
	copied, fpu := map[int]bool{}, map[int]bool{}
	Inspect(k.Body, func(s Stmt) bool {
		if ct, ok := s.(CopyTile); ok {
			copied[ct.CB] = true
		}
		for _, cb := range fpuReadsOf(s) {
			fpu[cb] = true
		}
		return true
	})
	var out []int
	for cb := range copied {
		if cfg := p.CBOn(c, cb); cfg != nil && cfg.Format == ir.FP32 && !fpu[cb] {
			out = append(out, cb)
		}
	}
	sort.Ints(out)
	k.Compute.UnpackToDestFP32 = out
}
