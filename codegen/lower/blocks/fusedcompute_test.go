package blocks

import (
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
)

// TestBinaryTileForms checks the calls of the streamed binary tile ops:
// each consumes one page of a and of b, BinaryTile negates before its
// steps and packs to one CB, BinaryTileTo packs to every CB it is given.
func TestBinaryTileForms(t *testing.T) {
	for _, tc := range []struct {
		name string
		emit func(c *Compute, a, b, out, out2 int)
		want []string
	}{
		{"BinaryTile negated", func(c *Compute, a, b, out, _ int) {
			c.BinaryTile(kir.EltSub, BcastNone, a, b, out, true, []SFPUStep{{Op: kir.SFPUExp}})
		}, []string{
			"cb_wait_front", "cb_wait_front", "tile_regs_acquire", "sub_tiles_init", "sub_tiles",
			"negative_tile_init", "negative_tile", "exp_tile_init", "exp_tile", "cb_pop_front", "cb_pop_front",
			"tile_regs_commit", "cb_reserve_back", "tile_regs_wait", "pack_tile", "tile_regs_release", "cb_push_back",
		}},
		{"BinaryTileTo two CBs", func(c *Compute, a, b, out, out2 int) {
			c.BinaryTileTo(kir.EltAdd, BcastNone, a, b, out, out2)
		}, []string{
			"cb_wait_front", "cb_wait_front", "tile_regs_acquire", "add_tiles_init", "add_tiles", "cb_pop_front", "cb_pop_front",
			"tile_regs_commit", "cb_reserve_back", "cb_reserve_back", "tile_regs_wait", "pack_tile", "pack_tile",
			"tile_regs_release", "cb_push_back", "cb_push_back",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := kir.NewProgram("c")
			rs := []ir.CoreRange{{}}
			pl := NewCBPlan(p, target.Blackhole(), rs)
			a, b := pl.Input("a", ir.BF16, 2), pl.Input("b", ir.BF16, 2)
			out, out2 := pl.Output("out", ir.BF16, 2), pl.Scratch("copy", ir.BF16, 1)
			k := NewComputeKernel(p, rs, kir.ComputeConfig{FP32DestAccEn: true})
			c := NewCompute(p, k)
			c.Startup(a, b, out)
			start := len(k.Body)
			tc.emit(c, a, b, out, out2)
			if diff := cmp.Diff(tc.want, apiNames(k.Body[start:])); diff != "" {
				t.Errorf("calls (-want +got):\n%s", diff)
			}
		})
	}
}

// TestReserveWaitFront checks the CB handshakes that return an L1
// address: the CB call, then a variable holding the write or read
// pointer of the same CB.
func TestReserveWaitFront(t *testing.T) {
	for _, tc := range []struct {
		name    string
		emit    func(b *kir.Builder) kir.Var
		wantCB  kir.Stmt
		wantPtr kir.Expr
	}{
		{"Reserve", func(b *kir.Builder) kir.Var { return Reserve(b, 3, kir.C(2), "l1") },
			kir.CBReserveBack{CB: 3, N: kir.C(2)}, kir.GetWritePtr{CB: 3}},
		{"WaitFront", func(b *kir.Builder) kir.Var { return WaitFront(b, 16, kir.C(1), "src") },
			kir.CBWaitFront{CB: 16, N: kir.C(1)}, kir.GetReadPtr{CB: 16}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := &kir.Kernel{Name: "k", Role: kir.RoleReader}
			v := tc.emit(k.Builder())
			if len(k.Body) != 2 {
				t.Fatalf("%d statements, want 2", len(k.Body))
			}
			if !reflect.DeepEqual(k.Body[0], tc.wantCB) {
				t.Errorf("first statement %#v, want %#v", k.Body[0], tc.wantCB)
			}
			if let, ok := k.Body[1].(kir.Let); !ok || let.Var != v || !reflect.DeepEqual(let.Value, tc.wantPtr) {
				t.Errorf("second statement %#v, want a let of %s = %#v", k.Body[1], v.Name, tc.wantPtr)
			}
		})
	}
}
