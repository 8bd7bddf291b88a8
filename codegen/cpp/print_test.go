package cpp

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/ir/sfpu"
)

var oneCore = []ir.CoreRange{{X0: 0, Y0: 0, X1: 0, Y1: 0}}

// program wraps a body in a one-kernel program with runtime args a and b.
func program(role kir.Role, body ...kir.Stmt) (*kir.Program, *kir.Kernel) {
	p := kir.NewProgram("t")
	proc := kir.RISCV1
	if role == kir.RoleCompute {
		proc = kir.ComputeProc
	}
	k := p.AddKernel(&kir.Kernel{Name: "k", Role: role, Processor: proc, Cores: oneCore})
	k.RuntimeArg("a")
	k.RuntimeArg("b")
	k.Body = body
	return p, k
}

// bodyLines prints the kernel and returns the lines after the argument
// declarations, without indentation.
func bodyLines(t *testing.T, p *kir.Program, k *kir.Kernel) []string {
	t.Helper()
	src, err := PrintKernel(p, k)
	if err != nil {
		t.Fatal(err)
	}
	text := string(src)
	i := strings.Index(text, "void kernel_main() {\n")
	if i < 0 {
		t.Fatalf("no kernel_main in:\n%s", text)
	}
	var out []string
	for _, l := range strings.Split(text[i:], "\n")[1:] {
		l = strings.TrimSpace(l)
		if l == "" || l == "}" || strings.Contains(l, "get_arg_val<uint32_t>") {
			continue
		}
		out = append(out, l)
	}
	return out
}

var (
	a = kir.ArgRef{Name: "a"}
	b = kir.ArgRef{Name: "b"}
)

func TestExpressions(t *testing.T) {
	tests := []struct {
		name string
		e    kir.Expr
		want string
	}{
		{"constant", kir.C(7), "uint32_t v = 7;"},
		{"large constant", kir.C(0x80000000), "uint32_t v = 2147483648u;"},
		{"precedence kept", kir.Add(a, kir.Mul(b, kir.C(2))), "uint32_t v = a + b * 2u;"},
		{"sum times constant", kir.Mul(kir.Add(a, b), kir.C(2)), "uint32_t v = (a + b) * 2u;"},
		{"left-nested subtraction", kir.Sub(kir.Sub(a, b), kir.C(1)), "uint32_t v = a - b - 1u;"},
		{"right-nested subtraction", kir.Sub(a, kir.Sub(b, kir.C(1))), "uint32_t v = a - (b - 1u);"},
		{"right-nested addition", kir.Add(a, kir.Add(b, kir.C(1))), "uint32_t v = a + b + 1u;"},
		{"right-nested division", kir.Div(a, kir.Mul(b, kir.C(2))), "uint32_t v = a / (b * 2u);"},
		{"shift of a sum", kir.Shl(kir.Add(a, kir.C(1)), kir.C(2)), "uint32_t v = (a + 1u) << 2u;"},
		{"sum of a shift", kir.Add(kir.Shr(a, kir.C(1)), b), "uint32_t v = (a >> 1u) + b;"},
		{"and of an or", kir.And(a, kir.Or(b, kir.C(1))), "uint32_t v = a & (b | 1u);"},
		{"comparison of a sum", kir.Lt(kir.Add(a, kir.C(1)), b), "uint32_t v = a + 1u < b;"},
		{"logical and", kir.LAnd(kir.Lt(a, b), kir.Ne(a, kir.C(0))), "uint32_t v = a < b && a != 0u;"},
		{"equality of comparisons", kir.Eq(kir.Lt(a, b), kir.C(1)), "uint32_t v = (a < b) == 1u;"},
		{"tile size in arithmetic", kir.Mul(kir.GetTileSize{CB: 3}, kir.C(2)), "uint32_t v = uint32_t(get_tile_size(3)) * 2u;"},
		{"tile size alone", kir.GetTileSize{CB: 3}, "uint32_t v = get_tile_size(3);"},
		{"write pointer", kir.Add(kir.GetWritePtr{CB: 16}, a), "uint32_t v = get_write_ptr(16) + a;"},
		{"semaphore", kir.GetSemaphore{ID: kir.C(2)}, "uint32_t v = get_semaphore(2);"},
		{"noc address", kir.NoCAddr{X: a, Y: b, Addr: kir.C(64)}, "uint64_t v = get_noc_addr(a, b, 64);"},
		{"dram bank address", kir.InterleavedPageAddr(a, b, 2048),
			"uint64_t v = get_noc_addr_from_bank_id<true>(b % NUM_DRAM_BANKS, a + b / NUM_DRAM_BANKS * 2048u);"},
		{"multicast address", kir.MulticastAddr{X0: kir.C(1), Y0: kir.C(2), X1: kir.C(3), Y1: kir.C(4), Addr: a},
			"uint64_t v = get_noc_multicast_addr(1, 2, 3, 4, a);"},
		{"noc address plus offset", kir.Add(kir.NoCAddr{X: a, Y: b, Addr: kir.C(0)}, kir.C(16)),
			"uint64_t v = get_noc_addr(a, b, 0) + 16u;"},
		{"l1 load", kir.L1Read32{Addr: a}, "uint32_t v = *reinterpret_cast<volatile tt_l1_ptr uint32_t*>(a);"},
		{"l1 load plus one", kir.Add(kir.L1Read32{Addr: a}, kir.C(1)),
			"uint32_t v = *reinterpret_cast<volatile tt_l1_ptr uint32_t*>(a) + 1u;"},
		{"my x", kir.MyNoCX{}, "uint32_t v = my_x[noc_index];"},
		{"my y minus one", kir.Sub(kir.MyNoCY{}, kir.C(1)), "uint32_t v = uint32_t(my_y[noc_index]) - 1u;"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, k := program(kir.RoleReader, kir.Let{Var: kir.Var{Name: "v", Type: kir.TypeOf(tc.e)}, Value: tc.e})
			got := bodyLines(t, p, k)
			if len(got) != 1 || got[0] != tc.want {
				t.Errorf("got %q, want [%q]", got, tc.want)
			}
		})
	}
}

func TestStatements(t *testing.T) {
	i := kir.Var{Name: "i", Type: kir.U32T}
	v := kir.Var{Name: "v", Type: kir.U32T}
	dm := []struct {
		name string
		body []kir.Stmt
		want []string
	}{
		{"loop", []kir.Stmt{kir.For{Var: i, Start: kir.C(0), End: a, Body: []kir.Stmt{kir.CBReserveBack{CB: 1, N: kir.C(2)}}}},
			[]string{"for (uint32_t i = 0; i < a; ++i) {", "cb_reserve_back(1, 2);"}},
		{"stepped loop", []kir.Stmt{kir.For{Var: i, Start: b, End: a, Step: kir.C(4)}},
			[]string{"for (uint32_t i = b; i < a; i += 4) {"}},
		{"if else", []kir.Stmt{kir.If{Cond: kir.Eq(a, kir.C(0)), Then: []kir.Stmt{kir.NoCAsyncReadBarrier{}},
			Else: []kir.Stmt{kir.NoCAsyncWriteBarrier{}}}},
			[]string{"if (a == 0u) {", "noc_async_read_barrier();", "} else {", "noc_async_write_barrier();"}},
		{"let and assign", []kir.Stmt{kir.Let{Var: v, Value: a}, kir.Assign{Var: v, Value: kir.Add(v, b)}},
			[]string{"uint32_t v = a;", "v = v + b;"}},
		{"comment", []kir.Stmt{kir.Comment{Text: "two\nlines"}}, []string{"// two", "// lines"}},
		{"read", []kir.Stmt{kir.NoCAsyncRead{Src: kir.NoCAddr{X: a, Y: b, Addr: kir.C(0)}, Dst: kir.GetWritePtr{CB: 0}, Size: kir.C(2048)}},
			[]string{"noc_async_read(get_noc_addr(a, b, 0), get_write_ptr(0), 2048);"}},
		{"multicast write", []kir.Stmt{kir.NoCAsyncWriteMulticast{Src: a, Dst: kir.MulticastAddr{X0: kir.C(1), Y0: kir.C(1), X1: kir.C(2), Y1: kir.C(1), Addr: a}, Size: kir.C(64), NumDests: kir.C(2)}},
			[]string{"noc_async_write_multicast(a, get_noc_multicast_addr(1, 1, 2, 1, a), 64, 2);"}},
		{"semaphore wait", []kir.Stmt{kir.NoCSemaphoreWait{Addr: kir.GetSemaphore{ID: kir.C(0)}, Value: kir.C(1)}},
			[]string{"noc_semaphore_wait(reinterpret_cast<volatile tt_l1_ptr uint32_t*>(get_semaphore(0)), 1);"}},
		{"semaphore set multicast", []kir.Stmt{kir.NoCSemaphoreSetMulticast{Src: a, Dst: kir.MulticastAddr{X0: kir.C(1), Y0: kir.C(1), X1: kir.C(2), Y1: kir.C(1), Addr: a}, NumDests: kir.C(2)}},
			[]string{"noc_semaphore_set_multicast(a, get_noc_multicast_addr(1, 1, 2, 1, a), 2);"}},
		{"semaphore inc", []kir.Stmt{kir.NoCSemaphoreInc{Addr: kir.NoCAddr{X: a, Y: b, Addr: kir.GetSemaphore{ID: kir.C(1)}}, Incr: kir.C(1)}},
			[]string{"noc_semaphore_inc(get_noc_addr(a, b, get_semaphore(1)), 1);"}},
		{"l1 store", []kir.Stmt{kir.L1Write32{Addr: a, Value: b}},
			[]string{"*reinterpret_cast<volatile tt_l1_ptr uint32_t*>(a) = b;"}},
	}
	for _, tc := range dm {
		t.Run(tc.name, func(t *testing.T) {
			p, k := program(kir.RoleReader, tc.body...)
			got := bodyLines(t, p, k)
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
	// want is the line with tt-metal's SFPU calls (sfpu.CodeLLK); tcc, when
	// set, the line with tcc's own SFPU code (sfpu.CodeTCC, the default).
	compute := []struct {
		name string
		s    kir.Stmt
		want string
		tcc  string
	}{
		{"startup", kir.ComputeKernelHWStartup{ICB0: 0, ICB1: 1, OCB: 16}, "compute_kernel_hw_startup(0, 1, 16);", ""},
		{"matmul startup", kir.ComputeKernelHWStartup{ICB0: 0, ICB1: 1, OCB: 16, SrcReverse: true},
			"compute_kernel_hw_startup(1, 0, 16);  // matmul order: in1 feeds source A", ""},
		{"matmul init transposed", kir.MatmulInit{In0: 0, In1: 1, Transpose: true}, "mm_init_short(0, 1, true);", ""},
		{"matmul tiles", kir.MatmulTiles{In0: 0, In1: 1, Tile0: kir.C(2), Tile1: kir.C(3), Dst: kir.C(1)}, "matmul_tiles(0, 1, 2, 3, 1);", ""},
		{"matmul block", kir.MatmulBlock{In0: 0, In1: 1, Tile0: kir.C(0), Tile1: kir.C(0), Dst: kir.C(0), CtDim: kir.C(2), RtDim: kir.C(2), KtDim: kir.C(4)},
			"matmul_block(0, 1, 0, 0, 0, false, 2, 2, 4);", ""},
		{"reduce", kir.ReduceTile{Op: kir.ReduceMax, Dim: kir.ReduceCol, ICB: 0, ScalerCB: 2, Tile: kir.C(0), ScalerTile: kir.C(0), Dst: kir.C(1)},
			"reduce_tile<PoolType::MAX, ReduceDim::REDUCE_COL>(0, 2, 0, 0, 1);", ""},
		{"reduce init", kir.ReduceInit{Op: kir.ReduceSum, Dim: kir.ReduceScalar, ICB: 0, ScalerCB: 2, OCB: 16},
			"reduce_init<PoolType::SUM, ReduceDim::REDUCE_SCALAR>(0, 2, 16);", ""},
		{"broadcast", kir.BcastTiles{Op: kir.EltMul, Dim: kir.BcastCols, ICB0: 0, ICB1: 1, Tile0: kir.C(0), Tile1: kir.C(0), Dst: kir.C(0)},
			"mul_tiles_bcast_cols(0, 1, 0, 0, 0);", ""},
		{"pack", kir.PackTile{Dst: kir.C(1), CB: 16}, "pack_tile(1, 16);", ""},
		{"pack at", kir.PackTile{Dst: kir.C(1), CB: 16, OutTile: kir.C(3)}, "pack_tile<true>(1, 16, 3);", ""},
		{"exp (accurate, not exp.h's fast default)", kir.SFPU{Op: kir.SFPUExp, Dst: kir.C(0)}, "exp_tile<false, false>(0);", "tcc_exp_tile(0);"},
		{"recip init", kir.SFPUInit{Op: kir.SFPURecip}, "recip_tile_init();", "tcc_recip_tile_init();"},
		{"mul scalar", kir.SFPU{Op: kir.SFPUMulScalar, Dst: kir.C(2), Param: math.Float32bits(-2)},
			"mul_unary_tile(2, 0xc0000000u);  // scalar -2", "tcc_mul_scalar_tile(2, 0xc0000000u);  // scalar -2"},
		{"softplus", kir.SFPU{Op: kir.SFPUSoftplus, Dst: kir.C(0)},
			"softplus_tile(0, 0x3f800000u, 0x3f800000u, 0x41a00000u);  // beta 1, beta_reciprocal 1, threshold 20", "tcc_softplus_tile(0);"},
		{"add binary", kir.SFPU{Op: kir.SFPUAddBinary, Dst: kir.C(0), Src: kir.C(1)}, "add_binary_tile(0, 1, 0);", "tcc_add_binary_tile(0, 1, 0);"},
		{"reconfig", kir.ReconfigDataFormat{SrcA: 0, SrcB: 1}, "reconfig_data_format(0, 1);", ""},
		{"cb wait", kir.CBWaitFront{CB: 0, N: kir.C(4)}, "cb_wait_front(0, 4);", ""},
	}
	for _, tc := range compute {
		t.Run(tc.name, func(t *testing.T) {
			p, k := program(kir.RoleCompute, tc.s)
			k.Compute.SFPU = sfpu.CodeLLK
			got := bodyLines(t, p, k)
			if len(got) != 1 || got[0] != tc.want {
				t.Errorf("llk: got %q, want [%q]", got, tc.want)
			}
			want := tc.tcc
			if want == "" {
				want = tc.want // not an SFPU statement: the same line
			}
			k.Compute.SFPU = sfpu.CodeTCC
			got = bodyLines(t, p, k)
			if len(got) != 1 || got[0] != want {
				t.Errorf("tcc: got %q, want [%q]", got, want)
			}
		})
	}
}

// TestReadTileValue: read_tile_value prints as the compute API call,
// converted to nothing (it returns uint32_t), and pulls in cb_api.h.
func TestReadTileValue(t *testing.T) {
	v := kir.Var{Name: "v", Type: kir.U32T}
	p, k := program(kir.RoleCompute, kir.Let{Var: v, Value: kir.Add(kir.ReadTileValue{CB: 3, Tile: a, Offset: kir.C(1)}, kir.C(31))})
	if got, want := bodyLines(t, p, k), []string{"uint32_t v = read_tile_value(3, a, 1) + 31u;"}; !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	src, err := PrintKernel(p, k)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(src), `#include "compute_kernel_api/cb_api.h"`) {
		t.Errorf("no cb_api.h include in:\n%s", src)
	}
}

func TestIncludes(t *testing.T) {
	p, k := program(kir.RoleCompute,
		kir.ComputeKernelHWStartup{ICB0: 0, ICB1: 0, OCB: 16},
		kir.SFPUInit{Op: kir.SFPUExp},
		kir.SFPU{Op: kir.SFPUSiLU, Dst: kir.C(0)},
	)
	includes := func(code sfpu.Code) []string {
		k.Compute.SFPU = code
		src, err := PrintKernel(p, k)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, l := range strings.Split(string(src), "\n") {
			if strings.HasPrefix(l, "#include") {
				got = append(got, l)
			}
		}
		return got
	}
	want := []string{
		"#include <cstdint>",
		`#include "compute_kernel_api.h"`,
		`#include "compute_kernel_api/common.h"`,
		`#include "compute_kernel_api/compute_kernel_hw_startup.h"`,
		`#include "compute_kernel_api/eltwise_unary/exp.h"`,
	}
	if got := includes(sfpu.CodeLLK); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("includes (llk):\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// tcc's own SFPU code: its header instead of tt-metal's SFPU headers.
	want = []string{
		"#include <cstdint>",
		`#include "compute_kernel_api/common.h"`,
		`#include "compute_kernel_api/compute_kernel_hw_startup.h"`,
		`#include "tcc_sfpu.h"`,
	}
	if got := includes(sfpu.CodeTCC); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("includes (tcc):\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	var src []byte
	var err error

	// A data-movement kernel includes only the dataflow API.
	p, k = program(kir.RoleReader, kir.NoCAsyncReadBarrier{})
	src, err = PrintKernel(p, k)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(src), "#include"); n != 2 || !strings.Contains(string(src), `#include "api/dataflow/dataflow_api.h"`) {
		t.Errorf("data-movement includes (%d):\n%s", n, src)
	}
}

func TestArgumentTable(t *testing.T) {
	p := kir.NewProgram("args")
	k := p.AddKernel(&kir.Kernel{Name: "w", Role: kir.RoleWriter, Processor: kir.RISCV0, Cores: oneCore})
	// Declared interleaved by kind: the printer groups by kind, then index.
	k.RuntimeArg("dst")
	k.CompileArg("pages", 8)
	k.CommonArg("base", kir.BufferAddr("buf", 64))
	k.RuntimeArg("count")
	k.CompileArg("page_bytes", 2048)
	src, err := PrintKernel(p, k)
	if err != nil {
		t.Fatal(err)
	}
	want := `void kernel_main() {
    constexpr uint32_t pages = get_compile_time_arg_val(0);  // compile-time arg 0 = 8
    constexpr uint32_t page_bytes = get_compile_time_arg_val(1);  // compile-time arg 1 = 2048
    const uint32_t dst = get_arg_val<uint32_t>(0);  // runtime arg 0 (per core)
    const uint32_t count = get_arg_val<uint32_t>(1);  // runtime arg 1 (per core)
    const uint32_t base = get_common_arg_val<uint32_t>(0);  // common runtime arg 0 (set at launch)
}
`
	if got := string(src); !strings.HasSuffix(got, want) {
		t.Errorf("got:\n%s\nwant suffix:\n%s", got, want)
	}
}

func TestPrintErrors(t *testing.T) {
	v := kir.Var{Name: "v", Type: kir.U32T}
	tests := []struct {
		name  string
		build func() (*kir.Program, *kir.Kernel)
		want  string
	}{
		{"unknown argument", func() (*kir.Program, *kir.Kernel) {
			return program(kir.RoleReader, kir.Let{Var: v, Value: kir.ArgRef{Name: "nope"}})
		}, `argument "nope" is not in the kernel's argument table`},
		{"nil operand", func() (*kir.Program, *kir.Kernel) {
			return program(kir.RoleReader, kir.CBPushBack{CB: 0})
		}, "cb_push_back: missing operand"},
		{"nil statement", func() (*kir.Program, *kir.Kernel) { return program(kir.RoleReader, nil) }, "nil statement"},
		{"keyword argument", func() (*kir.Program, *kir.Kernel) {
			p, k := program(kir.RoleReader)
			k.RuntimeArg("int")
			return p, k
		}, `runtime argument name "int" is reserved`},
		{"API name as variable", func() (*kir.Program, *kir.Kernel) {
			return program(kir.RoleReader, kir.Let{Var: kir.Var{Name: "get_write_ptr"}, Value: kir.C(0)})
		}, `variable name "get_write_ptr" is reserved`},
		{"not an identifier", func() (*kir.Program, *kir.Kernel) {
			return program(kir.RoleReader, kir.Let{Var: kir.Var{Name: "x-y"}, Value: kir.C(0)})
		}, `variable name "x-y" is not a C++ identifier`},
		{"variable shadows argument", func() (*kir.Program, *kir.Kernel) {
			return program(kir.RoleReader, kir.Let{Var: kir.Var{Name: "a"}, Value: kir.C(0)})
		}, `variable name "a" is declared twice`},
		{"assignment before declaration", func() (*kir.Program, *kir.Kernel) {
			return program(kir.RoleReader, kir.Assign{Var: v, Value: kir.C(0)})
		}, `assignment to undeclared variable "v"`},
		{"compute call in a reader", func() (*kir.Program, *kir.Kernel) {
			return program(kir.RoleReader, kir.TileRegsAcquire{})
		}, "tile_regs_acquire: a compute call in a reader kernel"},
		{"data-movement call in compute", func() (*kir.Program, *kir.Kernel) {
			return program(kir.RoleCompute, kir.NoCAsyncReadBarrier{})
		}, "noc_async_read_barrier: a data-movement call in a compute kernel"},
		{"data-movement expression in compute", func() (*kir.Program, *kir.Kernel) {
			return program(kir.RoleCompute, kir.Let{Var: v, Value: kir.GetWritePtr{CB: 0}})
		}, "get_write_ptr is a data-movement call in a compute kernel"},
		{"compute expression in a reader", func() (*kir.Program, *kir.Kernel) {
			return program(kir.RoleReader, kir.Let{Var: v, Value: kir.ReadTileValue{CB: 0, Tile: kir.C(0), Offset: kir.C(0)}})
		}, "read_tile_value is a compute call in a data-movement kernel"},
		{"unknown reduce op", func() (*kir.Program, *kir.Kernel) {
			return program(kir.RoleCompute, kir.ReduceUninit{}, kir.ReduceInit{Op: 9})
		}, "unknown reduce op 9"},
		{"kernel of another program", func() (*kir.Program, *kir.Kernel) {
			_, k := program(kir.RoleReader)
			return kir.NewProgram("other"), k
		}, `kernel "k" is not a kernel of program "other"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, k := tc.build()
			src, err := PrintKernel(p, k)
			if err == nil {
				t.Fatalf("no error; printed:\n%s", src)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
			if src != nil {
				t.Errorf("an error returned text too")
			}
		})
	}
}
