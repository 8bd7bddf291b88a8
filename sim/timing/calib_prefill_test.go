package timing

import (
	"testing"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
)

// The one compute-bound calibration row: the measured stacks' prefill
// matmuls with bfp8_b weights take 1.84x as long at HiFi4 as at HiFi2
// (issue 31). prefillMatmulCore rebuilds their inner loop on one core,
// as TTNN's 2D-multicast matmul runs it once its blocks are in L1: an
// activation block of rows x Kt bf16 tiles and a weight block of Kt x
// cols bfp8_b tiles, multiplied in 1 x 4 sub-blocks (fp32 DEST
// accumulation, half-sync: 4 tiles), K in the inner loop, each sub-block
// packed once.
const (
	measuredPrefillFidelityRatio = 1.84
	prefillRatioTolerance        = 0.10
)

// prefillMatmulCore is that program at fidelity fid.
func prefillMatmulCore(fid ir.MathFidelity) *kir.Program {
	const rows, kt, cols, sub = 4, 40, 8, 4
	core := []ir.CoreRange{{X0: 0, Y0: 0, X1: 0, Y1: 0}}
	p := kir.NewProgram("prefill matmul core")
	p.AddCB(kir.CB{Index: 0, PageSize: ir.BF16.TileBytes(), Pages: rows * kt, Format: ir.BF16, Cores: core, Name: "act"})
	p.AddCB(kir.CB{Index: 1, PageSize: ir.BFP8B.TileBytes(), Pages: kt * cols, Format: ir.BFP8B, Cores: core, Name: "weights"})
	p.AddCB(kir.CB{Index: 16, PageSize: ir.BF16.TileBytes(), Pages: 2 * sub, Format: ir.BF16, Cores: core, Name: "out"})

	// the blocks are in L1 (their reads overlap the previous block's
	// products in the measured kernels): the reader only pushes them
	rd := p.AddKernel(&kir.Kernel{Name: "reader", Role: kir.RoleReader, Processor: kir.RISCV1, NoC: 1, Cores: core})
	b := rd.Builder()
	b.CBReserveBack(0, kir.Ci(rows*kt))
	b.CBPushBack(0, kir.Ci(rows*kt))
	b.CBReserveBack(1, kir.Ci(kt*cols))
	b.CBPushBack(1, kir.Ci(kt*cols))

	cp := p.AddKernel(&kir.Kernel{Name: "compute", Role: kir.RoleCompute, Processor: kir.ComputeProc, Cores: core,
		Compute: kir.ComputeConfig{MathFidelity: fid, FP32DestAccEn: true}})
	c := cp.Builder()
	c.MatmulHWStartup(0, 1, 16)
	c.MatmulBlockInit(0, 1, false, kir.Ci(sub), kir.C(1), kir.Ci(kt))
	c.CBWaitFront(0, kir.Ci(rows*kt))
	c.CBWaitFront(1, kir.Ci(kt*cols))
	c.For("r", kir.C(0), kir.Ci(rows), func(r kir.Var) {
		c.ForStep("j0", kir.C(0), kir.Ci(cols), kir.Ci(sub), func(j0 kir.Var) {
			c.TileRegsAcquire()
			c.For("k", kir.C(0), kir.Ci(kt), func(k kir.Var) {
				c.MatmulBlock(0, 1, kir.Add(kir.Mul(r, kir.Ci(kt)), k), kir.Add(kir.Mul(k, kir.Ci(cols)), j0), kir.C(0), false, kir.Ci(sub), kir.C(1), kir.Ci(kt))
			})
			c.TileRegsCommit()
			c.CBReserveBack(16, kir.Ci(sub))
			c.TileRegsWait()
			c.For("j", kir.C(0), kir.Ci(sub), func(j kir.Var) { c.PackTile(j, 16) })
			c.TileRegsRelease()
			c.CBPushBack(16, kir.Ci(sub))
		})
	})
	c.CBPopFront(0, kir.Ci(rows*kt))
	c.CBPopFront(1, kir.Ci(kt*cols))

	wr := p.AddKernel(&kir.Kernel{Name: "writer", Role: kir.RoleWriter, Processor: kir.RISCV0, NoC: 0, Cores: core})
	o := wr.Builder()
	o.For("s", kir.C(0), kir.Ci(rows*cols/sub), func(kir.Var) {
		o.CBWaitFront(16, kir.Ci(sub))
		o.CBPopFront(16, kir.Ci(sub))
	})
	return p
}

// prefillFidelityRatio is the predicted time of prefillMatmulCore at HiFi4
// over its time at HiFi2 under prm.
func prefillFidelityRatio(tb testing.TB, prm *Params) float64 {
	tb.Helper()
	t := target.Blackhole()
	us := map[ir.MathFidelity]float64{}
	for _, f := range []ir.MathFidelity{ir.HiFi2, ir.HiFi4} {
		p := prefillMatmulCore(f)
		if err := kir.Validate(p, t); err != nil {
			tb.Fatalf("the prefill calibration kernel breaks a hardware rule: %v", err)
		}
		pt, err := Simulate(p, t, prm, Options{})
		if err != nil {
			tb.Fatal(err)
		}
		// the compute alone: less the fixed per-program cost
		us[f] = pt.US() - prm.FixedProgramUS
	}
	return us[ir.HiFi4] / us[ir.HiFi2]
}
