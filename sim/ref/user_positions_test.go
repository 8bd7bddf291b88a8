package ref

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/ir/numerics"
)

// userPosOp builds the decode op kind for B users with pos [posN]: q, gate
// [B,H,D], caches [B,Hkv,L,D], new [B,Hkv,D].
func userPosOp(t *testing.T, kind ir.OpKind, B, posN, H, Hkv, D, L int) *ir.Op {
	t.Helper()
	b := ir.NewBuilder("user_pos")
	pos := b.Input("pos", ir.TensorType{Shape: ir.Shape{posN}, DType: ir.UInt32, Layout: ir.RowMajorLayout, Mem: ir.DRAM, Dist: ir.Replicated})
	kc := b.Input("k_cache", ir.T(ir.BF16, B, Hkv, L, D))
	var out *ir.Value
	switch kind {
	case ir.OpUpdateCache:
		out = b.UpdateCache(kc, b.Input("new", ir.T(ir.BF16, B, Hkv, D)), pos)
	case ir.OpSDPADecode:
		out = b.SDPADecode(b.Input("q", ir.T(ir.BF16, B, H, D)), kc, b.Input("v_cache", ir.T(ir.BF16, B, Hkv, L, D)), pos, 0.125)
	case ir.OpSDPADecodeGated:
		out = b.SDPADecodeGated(b.Input("q", ir.T(ir.BF16, B, H, D)), kc, b.Input("v_cache", ir.T(ir.BF16, B, Hkv, L, D)), pos, b.Input("gate", ir.T(ir.BF16, B, H, D)), 0.125)
	}
	b.Output(out)
	if _, err := b.Finish(); err != nil {
		t.Fatal(err)
	}
	return out.Def
}

// TestDecodeUserPositions: a decode op with pos [B] equals, user by user,
// the op of that user alone with pos [1] at its position.
func TestDecodeUserPositions(t *testing.T) {
	const B, H, Hkv, D, L = 3, 4, 2, 64, 64
	ps := []int{0, 33, 63}
	for _, kind := range []ir.OpKind{ir.OpUpdateCache, ir.OpSDPADecode, ir.OpSDPADecodeGated} {
		t.Run(kind.String(), func(t *testing.T) {
			op := userPosOp(t, kind, B, B, H, Hkv, D, L)
			rng := rand.New(rand.NewPCG(3, 9))
			args := make([]Tensor, len(op.Operands))
			for i, v := range op.Operands {
				args[i] = NewTensor(v.Type.Shape)
				for j := range args[i].Data {
					args[i].Data[j] = numerics.RoundBF16(float32(rng.NormFloat64()))
				}
			}
			posIdx := map[ir.OpKind]int{ir.OpUpdateCache: 2, ir.OpSDPADecode: 3, ir.OpSDPADecodeGated: 3}[kind]
			for b, p := range ps {
				args[posIdx].Data[b] = float32(p)
			}
			got, err := EvalOp(op, args, DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			one := userPosOp(t, kind, 1, 1, H, Hkv, D, L)
			per := len(got[0].Data) / B
			for b, p := range ps {
				uargs := make([]Tensor, len(args))
				for i, a := range args {
					if i == posIdx {
						uargs[i] = Tensor{Shape: ir.Shape{1}, Data: []float32{float32(p)}}
						continue
					}
					n := len(a.Data) / B
					s := a.Shape.Clone()
					s[0] = 1
					uargs[i] = Tensor{Shape: s, Data: a.Data[b*n : (b+1)*n]}
				}
				want, err := EvalOp(one, uargs, DefaultOptions())
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(bits(want[0].Data), bits(got[0].Data[b*per:(b+1)*per])); diff != "" {
					t.Errorf("user %d at %d (-want +got):\n%s", b, p, diff)
				}
			}
		})
	}
	t.Run("bad_shape", func(t *testing.T) {
		op := userPosOp(t, ir.OpSDPADecode, B, B, H, Hkv, D, L)
		args := make([]Tensor, len(op.Operands))
		for i, v := range op.Operands {
			args[i] = NewTensor(v.Type.Shape)
		}
		args[3] = NewTensor(ir.Shape{2})
		if _, err := EvalOp(op, args, DefaultOptions()); err == nil {
			t.Error("pos [2] for 3 users: no error")
		}
	})
}

// bits are xs's float32 bit patterns (NaNs compare equal).
func bits(xs []float32) []uint32 {
	out := make([]uint32, len(xs))
	for i, x := range xs {
		out[i] = math.Float32bits(x)
	}
	return out
}
