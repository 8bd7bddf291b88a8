package blocks

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
)

// TestMatmulPackConfig: configuring the matmul and the packer before a
// loop keeps every init and reconfig out of the loop body.
func TestMatmulPackConfig(t *testing.T) {
	p := kir.NewProgram("c")
	rs := []ir.CoreRange{{}}
	pl := NewCBPlan(p, target.Blackhole(), rs)
	x, act, w := pl.Input("x", ir.BF16, 1), pl.Input("act", ir.BF16, 1), pl.Input("w", ir.BFP8B, 2)
	out, sq := pl.Output("out", ir.BF16, 1), pl.Scratch("sq", ir.FP32, 1)
	k := NewComputeKernel(p, rs, kir.ComputeConfig{FP32DestAccEn: true})
	c := NewCompute(p, k)
	c.Startup(x, x, sq)
	c.MatmulConfig(act, w, false)
	c.PackConfig(out)
	c.MatmulConfig(act, w, false) // nothing new
	entry := len(k.Body)
	c.For("j", kir.C(0), kir.C(4), func(j kir.Var) {
		c.Acquire()
		c.Matmul(act, w, kir.C(0), kir.C(0), kir.C(0), false)
		c.Commit()
		c.Wait()
		c.Pack(kir.C(0), out)
		c.Release()
	})
	if diff := cmp.Diff([]string{"compute_kernel_hw_startup", "reconfig_data_format", "mm_init_short", "pack_reconfig_data_format"}, apiNames(k.Body[:entry])); diff != "" {
		t.Errorf("configuration calls (-want +got):\n%s", diff)
	}
	want := []string{"tile_regs_acquire", "matmul_tiles", "tile_regs_commit", "tile_regs_wait", "pack_tile", "tile_regs_release"}
	if diff := cmp.Diff(want, apiNames(k.Body[entry].(kir.For).Body)); diff != "" {
		t.Errorf("loop body calls (-want +got):\n%s", diff)
	}
}
