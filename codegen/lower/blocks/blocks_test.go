package blocks

import (
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/ir/numerics"
	"github.com/tcc-dev/tcc/sim/kexec"
)

func TestImageOf(t *testing.T) {
	tests := []struct {
		shape ir.Shape
		want  Image
	}{
		{ir.Shape{100}, Image{B: 1, R: 1, C: 100, Rt: 1, Ct: 4, Pages: 4, TilesPerMat: 4}},
		{ir.Shape{40, 70}, Image{B: 1, R: 40, C: 70, Rt: 2, Ct: 3, Pages: 6, TilesPerMat: 6}},
		{ir.Shape{2, 3, 1, 32}, Image{B: 6, R: 1, C: 32, Rt: 1, Ct: 1, Pages: 6, TilesPerMat: 1}},
	}
	for _, tc := range tests {
		got := ImageOf(tc.shape)
		got.Dims = nil
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("ImageOf(%s) (-want +got):\n%s", tc.shape, diff)
		}
		if n := ImageOf(tc.shape).Pages; n != tc.shape.Tiles() {
			t.Errorf("ImageOf(%s).Pages = %d, Shape.Tiles() = %d", tc.shape, n, tc.shape.Tiles())
		}
	}
}

func TestFaceOffsetConst(t *testing.T) {
	for r := 0; r < TileDim; r++ {
		for c := 0; c < TileDim; c++ {
			if got, want := FaceOffsetConst(r, c, 2), 2*numerics.FaceIndex(r, c); got != want {
				t.Fatalf("FaceOffsetConst(%d, %d, 2) = %d, want %d", r, c, got, want)
			}
		}
	}
}

func TestSegFor(t *testing.T) {
	tests := []struct {
		in   []int
		want int
	}{
		{[]int{640, 128}, 16},
		{[]int{16, 8}, 8},
		{[]int{12}, 4},
		{[]int{1, 32}, 1},
		{nil, 16},
	}
	for _, tc := range tests {
		if got := SegFor(tc.in...); got != tc.want {
			t.Errorf("SegFor(%v) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

func TestCBPlan(t *testing.T) {
	tgt := target.Blackhole()
	p := kir.NewProgram("plan")
	rs := []ir.CoreRange{{}}
	pl := NewCBPlan(p, tgt, rs)
	got := []int{
		pl.Input("a", ir.BF16, 2), pl.Input("b", ir.FP32, 2), pl.Output("out", ir.BF16, 2),
		pl.Scratch("s", ir.FP32, 1), pl.Pages(InputCB, "ids", ir.UInt32, 4, 1),
	}
	if diff := cmp.Diff([]int{0, 1, 16, 24, 2}, got); diff != "" {
		t.Errorf("indices (-want +got):\n%s", diff)
	}
	if f := cbFormat(p, 1); f != ir.FP32 {
		t.Errorf("format of c_1 = %s, want fp32", f)
	}
	// Eight scratch CBs fill c_24..c_31; the ninth spills to the lowest free index.
	for i := 0; i < 7; i++ {
		pl.Scratch("s", ir.BF16, 1)
	}
	if got := pl.Scratch("spill", ir.BF16, 1); got != 3 {
		t.Errorf("spilled scratch CB got index %d, want 3", got)
	}
	if err := pl.Err("test"); err != nil {
		t.Errorf("Err = %v", err)
	}
	for i := 0; i < 32; i++ {
		pl.Scratch("more", ir.BF16, 1)
	}
	if err := pl.Err("test"); err == nil || !strings.Contains(err.Error(), "rule cb-count") {
		t.Errorf("Err after 32+ CBs = %v, want rule cb-count", err)
	}
	big := NewCBPlan(kir.NewProgram("big"), tgt, rs)
	big.Input("huge", ir.FP32, tgt.L1Budget()/ir.FP32.TileBytes()+1)
	if err := big.Err("the test"); err == nil || !strings.Contains(err.Error(), "rule l1-budget: the test") {
		t.Errorf("Err = %v, want rule l1-budget", err)
	}
}

// dmProgram is a one-core data-movement program: body builds the reader,
// the writer copies `pages` pages of CB c_16 to the DRAM buffer "dst".
func dmProgram(t *testing.T, tgt *target.Target, bufs []kir.Buffer, dt ir.DType, pageSize, pages int, extra []kir.CB, reader func(k *kir.Kernel, b *kir.Builder)) (*kexec.Device, *kir.Program) {
	t.Helper()
	p := kir.NewProgram("dm")
	rs := []ir.CoreRange{{}}
	for _, b := range bufs {
		p.AddBuffer(b)
	}
	dst := kir.Buffer{Name: "dst", Mem: ir.DRAM, DType: dt, Layout: ir.TileLayout, PageSize: pageSize, Pages: pages}
	p.AddBuffer(dst)
	p.AddCB(kir.CB{Index: 16, PageSize: pageSize, Pages: 2, Format: dt, Cores: rs})
	for _, cb := range extra {
		cb.Cores = rs
		p.AddCB(cb)
	}
	rd := NewReaderKernel(p, rs)
	reader(rd, rd.Builder())
	rd.SetRuntimeArgs(kir.Core{})
	wr := NewWriterKernel(p, rs)
	acc, err := NewAccess(wr, tgt, "dst_addr", dst)
	if err != nil {
		t.Fatal(err)
	}
	WritePages(wr.Builder(), acc, 16, kir.C(0), kir.Ci(pages))
	wr.SetRuntimeArgs(kir.Core{})
	if err := kir.Validate(p, tgt); err != nil {
		t.Fatal(err)
	}
	d := kexec.NewDevice(tgt)
	for _, b := range p.Buffers {
		if _, err := d.Alloc(b); err != nil {
			t.Fatal(err)
		}
	}
	return d, p
}

func run(t *testing.T, d *kexec.Device, p *kir.Program) {
	t.Helper()
	if _, err := d.Run(p, kexec.RunOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestAccessPlacements reads every page of a buffer in each placement
// through Access and checks the pages arrive in order (the addressing
// matches the simulator's page distribution).
func TestAccessPlacements(t *testing.T) {
	tgt := target.Blackhole()
	const pageSize, pages = 64, 23
	sharded := func(kind ir.MemKind, g ir.CoreRange) ir.MemoryConfig {
		return ir.MemoryConfig{Kind: kind, Shard: &ir.ShardSpec{Grid: g, Shape: [2]int{32, 32}}}
	}
	mems := map[string]ir.MemoryConfig{
		"dram":           ir.DRAM,
		"l1_interleaved": ir.L1,
		"height_sharded": sharded(ir.L1HeightSharded, ir.CoreRange{X0: 2, Y0: 1, X1: 4, Y1: 3}),
		"one_core":       sharded(ir.L1HeightSharded, ir.CoreRange{X0: 5, Y0: 6, X1: 5, Y1: 6}),
		"block_sharded":  sharded(ir.L1BlockSharded, ir.CoreRange{X0: 0, Y0: 8, X1: 10, Y1: 9}),
	}
	for name, mem := range mems {
		t.Run(name, func(t *testing.T) {
			src := kir.Buffer{Name: "src", Mem: mem, DType: ir.BF16, Layout: ir.RowMajorLayout, PageSize: pageSize, Pages: pages}
			d, p := dmProgram(t, tgt, []kir.Buffer{src}, ir.BF16, pageSize, pages, nil, func(k *kir.Kernel, b *kir.Builder) {
				acc, err := NewAccess(k, tgt, "src_addr", src)
				if err != nil {
					t.Fatal(err)
				}
				ReadPages(b, acc, 16, kir.C(0), kir.Ci(pages))
			})
			data := make([]byte, pageSize*pages)
			for i := range data {
				data[i] = byte(i/pageSize*7 + i%pageSize)
			}
			if err := d.WritePages("src", 0, data); err != nil {
				t.Fatal(err)
			}
			run(t, d, p)
			got, err := d.ReadPages("dst", 0, pages)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(data, got); diff != "" {
				t.Errorf("pages (-want +got):\n%s", diff)
			}
		})
	}
	if _, err := NewAccess(&kir.Kernel{}, tgt, "x", kir.Buffer{Name: "w", Mem: ir.MemoryConfig{Kind: ir.DRAMWidthSharded, Shard: &ir.ShardSpec{}}}); err == nil {
		t.Error("NewAccess accepted a DRAM width-sharded buffer")
	}
}

// tileBytesOf packs a row-major 32x32 tile of dt.
func tileBytesOf(t *testing.T, dt ir.DType, vals []float32) []byte {
	t.Helper()
	b, err := numerics.PackTile(dt, numerics.Tilize(vals, TileDim, TileDim))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestZeroPadding(t *testing.T) {
	tgt := target.Blackhole()
	for _, dt := range []ir.DType{ir.BF16, ir.FP32} {
		for _, rc := range [][2]int{{5, 7}, {32, 17}, {1, 1}, {20, 32}} {
			rows, cols := rc[0], rc[1]
			src := kir.Buffer{Name: "src", Mem: ir.DRAM, DType: dt, Layout: ir.TileLayout, PageSize: dt.TileBytes(), Pages: 1}
			d, p := dmProgram(t, tgt, []kir.Buffer{src}, dt, dt.TileBytes(), 1, nil, func(k *kir.Kernel, b *kir.Builder) {
				acc, err := NewAccess(k, tgt, "src_addr", src)
				if err != nil {
					t.Fatal(err)
				}
				b.CBReserveBack(16, kir.C(1))
				l1 := b.Let("l1", kir.GetWritePtr{CB: 16})
				ReadPageTo(b, acc, kir.C(0), l1)
				b.NoCAsyncReadBarrier()
				ZeroPadding(b, l1, ElemBytes(dt), rows, cols)
				b.CBPushBack(16, kir.C(1))
			})
			vals := make([]float32, TileDim*TileDim)
			for i := range vals {
				vals[i] = float32(i%97) + 1
			}
			if err := d.WritePages("src", 0, tileBytesOf(t, dt, vals)); err != nil {
				t.Fatal(err)
			}
			run(t, d, p)
			raw, err := d.ReadPages("dst", 0, 1)
			if err != nil {
				t.Fatal(err)
			}
			tile, err := numerics.UnpackTile(dt, raw)
			if err != nil {
				t.Fatal(err)
			}
			got := numerics.Untilize(tile, TileDim, TileDim)
			for r := 0; r < TileDim; r++ {
				for c := 0; c < TileDim; c++ {
					want := vals[r*TileDim+c]
					if r >= rows || c >= cols {
						want = 0
					}
					if got[r*TileDim+c] != want {
						t.Fatalf("%s rows %d cols %d: element (%d, %d) = %v, want %v", dt, rows, cols, r, c, got[r*TileDim+c], want)
					}
				}
			}
		}
	}
}

// TestGather reverses the rows and shifts the columns of a [40, 48] fp32
// tensor with runs of 16: out[r, c] = x[39-r, c+16] for c < 32, zero fill.
func TestGather(t *testing.T) {
	tgt := target.Blackhole()
	in := ImageOf(ir.Shape{40, 48})
	out := ImageOf(ir.Shape{40, 32})
	src := kir.Buffer{Name: "src", Mem: ir.L1, DType: ir.FP32, Layout: ir.TileLayout, PageSize: 4096, Pages: in.Pages}
	d, p := dmProgram(t, tgt, []kir.Buffer{src}, ir.FP32, 4096, out.Pages, []kir.CB{{Index: 24, PageSize: 4096, Pages: 1, Format: ir.FP32}}, func(k *kir.Kernel, b *kir.Builder) {
		acc, err := NewAccess(k, tgt, "src_addr", src)
		if err != nil {
			t.Fatal(err)
		}
		g := &Gather{Out: out, DType: ir.FP32, Seg: 16, Fill: true,
			Sources: []GatherSource{{Acc: acc, Image: in}},
			Map: func(b *kir.Builder, row, col kir.Var) []Run {
				return []Run{{Src: 0, Row: kir.Sub(kir.C(39), row), Col: kir.Add(col, kir.C(16))}}
			}}
		if err := g.Check(); err != nil {
			t.Fatal(err)
		}
		g.Emit(b, 16, []int{24}, kir.C(0), kir.Ci(out.Pages))
	})
	x := make([]float32, 40*48)
	for i := range x {
		x[i] = float32(i)
	}
	tiles := numerics.TilizeBatch(x, 1, 40, 48)
	raw, err := numerics.PackTiles(ir.FP32, tiles)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.WritePages("src", 0, raw); err != nil {
		t.Fatal(err)
	}
	run(t, d, p)
	res, err := d.ReadPages("dst", 0, out.Pages)
	if err != nil {
		t.Fatal(err)
	}
	ut, err := numerics.UnpackTiles(ir.FP32, res)
	if err != nil {
		t.Fatal(err)
	}
	got := numerics.UntilizeBatch(ut, 1, 40, 32)
	for r := 0; r < 40; r++ {
		for c := 0; c < 32; c++ {
			if want := x[(39-r)*48+c+16]; got[r*32+c] != want {
				t.Fatalf("out[%d, %d] = %v, want %v", r, c, got[r*32+c], want)
			}
		}
	}
	// The padding rows of the last tile row were filled with zeros.
	last := ut[1*numerics.TileElems:]
	if v := last[numerics.FaceIndex(31, 0)]; v != 0 {
		t.Errorf("padding element = %v, want 0", v)
	}
}

func TestElemHelpers(t *testing.T) {
	if got := FillWord(ir.BF16, 1); got != 0x3F803F80 {
		t.Errorf("FillWord(bf16, 1) = %#x", got)
	}
	if got := FillWord(ir.FP32, -2); got != math.Float32bits(-2) {
		t.Errorf("FillWord(fp32, -2) = %#x", got)
	}
	if ElemBytes(ir.BFP8B) != 0 || ElemBytes(ir.BF16) != 2 || ElemBytes(ir.UInt32) != 4 {
		t.Error("ElemBytes")
	}
}

// apiNames lists the API calls of a body in order.
func apiNames(body []kir.Stmt) []string {
	var out []string
	kir.Inspect(body, func(s kir.Stmt) bool {
		if n := kir.APIName(s); n != "" {
			out = append(out, n)
		}
		return true
	})
	return out
}

// TestComputeTracker checks that Compute emits each reconfig and init once
// and re-establishes the loop-entry configuration at the end of a loop body.
func TestComputeTracker(t *testing.T) {
	p := kir.NewProgram("c")
	rs := []ir.CoreRange{{}}
	pl := NewCBPlan(p, target.Blackhole(), rs)
	a, b16, f32 := pl.Input("a", ir.BF16, 2), pl.Input("b", ir.BF16, 2), pl.Input("c", ir.FP32, 2)
	out := pl.Output("out", ir.BF16, 2)
	acc := pl.Scratch("acc", ir.FP32, 1)
	k := NewComputeKernel(p, rs, kir.ComputeConfig{FP32DestAccEn: true})
	c := NewCompute(p, k)
	c.Startup(a, b16, out)
	c.Acquire()
	c.Copy(a, kir.C(0), kir.C(0))                                         // copy init only
	c.Copy(a, kir.C(1), kir.C(1))                                         // nothing new
	c.Binary(kir.EltAdd, BcastNone, a, b16, kir.C(0), kir.C(0), kir.C(0)) // add init only: formats match
	c.Binary(kir.EltMul, BcastRows, a, f32, kir.C(0), kir.C(0), kir.C(0)) // reconfig + bcast init
	c.SFPU(SFPUStep{Op: kir.SFPUMulScalar, Param: 2}, kir.C(0))
	c.SFPU(SFPUStep{Op: kir.SFPUAddScalar, Param: 1}, kir.C(0)) // same init group
	c.Commit()
	c.Wait()
	c.Pack(kir.C(0), acc) // pack reconfig to fp32
	c.Release()
	entry := len(k.Body)
	c.For("i", kir.C(0), kir.C(3), func(kir.Var) {
		c.Acquire()
		c.Copy(f32, kir.C(0), kir.C(0))
		c.Commit()
		c.Wait()
		c.Pack(kir.C(0), out)
		c.Release()
	})
	want := []string{
		"compute_kernel_hw_startup", "tile_regs_acquire",
		"copy_tile_to_dst_init_short", "copy_tile", "copy_tile",
		"add_tiles_init", "add_tiles",
		"reconfig_data_format", "mul_bcast_rows_init_short", "mul_tiles_bcast_rows",
		"binop_with_scalar_tile_init", "mul_unary_tile", "add_unary_tile",
		"tile_regs_commit", "tile_regs_wait", "pack_reconfig_data_format", "pack_tile", "tile_regs_release",
	}
	if diff := cmp.Diff(want, apiNames(k.Body[:entry])); diff != "" {
		t.Errorf("straight-line calls (-want +got):\n%s", diff)
	}
	// Before the loop: the configuration its body ends in (the body copies
	// f32 and packs to out), so the body re-initialises nothing.
	if diff := cmp.Diff([]string{"reconfig_data_format", "pack_reconfig_data_format", "copy_tile_to_dst_init_short"}, apiNames(k.Body[entry:len(k.Body)-1])); diff != "" {
		t.Errorf("calls before the loop (-want +got):\n%s", diff)
	}
	loop := k.Body[len(k.Body)-1].(kir.For)
	wantLoop := []string{
		"tile_regs_acquire", "copy_tile", "tile_regs_commit", "tile_regs_wait", "pack_tile", "tile_regs_release",
	}
	if diff := cmp.Diff(wantLoop, apiNames(loop.Body)); diff != "" {
		t.Errorf("loop body calls (-want +got):\n%s", diff)
	}
	// A body that switches configuration inside (copy a, add, copy f32)
	// starts in the configuration it ends in, so it switches back at its
	// start and needs nothing at its end.
	n := len(k.Body)
	c.For("j", kir.C(0), kir.C(3), func(kir.Var) {
		c.Acquire()
		c.Copy(a, kir.C(0), kir.C(0))
		c.Binary(kir.EltAdd, BcastNone, a, b16, kir.C(0), kir.C(0), kir.C(0))
		c.Copy(f32, kir.C(0), kir.C(1))
		c.Commit()
		c.Wait()
		c.Pack(kir.C(0), out)
		c.Release()
	})
	body := apiNames(k.Body[len(k.Body)-1].(kir.For).Body)
	if diff := cmp.Diff([]string{"reconfig_data_format"}, apiNames(k.Body[n:len(k.Body)-1])); diff != "" {
		t.Errorf("calls before the second loop (-want +got):\n%s", diff)
	}
	if body[1] != "reconfig_data_format" || body[len(body)-1] != "tile_regs_release" {
		t.Errorf("second loop body %v: want the switch to a's format first and nothing after the release", body)
	}
}

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

// With Chains set (tcc's SFPU code), SFPUSteps emits a chain of one-operand
// ops as one SFPU statement (one pass over DEST) after the first op's
// init; without it, or for one step or a binary op, one statement per step.
func TestSFPUStepsChain(t *testing.T) {
	steps := []SFPUStep{{Op: kir.SFPUExp}, {Op: kir.SFPUMulScalar, Param: -1}}
	for _, c := range []struct {
		name   string
		chains bool
		steps  []SFPUStep
		want   []kir.Stmt
	}{
		{"chain", true, steps, []kir.Stmt{kir.SFPUInit{Op: kir.SFPUExp}, kir.SFPU{Op: kir.SFPUExp, Dst: kir.C(0), Chain: "exp,mul_scalar:bf800000"}}},
		{"per-op", false, steps, []kir.Stmt{kir.SFPUInit{Op: kir.SFPUExp}, kir.SFPU{Op: kir.SFPUExp, Dst: kir.C(0)},
			kir.SFPUInit{Op: kir.SFPUMulScalar}, kir.SFPU{Op: kir.SFPUMulScalar, Dst: kir.C(0), Param: 0xbf800000}}},
		{"one step", true, steps[:1], []kir.Stmt{kir.SFPUInit{Op: kir.SFPUExp}, kir.SFPU{Op: kir.SFPUExp, Dst: kir.C(0)}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := kir.NewProgram("c")
			k := NewComputeKernel(p, []ir.CoreRange{{}}, kir.ComputeConfig{FP32DestAccEn: true})
			cp := NewCompute(p, k)
			cp.Chains = c.chains
			cp.SFPUSteps(c.steps, kir.C(0))
			if d := cmp.Diff(c.want, k.Body); d != "" {
				t.Errorf("statements (-want +got):\n%s", d)
			}
		})
	}
}
