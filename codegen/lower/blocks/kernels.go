package blocks

import (
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
)

// NewReaderKernel adds the reader kernel (NCRISC, NoC 1) on cores.
func NewReaderKernel(p *kir.Program, cores []ir.CoreRange) *kir.Kernel {
	return p.AddKernel(&kir.Kernel{Name: "reader", Role: kir.RoleReader, Processor: kir.RISCV1, NoC: 1, Cores: cores})
}

// NewWriterKernel adds the writer kernel (BRISC, NoC 0) on cores.
func NewWriterKernel(p *kir.Program, cores []ir.CoreRange) *kir.Kernel {
	return p.AddKernel(&kir.Kernel{Name: "writer", Role: kir.RoleWriter, Processor: kir.RISCV0, NoC: 0, Cores: cores})
}

// NewComputeKernel adds the compute kernel on cores with configuration cfg.
func NewComputeKernel(p *kir.Program, cores []ir.CoreRange, cfg kir.ComputeConfig) *kir.Kernel {
	return p.AddKernel(&kir.Kernel{Name: "compute", Role: kir.RoleCompute, Processor: kir.ComputeProc, Cores: cores, Compute: cfg})
}

// FirstCores returns the first n cores of t's worker grid in row-major
// order and the core ranges covering exactly them (full rows as one
// rectangle, the partial last row as another).
func FirstCores(t *target.Target, n int) ([]kir.Core, []ir.CoreRange) {
	cores := make([]kir.Core, n)
	for i := range cores {
		cores[i] = kir.Core{X: i % t.GridX, Y: i / t.GridX}
	}
	var rs []ir.CoreRange
	if full := n / t.GridX; full > 0 {
		rs = append(rs, ir.CoreRange{X0: 0, Y0: 0, X1: t.GridX - 1, Y1: full - 1})
	}
	if rem := n % t.GridX; rem > 0 {
		y := n / t.GridX
		rs = append(rs, ir.CoreRange{X0: 0, Y0: y, X1: rem - 1, Y1: y})
	}
	return cores, rs
}
