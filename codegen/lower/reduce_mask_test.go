package lower

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/tcc-dev/tcc/codegen/cpp"
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/ir/numerics"
	"github.com/tcc-dev/tcc/sim/kexec"
)

// stripUninit removes every reduce_uninit from body (recursively).
func stripUninit(body []kir.Stmt) ([]kir.Stmt, int) {
	var out []kir.Stmt
	n := 0
	for _, s := range body {
		switch st := s.(type) {
		case kir.ReduceUninit:
			n++
			continue
		case kir.For:
			var m int
			st.Body, m = stripUninit(st.Body)
			n += m
			s = st
		case kir.If:
			var m1, m2 int
			st.Then, m1 = stripUninit(st.Then)
			st.Else, m2 = stripUninit(st.Else)
			n += m1 + m2
			s = st
		}
		out = append(out, s)
	}
	return out, n
}

// TestReduceUninitIsNeeded: reduce_init programs the packer's edge mask and
// only reduce_uninit clears it, so a program whose kernel lost its
// reduce_uninit packs zeros outside column 0 after a row reduction (the
// attention's row maximum and sums); the simulator reproduces that, so
// the broken program no longer matches the reference while the emitted
// one does. (The norms sum by matmul, which sets no mask.)
func TestReduceUninitIsNeeded(t *testing.T) {
	cases := map[string]func(b *ir.Builder) *ir.Value{
		"sdpa_decode": func(b *ir.Builder) *ir.Value {
			return b.SDPADecode(in(b, "q", tt(ir.BF16, dram, 1, 8, 64)), in(b, "k", tt(ir.BF16, dram, 1, 4, 128, 64)),
				in(b, "v", tt(ir.BF16, dram, 1, 4, 128, 64)), in(b, "pos", posT), 0.125)
		},
		"sdpa_decode_batch": func(b *ir.Builder) *ir.Value {
			return b.SDPADecode(in(b, "q", tt(ir.BF16, dram, 2, 6, 64)), in(b, "k", tt(ir.BF16, dram, 2, 2, 64, 64)),
				in(b, "v", tt(ir.BF16, dram, 2, 2, 64, 64)), in(b, "pos", posT), 0.125)
		},
	}
	for _, name := range []string{"sdpa_decode", "sdpa_decode_batch"} {
		t.Run(name, func(t *testing.T) {
			_, op := graphOp(t, cases[name])
			args, _ := randomArgs(t, op, rand.New(rand.NewPCG(5, 6)))
			for i := range args[3] {
				args[3][i] = 37 // every position up to 37 visible: two tiles of scores
			}
			want := refEval(t, op, args)
			ctx := NewContext(target.Blackhole())
			p, err := Lower(op, ctx)
			if err != nil {
				t.Fatal(err)
			}
			run := func(p *kir.Program) []float32 {
				d := kexec.NewDevice(ctx.Target)
				for _, b := range p.Buffers {
					if _, err := d.Alloc(b); err != nil {
						t.Fatal(err)
					}
				}
				for i, v := range op.Operands {
					if err := upload(d, ctx.BufferName(v), v, args[i]); err != nil {
						t.Fatal(err)
					}
				}
				if _, err := d.Run(p, kexec.RunOptions{}); err != nil {
					t.Fatal(err)
				}
				got, err := download(d, ctx.BufferName(op.Result()), op.Result())
				if err != nil {
					t.Fatal(err)
				}
				return got
			}
			if pcc := numerics.PCC(want[0].Data, run(p)); pcc < 0.999 {
				t.Fatalf("emitted program: PCC %.6f", pcc)
			}
			removed := 0
			for _, k := range p.Kernels {
				var n int
				k.Body, n = stripUninit(k.Body)
				removed += n
			}
			if removed == 0 {
				t.Fatal("the emitted program has no reduce_uninit")
			}
			got := run(p)
			if pcc := numerics.PCC(want[0].Data, got); pcc > 0.99 {
				t.Errorf("without reduce_uninit the program still matches (PCC %.6f): the sim does not model the packer edge mask", pcc)
			}
		})
	}
}

// TestBankCountFromTarget: interleaved addressing uses the device's bank
// count (NUM_DRAM_BANKS), so the same lowerings run correctly on a p100a's
// 7 banks; kernels print no bank count.
func TestBankCountFromTarget(t *testing.T) {
	p100 := *target.Blackhole()
	p100.DRAMBanks = 7
	for ci, tc := range opCases[:min(len(opCases), 12)] {
		t.Run(tc.name, func(t *testing.T) {
			_, op := graphOp(t, tc.build)
			args, want := randomArgs(t, op, rand.New(rand.NewPCG(uint64(ci)+1, 7)))
			got, p := runOnSim(t, &p100, op, args)
			compare(t, op, want[0].Data, got)
			for _, k := range p.Kernels {
				src, err := cpp.PrintKernel(p, k)
				if err != nil {
					t.Fatal(err)
				}
				if strings.Contains(string(src), "% 8u") || strings.Contains(string(src), "/ 8u") {
					t.Errorf("kernel %s prints a literal bank count:\n%s", k.Name, src)
				}
			}
		})
	}
}
