package lower

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower/blocks"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/ir/numerics"
	"github.com/tcc-dev/tcc/sim/kexec"
	"github.com/tcc-dev/tcc/sim/ref"
)

// bfpPrologueOp builds an attention prologue (decode when S == 0, else a
// prefill of S tokens) with bf16 activations and bfp8_b caches [B, Hkv, L,
// D] held as state and updated in place; it returns the op and the alias
// of its cache results to the caches.
func bfpPrologueOp(t *testing.T, B, S, H, Hkv, D, R, L int) (*ir.Op, map[*ir.Value]*ir.Value) {
	t.Helper()
	b := ir.NewBuilder("bfp_prologue")
	b.Region("attention", 0)
	pos := b.Input("pos", ir.TensorType{Shape: ir.Shape{1}, DType: ir.UInt32, Layout: ir.RowMajorLayout, Mem: ir.DRAM, Dist: ir.Replicated})
	tok := max(S, 1)
	qg := b.Input("qg", ir.T(ir.BF16, B, tok, H*2*D))
	k := b.Input("k", ir.T(ir.BF16, B, tok, Hkv*D))
	v := b.Input("v", ir.T(ir.BF16, B, tok, Hkv*D))
	qn := b.Weight("q_norm.weight", ir.T(ir.BF16, D))
	kn := b.Weight("k_norm.weight", ir.T(ir.BF16, D))
	kc := b.State("k_cache", ir.T(ir.BFP8B, B, Hkv, L, D))
	vc := b.State("v_cache", ir.T(ir.BFP8B, B, Hkv, L, D))
	var res []*ir.Value
	if S == 0 {
		res = b.AttnPrologue(qg, k, v, qn, kn, b.Input("rope.cos", ir.T(ir.BF16, B, R)), b.Input("rope.sin", ir.T(ir.BF16, B, R)), kc, vc, pos, 1e-6, 1)
	} else {
		res = b.AttnProloguePrefill(qg, k, v, qn, kn, b.Input("rope.cos", ir.T(ir.BF16, S, 1, R)), b.Input("rope.sin", ir.T(ir.BF16, S, 1, R)), kc, vc, pos, 1e-6, 1)
	}
	b.UpdateState(kc, res[2])
	b.UpdateState(vc, res[3])
	b.Output(res[0], res[1])
	if _, err := b.Finish(); err != nil {
		t.Fatal(err)
	}
	return res[0].Def, map[*ir.Value]*ir.Value{res[2]: kc, res[3]: vc}
}

// bfpStaleCache is the bytes of n bfp8_b cache tiles whose face rows all
// differ in magnitude: face row g of tile i has exponent 100 + (7g + 3i)
// mod 40 and random mantissas, and every 11th face row zero mantissas under
// a large exponent (a bfp8_b tile the packer never writes: any repacking
// of the tile would change it).
func bfpStaleCache(rng *rand.Rand, n int) []byte {
	tb := ir.BFP8B.TileBytes()
	raw := make([]byte, n*tb)
	for i := range n {
		tile := raw[i*tb : (i+1)*tb]
		for g := range numerics.GroupsPerTile {
			tile[g] = byte(100 + (7*g+3*i)%40)
			mant := tile[blocks.BFPExpBytes+g*16 : blocks.BFPExpBytes+(g+1)*16]
			if g%11 == 0 {
				tile[g] = 200
				continue
			}
			for j := range mant {
				mant[j] = byte(rng.IntN(256))
			}
		}
	}
	return raw
}

// bfpRowBytes reports whether byte off of a bfp8_b tile belongs to row r.
func bfpRowBytes(off, r int) bool {
	if off < blocks.BFPExpBytes {
		f := off / 16
		return f/2 == r/16 && off%16 == r%16
	}
	m := off - blocks.BFPExpBytes
	f, row := m/256, m%256/16
	return f/2 == r/16 && row == r%16
}

// TestBFP8CacheRowWrite writes the new K and V rows of an attention
// prologue into bfp8_b caches whose face rows all hold different
// magnitudes (and stale bytes no packer writes) and checks, byte for byte,
// that every other row of every cache tile is unchanged and that the
// rows written are those of the reference's Store of the new cache (its
// shared exponents computed per face row from the new row alone).
func TestBFP8CacheRowWrite(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name                  string
		B, S, H, Hkv, D, R, L int
		pos                   int
		tgt                   func() *target.Target
	}{
		{"decode_pos37_row5", 2, 0, 4, 2, 64, 32, 64, 37, target.Blackhole},
		{"decode_pos50_row18_grid2", 1, 0, 4, 2, 64, 64, 96, 50, smallGrid},
		{"decode_27b_pos100", 1, 0, 12, 2, 256, 64, 128, 100, target.Blackhole},
		{"prefill_s8_pos28_two_tiles", 1, 8, 4, 2, 64, 32, 64, 28, target.Blackhole},
		{"prefill_s40_pos17_grid2", 2, 40, 4, 2, 64, 16, 96, 17, smallGrid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			op, alias := bfpPrologueOp(t, tc.B, tc.S, tc.H, tc.Hkv, tc.D, tc.R, tc.L)
			testBFPRowWrite(t, tc.tgt(), op, alias, tc.pos, max(tc.S, 1))
		})
	}
}

func testBFPRowWrite(t *testing.T, tgt *target.Target, op *ir.Op, alias map[*ir.Value]*ir.Value, pos, n int) {
	ctx := NewContext(tgt)
	ctx.Alias = alias
	p, err := Lower(op, ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := kir.Validate(p, tgt); err != nil {
		t.Fatal(err)
	}
	d := kexec.NewDevice(ctx.Target)
	for _, b := range p.Buffers {
		if _, err := d.Alloc(b); err != nil {
			t.Fatal(err)
		}
	}
	rng := rand.New(rand.NewPCG(uint64(pos), 5))
	in := make([]ref.Tensor, len(op.Operands))
	stale := map[int][]byte{}
	for i, v := range op.Operands {
		name := ctx.BufferName(v)
		if v.Type.DType == ir.BFP8B {
			_, pages, err := PageLayout(v.Type)
			if err != nil {
				t.Fatal(err)
			}
			stale[i] = bfpStaleCache(rng, pages)
			if err := d.WritePages(name, 0, stale[i]); err != nil {
				t.Fatal(err)
			}
			vals, err := download(d, name, v)
			if err != nil {
				t.Fatal(err)
			}
			in[i] = ref.Tensor{Shape: v.Type.Shape, Data: vals}
			continue
		}
		data := make([]float32, v.Type.Shape.Numel())
		for j := range data {
			switch {
			case v.Type.DType == ir.UInt32:
				data[j] = float32(pos)
			case v.Kind == ir.KindWeight:
				data[j] = numerics.RoundBF16(float32(0.1 * rng.NormFloat64()))
			case v.Name == "rope.cos" || v.Name == "rope.sin":
				data[j] = numerics.RoundBF16(float32(math.Cos(rng.Float64() * 2 * math.Pi)))
			default:
				data[j] = numerics.RoundBF16(float32(rng.NormFloat64()))
			}
		}
		if err := upload(d, name, v, data); err != nil {
			t.Fatal(err)
		}
		in[i] = ref.Tensor{Shape: v.Type.Shape, Data: data}
	}
	if _, err := d.Run(p, kexec.RunOptions{}); err != nil {
		t.Fatalf("Run: %v", err)
	}
	want, err := ref.EvalOp(op, in, ref.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	tb := ir.BFP8B.TileBytes()
	for ci, c := range []int{7, 8} {
		v := op.Operands[c]
		s := v.Type.Shape
		B, H, L, D := s[0], s[1], s[2], s[3]
		Lt, Dt := L/ir.TileSize, D/ir.TileSize
		got, err := d.ReadPages(ctx.BufferName(v), 0, len(stale[c])/tb)
		if err != nil {
			t.Fatal(err)
		}
		// The reference's new cache, packed: the rows written must match it.
		b, r, cols := matrixDims(s)
		wantRaw, err := numerics.PackTiles(ir.BFP8B, numerics.TilizeBatch(want[2+ci].Data, b, r, cols))
		if err != nil {
			t.Fatal(err)
		}
		written := 0
		for bh := range B * H {
			for lt := range Lt {
				for dd := range Dt {
					page := (bh*Lt+lt)*Dt + dd
					old, now, ref := stale[c][page*tb:(page+1)*tb], got[page*tb:(page+1)*tb], wantRaw[page*tb:(page+1)*tb]
					for off := range tb {
						row := -1
						for p := pos; p < pos+n; p++ {
							if p/ir.TileSize == lt && bfpRowBytes(off, p%ir.TileSize) {
								row = p
							}
						}
						if row < 0 && now[off] != old[off] {
							t.Fatalf("%s cache %d (kv head %d, tile row %d, column tile %d): byte %d changed from %#x to %#x; only rows %d..%d may change", op.Name(), ci, bh, lt, dd, off, old[off], now[off], pos, pos+n-1)
						}
						if row >= 0 {
							written++
							if now[off] != ref[off] {
								t.Fatalf("%s cache %d (kv head %d, position %d, column tile %d): byte %d is %#x, the reference's packed row has %#x", op.Name(), ci, bh, row, dd, off, now[off], ref[off])
							}
						}
					}
					if !bytes.Equal(old, now) && lt != pos/ir.TileSize && lt != (pos+n-1)/ir.TileSize {
						t.Fatalf("tile row %d changed", lt)
					}
				}
			}
		}
		if want := B * H * Dt * n * 34; written != want {
			t.Fatalf("%s: checked %d row bytes, want %d", fmt.Sprint(op.Name()), written, want)
		}
	}
	t.Logf("%s: %d cores; the other rows' bytes unchanged, the %d new rows those of the reference's Store", p.Name, len(p.Cores()), n)
}
