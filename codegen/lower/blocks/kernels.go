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
// order and the core ranges covering exactly them (CoresFrom(t, 0, n)).
func FirstCores(t *target.Target, n int) ([]kir.Core, []ir.CoreRange) { return CoresFrom(t, 0, n) }

// CoresFrom returns worker cores start .. start+n-1 in row-major order and
// ranges covering exactly them: runs of full rows as one rectangle, the
// rest of a row as another.
func CoresFrom(t *target.Target, start, n int) ([]kir.Core, []ir.CoreRange) {
	cores := make([]kir.Core, n)
	for i := range cores {
		cores[i] = kir.Core{X: (start + i) % t.GridX, Y: (start + i) / t.GridX}
	}
	var rs []ir.CoreRange
	for i := 0; i < n; {
		c := cores[i]
		if c.X == 0 && n-i >= t.GridX {
			rows := (n - i) / t.GridX
			rs = append(rs, ir.CoreRange{X0: 0, Y0: c.Y, X1: t.GridX - 1, Y1: c.Y + rows - 1})
			i += rows * t.GridX
			continue
		}
		end := min(n-i, t.GridX-c.X)
		rs = append(rs, ir.CoreRange{X0: c.X, Y0: c.Y, X1: c.X + end - 1, Y1: c.Y})
		i += end
	}
	return cores, rs
}
