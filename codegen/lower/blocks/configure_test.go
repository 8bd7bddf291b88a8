package blocks

import (
	"fmt"
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

// TestFP32CopyReconfigures: a Float32 CB that only copy_tile reads
// unpacks straight to DEST (destination format Float32) and every other
// Float32 CB through the source register as tf32, so the unpacker is
// reconfigured between a copy of one and an FPU read of another, though
// both CBs are Float32 (ttsim stops on the add otherwise: an fp32 CB
// unpacked through SrcA as Float32); FPU reads of Float32 CBs share one
// configuration, and so do the copies of one CB.
func TestFP32CopyReconfigures(t *testing.T) {
	p := kir.NewProgram("c")
	rs := []ir.CoreRange{{}}
	pl := NewCBPlan(p, target.Blackhole(), rs)
	l, id, a, b := pl.Input("l", ir.FP32, 1), pl.Input("id", ir.FP32, 1), pl.Scratch("a", ir.FP32, 1), pl.Scratch("b", ir.FP32, 1)
	out := pl.Output("out", ir.FP32, 1)
	k := NewComputeKernel(p, rs, kir.ComputeConfig{FP32DestAccEn: true})
	c := NewCompute(p, k)
	c.Startup(l, id, out)
	c.Copy(l, kir.C(0), kir.C(0))                                        // reconfigured: l to DEST
	c.Copy(l, kir.C(0), kir.C(1))                                        // as it is
	c.Binary(kir.EltAdd, BcastNone, id, a, kir.C(0), kir.C(0), kir.C(0)) // reconfigured: tf32 reads
	c.Binary(kir.EltMul, BcastNone, a, b, kir.C(0), kir.C(0), kir.C(0))  // as it is
	c.Copy(a, kir.C(0), kir.C(0))                                        // reconfigured: a copy
	c.Matmul(a, b, kir.C(0), kir.C(0), kir.C(0), false)                  // reconfigured
	var got []string
	for _, s := range k.Body {
		switch s := s.(type) {
		case kir.ReconfigDataFormat:
			got = append(got, fmt.Sprintf("reconfig(%d, %d)", s.SrcA, s.SrcB))
		case kir.CopyTile, kir.BinaryTiles, kir.MatmulTiles:
			got = append(got, apiNames([]kir.Stmt{s})...)
		}
	}
	want := []string{
		fmt.Sprintf("reconfig(%d, %d)", l, id), "copy_tile", "copy_tile",
		fmt.Sprintf("reconfig(%d, %d)", id, a), "add_tiles", "mul_tiles",
		fmt.Sprintf("reconfig(%d, %d)", a, a), "copy_tile", // source B kept (as a add_tiles configured it)
		fmt.Sprintf("reconfig(%d, %d)", b, a), "matmul_tiles",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("unpacker configuration and tile ops (-want +got):\n%s", diff)
	}
	k.ChooseUnpackModes(p)
	if diff := cmp.Diff([]int{l}, k.Compute.UnpackToDestFP32); diff != "" {
		t.Errorf("UnpackToDestFP32 (-want +got):\n%s", diff)
	}
}
