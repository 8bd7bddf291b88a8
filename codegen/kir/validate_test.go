package kir_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/kir/kirtest"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
)

var bh = target.Blackhole()

func twoCores() []kir.Core { return []kir.Core{{X: 0, Y: 0}, {X: 1, Y: 0}} }

func addProgram() *kir.Program { return kirtest.EltwiseBinary(kir.EltAdd, ir.BF16, 4, twoCores()) }

func TestValidPrograms(t *testing.T) {
	tests := []struct {
		name string
		p    *kir.Program
	}{
		{"eltwise add bf16", addProgram()},
		{"eltwise mul bfp8 on 110 cores", kirtest.EltwiseBinary(kir.EltMul, ir.BFP8B, 1, kir.CoresOf([]ir.CoreRange{{X0: 0, Y0: 0, X1: 10, Y1: 9}}))},
		{"matmul", kirtest.Matmul(2, 3, 2, ir.BF16, ir.HiFi4)},
		{"full-sync DEST index 15", func() *kir.Program {
			p := addProgram()
			k := p.Kernel("compute")
			k.Compute.DstFullSyncEn = true
			replaceDst(k, kir.C(15))
			return p
		}()},
		{"multi-page blocks dividing the ring", func() *kir.Program {
			p := addProgram()
			setPages(p, kirtest.CBOut, 4)
			k := p.Kernel("writer")
			k.Body = nil
			b := k.Builder()
			b.For("i", kir.C(0), kir.C(2), func(kir.Var) {
				b.CBWaitFront(kirtest.CBOut, kir.C(2))
				b.CBPopFront(kirtest.CBOut, kir.C(2))
			})
			return p
		}()},
		{"read_tile_value of a waited CB in compute", func() *kir.Program {
			p := addProgram()
			mapStmts(p.Kernel("compute"), func(s kir.Stmt) kir.Stmt {
				if bt, ok := s.(kir.BinaryTiles); ok {
					bt.Tile0 = kir.Mul(kir.ReadTileValue{CB: kirtest.CBIn1, Tile: kir.C(0), Offset: kir.C(0)}, kir.C(0))
					return bt
				}
				return s
			})
			return p
		}()},
		{"single-page pushes need not divide the ring", func() *kir.Program {
			p := addProgram()
			setPages(p, kirtest.CBIn0, 3)
			return p
		}()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := kir.Validate(tc.p, bh); err != nil {
				t.Fatalf("Validate: %v", err)
			}
		})
	}
}

func setPages(p *kir.Program, idx, pages int) {
	for i := range p.CBs {
		if p.CBs[i].Index == idx {
			p.CBs[i].Pages = pages
		}
	}
}

// replaceDst makes every DEST index of the compute kernel d.
func replaceDst(k *kir.Kernel, d kir.Expr) {
	var walk func([]kir.Stmt)
	walk = func(body []kir.Stmt) {
		for i, s := range body {
			switch s := s.(type) {
			case kir.For:
				walk(s.Body)
			case kir.BinaryTiles:
				s.Dst = d
				body[i] = s
			case kir.PackTile:
				s.Dst = d
				body[i] = s
			}
		}
	}
	walk(k.Body)
}

// mapStmts replaces every statement s of k's body (recursively) by f(s).
func mapStmts(k *kir.Kernel, f func(kir.Stmt) kir.Stmt) {
	var walk func([]kir.Stmt)
	walk = func(body []kir.Stmt) {
		for i, s := range body {
			if fs, ok := s.(kir.For); ok {
				walk(fs.Body)
				continue
			}
			body[i] = f(s)
		}
	}
	walk(k.Body)
}

func TestValidateRules(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(p *kir.Program)
		want   kir.Rule
		msg    string // substring of the error
	}{
		{"CB index 32", func(p *kir.Program) {
			p.AddCB(kir.CB{Index: 32, PageSize: 2048, Pages: 2, Format: ir.BF16, Cores: p.CBs[0].Cores})
		}, kir.RuleCBCount, "CB index 32 is outside 0..31"},
		{"CB configured twice on a core", func(p *kir.Program) {
			p.AddCB(p.CBs[0])
		}, kir.RuleCBCount, "configured more than once"},
		{"kernel uses unconfigured CB", func(p *kir.Program) {
			p.Kernel("compute").Builder().PackTile(kir.C(0), 17)
		}, kir.RuleCBCount, "uses CB c_17, which is not configured"},
		{"two producers", func(p *kir.Program) {
			p.Kernel("writer").Builder().CBPushBack(kirtest.CBIn0, kir.C(1))
		}, kir.RuleCBProducer, "CB c_0 has 2 producer kernels (reader, writer)"},
		{"no producer", func(p *kir.Program) {
			p.AddCB(kir.CB{Index: 5, PageSize: 2048, Pages: 2, Format: ir.BF16, Cores: p.CBs[0].Cores})
			p.Kernel("compute").Builder().CBWaitFront(5, kir.C(1))
		}, kir.RuleCBProducer, "CB c_5 has no producer kernel"},
		{"two consumers", func(p *kir.Program) {
			p.Kernel("reader").Builder().CBWaitFront(kirtest.CBOut, kir.C(1))
		}, kir.RuleCBConsumer, "CB c_16 has 2 consumer kernels (reader, writer)"},
		{"two-input op on one CB", func(p *kir.Program) {
			mapStmts(p.Kernel("compute"), func(s kir.Stmt) kir.Stmt {
				if bt, ok := s.(kir.BinaryTiles); ok {
					bt.ICB1 = bt.ICB0
					return bt
				}
				return s
			})
		}, kir.RuleCBOperands, "add_tiles reads both operands from CB c_0"},
		{"read_tile_value in a reader", func(p *kir.Program) {
			p.Kernel("reader").Builder().Let("v", kir.ReadTileValue{CB: kirtest.CBIn0, Tile: kir.C(0), Offset: kir.C(0)})
		}, kir.RuleMalformed, "calls read_tile_value, a compute call, in a reader kernel"},
		{"read_tile_value before the wait", func(p *kir.Program) {
			k := p.Kernel("compute")
			k.Body = append([]kir.Stmt{kir.Let{Var: kir.Var{Name: "v"}, Value: kir.ReadTileValue{CB: kirtest.CBIn1, Tile: kir.C(0), Offset: kir.C(0)}}}, k.Body...)
		}, kir.RuleCBFlow, "read_tile_value(c_1, ...) in declaration before any cb_wait_front(c_1)"},
		{"wait exceeds pages", func(p *kir.Program) {
			mapStmts(p.Kernel("compute"), func(s kir.Stmt) kir.Stmt {
				if w, ok := s.(kir.CBWaitFront); ok && w.CB == kirtest.CBIn1 {
					w.N = kir.C(3)
					return w
				}
				return s
			})
		}, kir.RuleCBFlow, "cb_wait_front(c_1, 3): the count must be between 1 and the CB's 2 pages"},
		{"block straddles the ring", func(p *kir.Program) {
			setPages(p, kirtest.CBOut, 3)
			k := p.Kernel("writer")
			k.Body = nil
			b := k.Builder()
			b.For("i", kir.C(0), kir.C(2), func(kir.Var) {
				b.CBWaitFront(kirtest.CBOut, kir.C(2))
				b.CBPopFront(kirtest.CBOut, kir.C(2))
			})
		}, kir.RuleCBFlow, "pops 2 pages per iteration, which does not divide the CB's 3 pages"},
		{"L1 budget", func(p *kir.Program) {
			setPages(p, kirtest.CBIn0, 700) // 700 * 2048 = 1,433,600 plus the other CBs > 1,572,864 - 111,104 (DEFAULT_UNRESERVED)
			setPages(p, kirtest.CBIn1, 20)
		}, kir.RuleL1Budget, "the L1 budget is 1461760 bytes"},
		{"L1 buffer counts against the budget", func(p *kir.Program) {
			p.AddBuffer(kir.Buffer{Name: "big", Mem: ir.MemoryConfig{Kind: ir.L1HeightSharded, Shard: &ir.ShardSpec{Grid: ir.CoreRange{X0: 0, Y0: 0, X1: 1, Y1: 0}, Shape: [2]int{32, 32}}},
				DType: ir.BF16, Layout: ir.TileLayout, PageSize: 2048, Pages: 1440})
		}, kir.RuleL1Budget, "buffer big 1474560"},
		{"DEST index 8 in half-sync bf16", func(p *kir.Program) {
			replaceDst(p.Kernel("compute"), kir.C(8))
		}, kir.RuleDEST, "add_tiles addresses DEST tile 8; DEST holds 8 tiles in half-sync mode with 16-bit DEST"},
		{"DEST index 4 with fp32 DEST", func(p *kir.Program) {
			k := p.Kernel("compute")
			k.Compute.FP32DestAccEn = true
			replaceDst(k, kir.Add(kir.C(2), kir.C(2)))
		}, kir.RuleDEST, "DEST holds 4 tiles in half-sync mode with fp32 DEST"},
		{"matmul block beyond DEST", func(p *kir.Program) {
			p.Kernel("compute").Builder().MatmulBlock(0, 1, kir.C(0), kir.C(0), kir.C(3), false, kir.C(3), kir.C(2), kir.C(1))
		}, kir.RuleDEST, "addresses DEST tiles 3..8"},
		{"misaligned DRAM read", func(p *kir.Program) {
			mapStmts(p.Kernel("reader"), func(s kir.Stmt) kir.Stmt {
				if r, ok := s.(kir.NoCAsyncRead); ok {
					r.Src = kir.Add(r.Src, kir.C(32))
					return r
				}
				return s
			})
		}, kir.RuleDRAMAlign, "reads DRAM at an offset ≡ 32 (mod 64)"},
		{"misaligned DRAM write", func(p *kir.Program) {
			mapStmts(p.Kernel("writer"), func(s kir.Stmt) kir.Stmt {
				if w, ok := s.(kir.NoCAsyncWrite); ok {
					d := w.Dst.(kir.DRAMBankAddr)
					d.Offset = kir.Add(d.Offset, kir.C(8))
					w.Dst = d
					return w
				}
				return s
			})
		}, kir.RuleDRAMAlign, "DRAM writes must be 16-byte aligned"},
		{"NoC packet too large", func(p *kir.Program) {
			p.Kernel("reader").Args[4].Value = kir.U32(32768) // tile_bytes
		}, kir.RuleNoCPacket, "transfers 32768 bytes; a NoC packet is at most 16384 bytes"},
		{"too many runtime args", func(p *kir.Program) {
			k := p.Kernel("writer")
			for i := 0; i < 339; i++ {
				k.RuntimeArg(fmt.Sprintf("pad%d", i))
			}
			for _, c := range twoCores() {
				vals := make([]kir.ArgValue, 342)
				k.SetRuntimeArgs(c, vals...)
			}
		}, kir.RuleRuntimeArgs, "342 runtime args (342 unique + 0 common) exceed the limit of 341"},
		{"kernel outside the grid", func(p *kir.Program) {
			p.Kernel("writer").Cores = []ir.CoreRange{{X0: 0, Y0: 0, X1: 11, Y1: 0}}
		}, kir.RuleGrid, "outside the 11x10 worker grid"},
		{"two kernels on one RISC-V", func(p *kir.Program) {
			p.Kernel("writer").Processor = kir.RISCV1
		}, kir.RuleProcessor, `kernels "reader" and "writer" both run on RISCV_1`},
		{"compute kernel on BRISC", func(p *kir.Program) {
			p.Kernel("compute").Processor = kir.RISCV0
		}, kir.RuleProcessor, "compute kernel must run on the compute processor"},
		{"missing runtime values", func(p *kir.Program) {
			k := p.Kernel("reader")
			k.SetRuntimeArgs(kir.Core{X: 1, Y: 0}, kir.U32(0))
		}, kir.RuleArgTable, "has 1 runtime arg values; the table declares 4"},
		{"non-constant compile-time arg", func(p *kir.Program) {
			p.Kernel("reader").Args[4].Value = kir.BufferAddr("a", 0)
		}, kir.RuleArgTable, "compile-time values must be constants"},
		{"undeclared buffer", func(p *kir.Program) {
			p.Kernel("writer").SetRuntimeArgs(kir.Core{}, kir.BufferAddr("nope", 0), kir.U32(0), kir.U32(1))
		}, kir.RuleArgTable, `undeclared buffer "nope"`},
		{"semaphore id 16", func(p *kir.Program) {
			p.AddSemaphore(kir.Semaphore{ID: 16, Cores: p.CBs[0].Cores})
		}, kir.RuleSemaphore, "semaphore id 16 is outside 0..15"},
		{"variable out of scope", func(p *kir.Program) {
			p.Kernel("writer").Builder().CBPopFront(kirtest.CBOut, kir.Var{Name: "i"})
		}, kir.RuleMalformed, `uses variable "i" outside its scope`},
		{"compute call in reader", func(p *kir.Program) {
			p.Kernel("reader").Builder().TileRegsAcquire()
		}, kir.RuleMalformed, "tile_regs_acquire is a compute call in a reader kernel"},
		{"NoC call in compute", func(p *kir.Program) {
			p.Kernel("compute").Builder().NoCAsyncReadBarrier()
		}, kir.RuleMalformed, "data-movement call in a compute kernel"},
		{"compute CB page is not a tile", func(p *kir.Program) {
			for i := range p.CBs {
				if p.CBs[i].Index == kirtest.CBIn1 {
					p.CBs[i].PageSize = 1024
				}
			}
		}, kir.RuleCBConfig, "page size 1024 is not one bf16 tile (2048 bytes)"},
		{"reduce without REDUCE_OP / REDUCE_DIM defines", func(p *kir.Program) {
			b := p.Kernel("compute").Builder()
			b.ReduceInit(kir.ReduceSum, kir.ReduceRow, kirtest.CBIn0, kirtest.CBIn1, kirtest.CBOut)
		}, kir.RuleDefines, "does not define REDUCE_OP"},
		{"unpack to DEST from a bf16 CB", func(p *kir.Program) {
			k := p.Kernel("compute")
			k.Compute.FP32DestAccEn = true
			k.Compute.UnpackToDestFP32 = []int{kirtest.CBIn0}
		}, kir.RuleUnpackMode, "only Float32 CBs unpack to DEST"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := addProgram()
			tc.mutate(p)
			err := kir.Validate(p, bh)
			if err == nil {
				t.Fatalf("Validate passed; want a %s error", tc.want)
			}
			if !kir.HasRule(err, tc.want) {
				t.Fatalf("rules %v do not include %s; error:\n%v", kir.RulesOf(err), tc.want, err)
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error does not mention %q:\n%v", tc.msg, err)
			}
		})
	}
}

func TestRuleErrorNamesEverything(t *testing.T) {
	p := addProgram()
	p.Kernel("writer").Builder().CBPushBack(kirtest.CBIn0, kir.C(1))
	err := kir.Validate(p, bh)
	es, ok := err.(kir.Errors)
	if !ok {
		t.Fatalf("Validate returned %T, want kir.Errors", err)
	}
	var got []string
	for _, e := range es {
		got = append(got, e.Error())
	}
	want := []string{
		`program "eltwise_add", core (0,0), CB c_0: CB c_0 has 2 producer kernels (reader, writer); each CB needs exactly one [rule cb-producer]`,
		`program "eltwise_add", core (1,0), CB c_0: CB c_0 has 2 producer kernels (reader, writer); each CB needs exactly one [rule cb-producer]`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
}

func TestArgTableAndBuilder(t *testing.T) {
	p := addProgram()
	rd := p.Kernel("reader")
	type row struct {
		Name  string
		Kind  kir.ArgKind
		Index int
	}
	var got []row
	for _, a := range rd.Args {
		got = append(got, row{a.Name, a.Kind, a.Index})
	}
	want := []row{
		{"a_addr", kir.RuntimeArg, 0}, {"b_addr", kir.RuntimeArg, 1}, {"start_tile", kir.RuntimeArg, 2},
		{"num_tiles", kir.RuntimeArg, 3}, {"tile_bytes", kir.CompileTimeArg, 0},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("arg table (-want +got):\n%s", diff)
	}
	vals := rd.RuntimeValuesOn(kir.Core{X: 1, Y: 0})
	wantVals := []string{"addr(a)", "addr(b)", "4", "4"}
	var gotVals []string
	for _, v := range vals {
		gotVals = append(gotVals, v.String())
	}
	if diff := cmp.Diff(wantVals, gotVals); diff != "" {
		t.Errorf("runtime values of (1,0) (-want +got):\n%s", diff)
	}
	// Fresh names: the reader declares "l1" twice per iteration.
	var lets []string
	kir.Inspect(rd.Body, func(s kir.Stmt) bool {
		if l, ok := s.(kir.Let); ok {
			lets = append(lets, l.Var.Name)
		}
		return true
	})
	if diff := cmp.Diff([]string{"page", "l1", "l1_2"}, lets); diff != "" {
		t.Errorf("declared names (-want +got):\n%s", diff)
	}
	if err := rd.SetRuntimeArg(kir.Core{}, "no_such_arg", kir.U32(1)); err == nil {
		t.Error("SetRuntimeArg of an unknown arg succeeded")
	}
}

func TestAPINames(t *testing.T) {
	tests := []struct {
		s    kir.Stmt
		want string
	}{
		{kir.BinaryTiles{Op: kir.EltSub}, "sub_tiles"},
		{kir.BinaryInit{Op: kir.EltMul}, "mul_tiles_init"},
		{kir.BcastTiles{Op: kir.EltMul, Dim: kir.BcastCols}, "mul_tiles_bcast_cols"},
		{kir.BcastInit{Op: kir.EltAdd, Dim: kir.BcastRows}, "add_bcast_rows_init_short"},
		{kir.BcastInit{Op: kir.EltMul, Dim: kir.BcastScalar}, "mul_tiles_bcast_scalar_init_short"},
		{kir.BcastInit{Op: kir.EltSub, Dim: kir.BcastRows}, ""}, // not in the pinned release
		{kir.MatmulInit{}, "mm_init_short"},
		{kir.SFPU{Op: kir.SFPURsqrt}, "rsqrt_tile"},
		{kir.SFPUInit{Op: kir.SFPUSiLU}, "silu_tile_init"},
		{kir.CopyTileInit{}, "copy_tile_to_dst_init_short"}, {kir.TransposeInit{}, "transpose_wh_init_short"},
		{kir.ReduceTile{}, "reduce_tile"},
		{kir.Let{}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.want, func(t *testing.T) {
			if got := kir.APIName(tc.s); got != tc.want {
				t.Errorf("APIName(%T) = %q, want %q", tc.s, got, tc.want)
			}
		})
	}
	for _, op := range kir.SFPUOps {
		if kir.APIName(kir.SFPU{Op: op}) == "" || kir.APIName(kir.SFPUInit{Op: op}) == "" {
			t.Errorf("SFPU op %s has no API name", op)
		}
	}
}

// TestValidateMcastCorners: a multicast rectangle given as NoC-coordinate
// arguments must be in the order of the issuing kernel's NoC.
func TestValidateMcastCorners(t *testing.T) {
	lo, hi := kir.Core{X: 1, Y: 1}, kir.Core{X: 3, Y: 2}
	for _, tc := range []struct {
		name    string
		noc     int
		corners [4]kir.ArgValue
		common  bool
		ok      bool
	}{
		{"noc0, noc0 order", 0, kir.McastCorners(0, lo, hi), false, true},
		{"noc1, noc1 order", 1, kir.McastCorners(1, lo, hi), false, true},
		{"noc1, noc1 order, common args", 1, kir.McastCorners(1, lo, hi), true, true},
		{"unused slot of zeros", 1, [4]kir.ArgValue{kir.U32(0), kir.U32(0), kir.U32(0), kir.U32(0)}, false, true},
		{"noc1, noc0 order", 1, kir.McastCorners(0, lo, hi), false, false},
		{"noc1, noc0 order, common args", 1, kir.McastCorners(0, lo, hi), true, false},
		{"noc0, noc1 order", 0, kir.McastCorners(1, lo, hi), false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := kir.NewProgram("mcast")
			src := kir.Core{X: 0, Y: 0}
			proc := kir.RISCV0
			if tc.noc == 1 {
				proc = kir.RISCV1
			}
			k := p.AddKernel(&kir.Kernel{Name: "sender", Role: kir.RoleWriter, Processor: proc, NoC: tc.noc, Cores: []ir.CoreRange{src.Range()}})
			var refs [4]kir.ArgRef
			for i, n := range []string{"x0", "y0", "x1", "y1"} {
				if tc.common {
					refs[i] = k.CommonArg(n, tc.corners[i])
				} else {
					refs[i] = k.RuntimeArg(n)
				}
			}
			if !tc.common {
				k.SetRuntimeArgs(src, tc.corners[:]...)
			}
			b := k.Builder()
			b.NoCSemaphoreSetMulticast(kir.C(200000), kir.MulticastAddr{X0: refs[0], Y0: refs[1], X1: refs[2], Y1: refs[3], Addr: kir.C(200000)}, kir.C(6))
			err := kir.Validate(p, bh)
			if tc.ok {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), "[rule mcast-range]") || !strings.Contains(err.Error(), fmt.Sprintf("NoC %d", tc.noc)) {
				t.Fatalf("Validate = %v, want a mcast-range error naming NoC %d", err, tc.noc)
			}
		})
	}
}
