package kexec_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/kir/kirtest"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/ir/numerics"
	"github.com/tcc-dev/tcc/ir/sfpu"
	"github.com/tcc-dev/tcc/sim/kexec"
)

var bh = target.Blackhole()

func randTiles(seed uint64, n int) []float32 {
	rng := rand.New(rand.NewPCG(seed, 7))
	out := make([]float32, n*numerics.TileElems)
	for i := range out {
		out[i] = numerics.RoundBF16(float32(rng.NormFloat64()))
	}
	return out
}

// setup allocates the program's buffers and fills the named ones.
func setup(t *testing.T, p *kir.Program, data map[string][]float32) *kexec.Device {
	t.Helper()
	d := kexec.NewDevice(bh)
	for _, b := range p.Buffers {
		if _, err := d.Alloc(b); err != nil {
			t.Fatal(err)
		}
		if v, ok := data[b.Name]; ok {
			if err := d.WriteTiles(b.Name, v); err != nil {
				t.Fatal(err)
			}
		}
	}
	return d
}

func runOK(t *testing.T, d *kexec.Device, p *kir.Program) *kexec.Stats {
	t.Helper()
	kir.Finish(p) // as codegen/lower finishes every program
	if err := kir.Validate(p, bh); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	st, err := d.Run(p, kexec.RunOptions{})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return st
}

func readTiles(t *testing.T, d *kexec.Device, name string) []float32 {
	t.Helper()
	v, err := d.ReadTiles(name)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestEltwiseAddBF16(t *testing.T) {
	cores := []kir.Core{{X: 0, Y: 0}, {X: 3, Y: 2}, {X: 10, Y: 9}}
	p := kirtest.EltwiseBinary(kir.EltAdd, ir.BF16, 5, cores)
	n := 5 * len(cores)
	a, b := randTiles(1, n), randTiles(2, n)
	d := setup(t, p, map[string][]float32{"a": a, "b": b})
	st := runOK(t, d, p)
	want := make([]float32, len(a))
	for i := range a {
		want[i] = numerics.FPUAdd(a[i], b[i], false) // ELWADD into a bf16 DEST, packed exactly
	}
	if diff := cmp.Diff(want, readTiles(t, d, "out")); diff != "" {
		t.Errorf("out (-want +got):\n%s", diff)
	}
	if st.NoCReadBytes != int64(2*n*2048) || st.NoCWriteBytes != int64(n*2048) {
		t.Errorf("NoC bytes read %d written %d; want %d and %d", st.NoCReadBytes, st.NoCWriteBytes, 2*n*2048, n*2048)
	}
}

// TestPackerRoundsTiesAway: 1 + 2^-8 in an fp32 DEST is a bf16 tie; the
// packer rounds it away from zero to 1 + 2^-7 (ties-to-even would give 1),
// and -(1 + 2^-8) to -(1 + 2^-7).
func TestPackerRoundsTiesAway(t *testing.T) {
	p := kirtest.EltwiseBinary(kir.EltAdd, ir.BF16, 1, []kir.Core{{X: 0, Y: 0}})
	p.Kernel("compute").Compute.FP32DestAccEn = true
	a, b := make([]float32, numerics.TileElems), make([]float32, numerics.TileElems)
	for i := range a {
		a[i], b[i] = 1, 0x1p-8
		if i%2 == 1 {
			a[i], b[i] = -1, -0x1p-8
		}
	}
	d := setup(t, p, map[string][]float32{"a": a, "b": b})
	runOK(t, d, p)
	got := readTiles(t, d, "out")
	for i, v := range got {
		want := float32(1 + 0x1p-7)
		if i%2 == 1 {
			want = -want
		}
		if v != want {
			t.Fatalf("element %d = %v, want %v (the packer rounds ties away from zero)", i, v, want)
		}
	}
}

func TestEltwiseMulBFP8(t *testing.T) {
	p := kirtest.EltwiseBinary(kir.EltMul, ir.BFP8B, 3, []kir.Core{{X: 1, Y: 1}})
	a := numerics.Quantize(ir.BFP8B, randTiles(3, 1))
	a = append(a, numerics.Quantize(ir.BFP8B, randTiles(4, 2))...)
	b := numerics.Quantize(ir.BFP8B, randTiles(5, 1))
	b = append(b, numerics.Quantize(ir.BFP8B, randTiles(6, 2))...)
	d := setup(t, p, map[string][]float32{"a": a, "b": b})
	runOK(t, d, p)
	var want []float32
	for tile := 0; tile < 3; tile++ {
		prod := make([]float32, numerics.TileElems)
		for i := range prod {
			j := tile*numerics.TileElems + i
			prod[i] = numerics.FPUMul(a[j], b[j], 0, ir.HiFi4, false) // four ELWMUL passes into a bf16 DEST
		}
		packed, err := numerics.PackTileDevice(ir.BFP8B, prod, false) // the packer from a bf16 DEST
		require.NoError(t, err)
		dec, err := numerics.UnpackTile(ir.BFP8B, packed)
		require.NoError(t, err)
		want = append(want, dec...)
	}
	if diff := cmp.Diff(want, readTiles(t, d, "out")); diff != "" {
		t.Errorf("out (-want +got):\n%s", diff)
	}
}

func TestMatmul(t *testing.T) {
	const mt, kt, nt = 2, 3, 2
	for _, fp32 := range []bool{false, true} {
		name := "bf16 DEST"
		if fp32 {
			name = "fp32 DEST"
		}
		t.Run(name, func(t *testing.T) {
			p := kirtest.Matmul(mt, kt, nt, ir.BF16, ir.HiFi4)
			p.Kernel("compute").Compute.FP32DestAccEn = fp32
			a, b := randTiles(10, mt*kt), randTiles(11, kt*nt)
			d := setup(t, p, map[string][]float32{"a": a, "b": b})
			runOK(t, d, p)
			got := readTiles(t, d, "c")
			tile := func(x []float32, i int) []float32 {
				return x[i*numerics.TileElems : (i+1)*numerics.TileElems]
			}
			var want []float32
			for m := 0; m < mt; m++ {
				for n := 0; n < nt; n++ {
					acc := make([]float32, numerics.TileElems)
					for k := 0; k < kt; k++ {
						numerics.MatmulTile(acc, tile(a, m*kt+k), tile(b, k*nt+n), ir.HiFi4, fp32)
					}
					for i := range acc {
						acc[i] = numerics.FromBF16Bits(numerics.PackerBF16(acc[i])) // pack to bf16
					}
					want = append(want, acc...)
				}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("c (-want +got):\n%s", diff)
			}
			// Against a float64 reference of the row-major matrices.
			am := numerics.UntilizeBatch(a, 1, mt*32, kt*32)
			bm := numerics.UntilizeBatch(b, 1, kt*32, nt*32)
			gm := numerics.UntilizeBatch(got, 1, mt*32, nt*32)
			ref := make([]float32, len(gm))
			for i := 0; i < mt*32; i++ {
				for j := 0; j < nt*32; j++ {
					var s float64
					for k := 0; k < kt*32; k++ {
						s += float64(am[i*kt*32+k]) * float64(bm[k*nt*32+j])
					}
					ref[i*nt*32+j] = float32(s)
				}
			}
			if pcc := numerics.PCC(ref, gm); pcc < 0.9999 {
				t.Errorf("PCC against float64 = %v, want >= 0.9999", pcc)
			}
		})
	}
}

// pipeline builds a one-core program: a reader streams n tiles of "a"
// (and "b" when twoInputs) into c_0 (c_1), compute runs body once per tile
// and the writer stores c_16 into "out".
func pipeline(dt ir.DType, n int, twoInputs bool, cfg kir.ComputeConfig, body func(b *kir.Builder)) *kir.Program {
	core := kir.Core{}
	rs := []ir.CoreRange{core.Range()}
	p := kir.NewProgram("pipeline")
	ins := []string{"a"}
	if twoInputs {
		ins = append(ins, "b")
	}
	for _, name := range append(ins, "out") {
		p.AddBuffer(kir.Buffer{Name: name, Mem: ir.DRAM, DType: dt, Layout: ir.TileLayout, PageSize: dt.TileBytes(), Pages: n})
	}
	for i := range ins {
		p.AddCB(kir.CB{Index: i, PageSize: dt.TileBytes(), Pages: 2, Format: dt, Cores: rs})
	}
	p.AddCB(kir.CB{Index: 16, PageSize: dt.TileBytes(), Pages: 2, Format: dt, Cores: rs})
	rd := p.AddKernel(&kir.Kernel{Name: "reader", Role: kir.RoleReader, Processor: kir.RISCV1, NoC: 1, Cores: rs})
	var addrs []kir.Expr
	var vals []kir.ArgValue
	for _, name := range ins {
		addrs = append(addrs, rd.RuntimeArg(name+"_addr"))
		vals = append(vals, kir.BufferAddr(name, 0))
	}
	rd.SetRuntimeArgs(core, vals...)
	b := rd.Builder()
	b.For("i", kir.C(0), kir.Ci(n), func(i kir.Var) {
		for cb, addr := range addrs {
			b.CBReserveBack(cb, kir.C(1))
			b.NoCAsyncRead(kir.InterleavedPageAddr(addr, i, dt.TileBytes()), kir.GetWritePtr{CB: cb}, kir.Ci(dt.TileBytes()))
			b.NoCAsyncReadBarrier()
			b.CBPushBack(cb, kir.C(1))
		}
	})
	cp := p.AddKernel(&kir.Kernel{Name: "compute", Role: kir.RoleCompute, Processor: kir.ComputeProc, Cores: rs, Compute: cfg})
	b = cp.Builder()
	in1 := 0
	if twoInputs {
		in1 = 1
	}
	b.HWStartup(0, in1, 16)
	b.For("t", kir.C(0), kir.Ci(n), func(kir.Var) {
		for cb := range ins {
			b.CBWaitFront(cb, kir.C(1))
		}
		b.TileRegsAcquire()
		body(b)
		b.TileRegsCommit()
		b.CBReserveBack(16, kir.C(1))
		b.TileRegsWait()
		b.PackTile(kir.C(0), 16)
		b.TileRegsRelease()
		b.CBPushBack(16, kir.C(1))
		for cb := range ins {
			b.CBPopFront(cb, kir.C(1))
		}
	})
	wr := p.AddKernel(&kir.Kernel{Name: "writer", Role: kir.RoleWriter, Processor: kir.RISCV0, NoC: 0, Cores: rs})
	oaddr := wr.RuntimeArg("out_addr")
	wr.SetRuntimeArgs(core, kir.BufferAddr("out", 0))
	b = wr.Builder()
	b.For("i", kir.C(0), kir.Ci(n), func(i kir.Var) {
		b.CBWaitFront(16, kir.C(1))
		b.NoCAsyncWrite(kir.GetReadPtr{CB: 16}, kir.InterleavedPageAddr(oaddr, i, dt.TileBytes()), kir.Ci(dt.TileBytes()))
		b.NoCAsyncWriteBarrier()
		b.CBPopFront(16, kir.C(1))
	})
	return p
}

func elementwise(x []float32, f func(i int, v float32) float32) []float32 {
	out := make([]float32, len(x))
	for i, v := range x {
		out[i] = f(i, v)
	}
	return out
}

func TestComputeOps(t *testing.T) {
	a, bb := randTiles(20, 2), randTiles(21, 2)
	// SFPSTORE into a bf16 DEST truncates (and these inputs have no subnormals).
	trunc := func(x float32) float32 { return math.Float32frombits(math.Float32bits(x) &^ 0xFFFF) }
	tests := []struct {
		name string
		two  bool
		body func(b *kir.Builder)
		want func() []float32
	}{
		{"exp", false, func(b *kir.Builder) {
			b.CopyTileInit(0)
			b.CopyTile(0, kir.C(0), kir.C(0))
			b.SFPUInit(kir.SFPUExp)
			b.SFPU(kir.SFPUExp, kir.C(0))
		}, func() []float32 {
			return elementwise(a, func(_ int, v float32) float32 { return trunc(numerics.Exp(v)) })
		}},
		{"mul by scalar then silu", false, func(b *kir.Builder) {
			b.CopyTileInit(0)
			b.CopyTile(0, kir.C(0), kir.C(0))
			b.SFPUInit(kir.SFPUMulScalar)
			b.SFPUScalar(kir.SFPUMulScalar, kir.C(0), 0.5)
			b.SFPUInit(kir.SFPUSiLU)
			b.SFPU(kir.SFPUSiLU, kir.C(0))
		}, func() []float32 {
			return elementwise(a, func(_ int, v float32) float32 { return trunc(numerics.SiLU(trunc(v * 0.5))) })
		}},
		{"mul by scalar then silu as one chain", false, func(b *kir.Builder) {
			// the chain (kir.SFPU's Chain) computes what the two
			// statements above do, bf16 DEST truncation between them
			// included
			b.CopyTileInit(0)
			b.CopyTile(0, kir.C(0), kir.C(0))
			b.SFPUInit(kir.SFPUMulScalar)
			b.Emit(kir.SFPU{Op: kir.SFPUMulScalar, Dst: kir.C(0), Chain: "mul_scalar:3f000000,silu"})
		}, func() []float32 {
			return elementwise(a, func(_ int, v float32) float32 { return trunc(numerics.SiLU(trunc(v * 0.5))) })
		}},
		{"sub with column broadcast", true, func(b *kir.Builder) {
			b.BcastInit(kir.EltSub, kir.BcastCols, 0, 1)
			b.BcastTiles(kir.EltSub, kir.BcastCols, 0, 1, kir.C(0), kir.C(0), kir.C(0))
		}, func() []float32 {
			return elementwise(a, func(i int, v float32) float32 {
				tile, r := i/numerics.TileElems, 0
				r, _ = numerics.FacePos(i % numerics.TileElems)
				return numerics.FPUSub(v, bb[tile*numerics.TileElems+numerics.FaceIndex(r, 0)], false)
			})
		}},
		{"transpose", false, func(b *kir.Builder) {
			b.TransposeInit(0)
			b.TransposeTile(0, kir.C(0), kir.C(0))
		}, func() []float32 {
			return elementwise(a, func(i int, _ float32) float32 {
				tile := i / numerics.TileElems
				r, c := numerics.FacePos(i % numerics.TileElems)
				return a[tile*numerics.TileElems+numerics.FaceIndex(c, r)]
			})
		}},
		{"row sum with scaler", true, func(b *kir.Builder) {
			b.ReduceInit(kir.ReduceSum, kir.ReduceRow, 0, 1, 16)
			b.ReduceTile(kir.ReduceSum, kir.ReduceRow, 0, 1, kir.C(0), kir.C(0), kir.C(0))
			b.ReduceUninit()
		}, func() []float32 {
			out := make([]float32, len(a))
			for tile := 0; tile < 2; tile++ {
				base := tile * numerics.TileElems
				for r := 0; r < 32; r++ {
					out[base+numerics.FaceIndex(r, 0)] = numerics.PoolTile(0, tileRow(a, base, r), bb[base], ir.HiFi4, false) // GAPOOL into a bf16 DEST
				}
			}
			return out
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := pipeline(ir.BF16, 2, tc.two, kir.ComputeConfig{MathFidelity: ir.HiFi4}, tc.body)
			data := map[string][]float32{"a": a}
			if tc.two {
				data["b"] = bb
			}
			d := setup(t, p, data)
			runOK(t, d, p)
			if diff := cmp.Diff(tc.want(), readTiles(t, d, "out")); diff != "" {
				t.Errorf("out (-want +got):\n%s", diff)
			}
		})
	}
}

// tileRow is row r of the tile at base in t (face order).
func tileRow(t []float32, base, r int) []float32 {
	row := make([]float32, numerics.TileDim)
	for c := range row {
		row[c] = t[base+numerics.FaceIndex(r, c)]
	}
	return row
}

// TestRowReduceThroughSrcB: in an fp32 DEST a row reduction's sums keep
// only their upper 16 bits, as tt-llk's reduce moves them through a bf16
// SrcB (MOVD2B) to turn the pooled row into a column; ttsim computes the
// same (tiny-mlp's rms_norm on ttsim differed from the simulator in 1-ulp
// bf16 outputs before the simulator modelled it). The packer then writes
// those bf16 values unchanged, where it would round the full sums (half
// away from zero) otherwise.
func TestRowReduceThroughSrcB(t *testing.T) {
	a, bb := randTiles(22, 2), randTiles(23, 2)
	p := pipeline(ir.BF16, 2, true, kir.ComputeConfig{MathFidelity: ir.HiFi4, FP32DestAccEn: true}, func(b *kir.Builder) {
		b.ReduceInit(kir.ReduceSum, kir.ReduceRow, 0, 1, 16)
		b.ReduceTile(kir.ReduceSum, kir.ReduceRow, 0, 1, kir.C(0), kir.C(0), kir.C(0))
		b.ReduceUninit()
	})
	d := setup(t, p, map[string][]float32{"a": a, "b": bb})
	runOK(t, d, p)
	want := make([]float32, len(a))
	rounded := 0
	for tile := 0; tile < 2; tile++ {
		base := tile * numerics.TileElems
		for r := 0; r < 32; r++ {
			acc := numerics.PoolTile(0, tileRow(a, base, r), bb[base], ir.HiFi4, true)
			w := math.Float32frombits(math.Float32bits(acc) &^ 0xFFFF)
			if numerics.FromBF16Bits(numerics.PackerBF16(acc)) != w {
				rounded++
			}
			want[base+numerics.FaceIndex(r, 0)] = w
		}
	}
	require.NotZero(t, rounded, "no row sum whose packer rounding differs from its truncation: the test would not see the trip through SrcB")
	if diff := cmp.Diff(want, readTiles(t, d, "out")); diff != "" {
		t.Errorf("out (-want +got):\n%s", diff)
	}
}

// An SFPU op in an fp32 DEST computes as the kernel's SFPU code says: tcc's
// program executed on the instruction model (sfpu.CodeTCC) or the exact
// function (sfpu.CodeLLK). The inputs are chosen so that the two differ in
// some element (the test would not see a swap otherwise).
func TestSFPUCode(t *testing.T) {
	x := randTiles(22, 1)
	for i := range x {
		x[i] *= 8 // exp over [-8, 8)-ish: the two results differ in some ulps
	}
	exact := elementwise(x, func(_ int, v float32) float32 { return numerics.Exp(v) })
	prog := elementwise(x, func(_ int, v float32) float32 { return sfpu.Programs[sfpu.Exp].Eval(v, 0) })
	if cmp.Equal(exact, prog) {
		t.Fatal("tcc's exp equals the exact one on every input: the test cannot tell the codes apart")
	}
	for _, c := range []struct {
		code sfpu.Code
		want []float32
	}{{sfpu.CodeTCC, prog}, {sfpu.CodeLLK, exact}} {
		t.Run(c.code.String(), func(t *testing.T) {
			p := pipeline(ir.FP32, 1, false, kir.ComputeConfig{MathFidelity: ir.HiFi4, FP32DestAccEn: true, SFPU: c.code}, func(b *kir.Builder) {
				b.CopyTileInit(0)
				b.CopyTile(0, kir.C(0), kir.C(0))
				b.SFPUInit(kir.SFPUExp)
				b.SFPU(kir.SFPUExp, kir.C(0))
			})
			d := setup(t, p, map[string][]float32{"a": x})
			runOK(t, d, p)
			if diff := cmp.Diff(c.want, readTiles(t, d, "out")); diff != "" {
				t.Errorf("out (-want +got):\n%s", diff)
			}
		})
	}
}

// handshake: core (0,0) copies a DRAM page into its L1 staging buffer,
// writes it into the staging buffer of core (1,0) over the NoC and bumps
// (1,0)'s semaphore; (1,0) waits, stores the page to DRAM and acknowledges
// through (0,0)'s semaphore, which (0,0) waits for.
func handshakeProgram() *kir.Program {
	c0, c1 := kir.Core{X: 0, Y: 0}, kir.Core{X: 1, Y: 0}
	both := []ir.CoreRange{{X0: 0, Y0: 0, X1: 1, Y1: 0}}
	p := kir.NewProgram("handshake")
	p.AddBuffer(kir.Buffer{Name: "in", Mem: ir.DRAM, DType: ir.BF16, Layout: ir.TileLayout, PageSize: 2048, Pages: 1})
	p.AddBuffer(kir.Buffer{Name: "out", Mem: ir.DRAM, DType: ir.BF16, Layout: ir.TileLayout, PageSize: 2048, Pages: 1})
	p.AddBuffer(kir.Buffer{Name: "stage", Mem: ir.MemoryConfig{Kind: ir.L1HeightSharded, Shard: &ir.ShardSpec{Grid: both[0], Shape: [2]int{32, 32}}},
		DType: ir.BF16, Layout: ir.TileLayout, PageSize: 2048, Pages: 2})
	p.AddSemaphore(kir.Semaphore{ID: 0, Cores: both, Initial: 0})

	snd := p.AddKernel(&kir.Kernel{Name: "sender", Role: kir.RoleWriter, Processor: kir.RISCV0, Cores: []ir.CoreRange{c0.Range()}})
	src, stage := snd.RuntimeArg("src"), snd.RuntimeArg("stage")
	px, py := snd.RuntimeArg("peer_x"), snd.RuntimeArg("peer_y")
	snd.SetRuntimeArgs(c0, kir.BufferAddr("in", 0), kir.BufferAddr("stage", 0), kir.NoCX(c1), kir.NoCY(c1))
	b := snd.Builder()
	b.NoCAsyncRead(kir.DRAMBankAddr{Bank: kir.C(0), Offset: src}, stage, kir.C(2048))
	b.NoCAsyncReadBarrier()
	b.NoCAsyncWrite(stage, kir.NoCAddr{X: px, Y: py, Addr: stage}, kir.C(2048))
	b.NoCAsyncWriteBarrier()
	sem := b.Let("sem", kir.GetSemaphore{ID: kir.C(0)})
	b.NoCSemaphoreInc(kir.NoCAddr{X: px, Y: py, Addr: sem}, kir.C(1))
	b.NoCSemaphoreWait(sem, kir.C(1))

	rcv := p.AddKernel(&kir.Kernel{Name: "receiver", Role: kir.RoleWriter, Processor: kir.RISCV0, Cores: []ir.CoreRange{c1.Range()}})
	dst, rstage := rcv.RuntimeArg("dst"), rcv.RuntimeArg("stage")
	sx, sy := rcv.RuntimeArg("sender_x"), rcv.RuntimeArg("sender_y")
	rcv.SetRuntimeArgs(c1, kir.BufferAddr("out", 0), kir.BufferAddr("stage", 0), kir.NoCX(c0), kir.NoCY(c0))
	b = rcv.Builder()
	rsem := b.Let("sem", kir.GetSemaphore{ID: kir.C(0)})
	b.NoCSemaphoreWait(rsem, kir.C(1))
	b.NoCAsyncWrite(rstage, kir.DRAMBankAddr{Bank: kir.C(0), Offset: dst}, kir.C(2048))
	b.NoCAsyncWriteBarrier()
	b.NoCSemaphoreInc(kir.NoCAddr{X: sx, Y: sy, Addr: rsem}, kir.C(1))
	return p
}

func TestSemaphoreHandshake(t *testing.T) {
	p := handshakeProgram()
	in := randTiles(30, 1)
	d := setup(t, p, map[string][]float32{"in": in})
	runOK(t, d, p)
	if diff := cmp.Diff(in, readTiles(t, d, "out")); diff != "" {
		t.Errorf("out (-want +got):\n%s", diff)
	}
	// The page also sits in (1,0)'s staging buffer, written over the NoC.
	buf, _ := d.Buffer("stage")
	got, err := d.ReadL1(kir.Core{X: 1, Y: 0}, buf.Addr, 2048)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := d.ReadPages("in", 0, 1)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("staging L1 of (1,0) (-want +got):\n%s", diff)
	}
}

func TestNoCWriteAndMulticast(t *testing.T) {
	src := kir.Core{X: 0, Y: 0}
	p := kir.NewProgram("noc_write")
	k := p.AddKernel(&kir.Kernel{Name: "writer", Role: kir.RoleWriter, Processor: kir.RISCV0, Cores: []ir.CoreRange{src.Range()}})
	tx, ty := k.RuntimeArg("tx"), k.RuntimeArg("ty")
	mx0, my0, mx1, my1 := k.RuntimeArg("mx0"), k.RuntimeArg("my0"), k.RuntimeArg("mx1"), k.RuntimeArg("my1")
	target, mc0, mc1 := kir.Core{X: 7, Y: 3}, kir.Core{X: 0, Y: 0}, kir.Core{X: 2, Y: 1}
	k.SetRuntimeArgs(src, kir.NoCX(target), kir.NoCY(target), kir.NoCX(mc0), kir.NoCY(mc0), kir.NoCX(mc1), kir.NoCY(mc1))
	const at = 200000
	b := k.Builder()
	b.For("i", kir.C(0), kir.C(8), func(i kir.Var) {
		b.L1Write32(kir.Add(kir.C(at), kir.Mul(i, kir.C(4))), kir.Add(kir.C(0xabc000), i))
	})
	b.NoCAsyncWrite(kir.C(at), kir.NoCAddr{X: tx, Y: ty, Addr: kir.C(at + 64)}, kir.C(32))
	// (0,0)-(2,1) is six cores; the sender (0,0) is excluded.
	b.NoCAsyncWriteMulticast(kir.C(at), kir.MulticastAddr{X0: mx0, Y0: my0, X1: mx1, Y1: my1, Addr: kir.C(at + 128)}, kir.C(16), kir.C(5))
	b.NoCAsyncWriteBarrier()
	d := kexec.NewDevice(bh)
	if _, err := d.Run(p, kexec.RunOptions{}); err != nil {
		t.Fatal(err)
	}
	word := func(c kir.Core, addr uint32) uint32 {
		v, err := d.ReadL1(c, addr, 4)
		if err != nil {
			t.Fatal(err)
		}
		return uint32(v[0]) | uint32(v[1])<<8 | uint32(v[2])<<16 | uint32(v[3])<<24
	}
	for i := uint32(0); i < 8; i++ {
		if got := word(target, at+64+4*i); got != 0xabc000+i {
			t.Errorf("core %s word %d = %#x, want %#x", target, i, got, 0xabc000+i)
		}
	}
	for _, c := range kir.CoresOf([]ir.CoreRange{{X0: 0, Y0: 0, X1: 2, Y1: 1}}) {
		want := uint32(0xabc003)
		if c == src {
			want = 0x7fff7fff // the sender is not a multicast destination: never-written L1 is garbage
		}
		if got := word(c, at+128+12); got != want {
			t.Errorf("multicast core %s word 3 = %#x, want %#x", c, got, want)
		}
	}
}

func TestDeadlock(t *testing.T) {
	t.Run("compute waits on an unfed CB", func(t *testing.T) {
		p := kir.NewProgram("stuck")
		rs := []ir.CoreRange{{X0: 2, Y0: 1, X1: 2, Y1: 1}}
		p.AddCB(kir.CB{Index: 3, PageSize: 2048, Pages: 2, Format: ir.BF16, Cores: rs})
		p.AddCB(kir.CB{Index: 16, PageSize: 2048, Pages: 2, Format: ir.BF16, Cores: rs})
		k := p.AddKernel(&kir.Kernel{Name: "compute", Role: kir.RoleCompute, Processor: kir.ComputeProc, Cores: rs})
		b := k.Builder()
		b.HWStartup(3, 3, 16)
		b.CBWaitFront(3, kir.C(1))
		w := p.AddKernel(&kir.Kernel{Name: "writer", Role: kir.RoleWriter, Processor: kir.RISCV0, Cores: rs})
		w.Builder().CBWaitFront(16, kir.C(2))
		_, err := kexec.NewDevice(bh).Run(p, kexec.RunOptions{})
		var de *kexec.DeadlockError
		if !errors.As(err, &de) {
			t.Fatalf("Run returned %v (%T), want a *DeadlockError", err, err)
		}
		want := []kexec.Blocked{
			{Core: kir.Core{X: 2, Y: 1}, Kernel: "compute", Call: "cb_wait_front", CB: 3, Semaphore: -1, Reason: "waits for 1 page, 0 available"},
			{Core: kir.Core{X: 2, Y: 1}, Kernel: "writer", Call: "cb_wait_front", CB: 16, Semaphore: -1, Reason: "waits for 2 pages, 0 available"},
		}
		if diff := cmp.Diff(want, de.Blocked); diff != "" {
			t.Errorf("blocked (-want +got):\n%s", diff)
		}
		msg := err.Error()
		for _, s := range []string{`program "stuck"`, `core (2,1) kernel "compute": cb_wait_front(c_3) waits for 1 page, 0 available`} {
			if !strings.Contains(msg, s) {
				t.Errorf("message does not contain %q:\n%s", s, msg)
			}
		}
	})
	t.Run("semaphores wait on each other", func(t *testing.T) {
		p := kir.NewProgram("sem_cycle")
		both := []ir.CoreRange{{X0: 0, Y0: 0, X1: 1, Y1: 0}}
		p.AddSemaphore(kir.Semaphore{ID: 2, Cores: both, Initial: 0})
		k := p.AddKernel(&kir.Kernel{Name: "waiter", Role: kir.RoleReader, Processor: kir.RISCV1, NoC: 1, Cores: both})
		b := k.Builder()
		s := b.Let("s", kir.GetSemaphore{ID: kir.C(2)})
		b.NoCSemaphoreWait(s, kir.C(1))
		_, err := kexec.NewDevice(bh).Run(p, kexec.RunOptions{})
		var de *kexec.DeadlockError
		if !errors.As(err, &de) || len(de.Blocked) != 2 {
			t.Fatalf("Run returned %v, want a deadlock of two kernels", err)
		}
		if !strings.Contains(err.Error(), `core (1,0) kernel "waiter": noc_semaphore_wait(semaphore 2) waits for value == 1, has 0`) {
			t.Errorf("message:\n%s", err)
		}
	})
}

func TestStepLimit(t *testing.T) {
	p := kir.NewProgram("spin")
	k := p.AddKernel(&kir.Kernel{Name: "spin", Role: kir.RoleReader, Processor: kir.RISCV1, Cores: []ir.CoreRange{{}}})
	b := k.Builder()
	b.ForStep("i", kir.C(0), kir.C(1), kir.C(0), func(kir.Var) {})
	_, err := kexec.NewDevice(bh).Run(p, kexec.RunOptions{StepLimit: 10000})
	var se *kexec.StepLimitError
	if !errors.As(err, &se) {
		t.Fatalf("Run returned %v, want a *StepLimitError", err)
	}
	if diff := cmp.Diff([]string{"spin@(0,0)"}, se.Running); diff != "" {
		t.Errorf("running (-want +got):\n%s", diff)
	}
}

func TestRuntimeRules(t *testing.T) {
	cfg := kir.ComputeConfig{MathFidelity: ir.HiFi4}
	tests := []struct {
		name string
		p    func() *kir.Program
		want kir.Rule
		msg  string
	}{
		{"dynamic DEST index", func() *kir.Program {
			return pipeline(ir.BF16, 1, false, cfg, func(b *kir.Builder) {
				b.CopyTileInit(0)
				d := b.Let("d", kir.Add(kir.C(4), kir.C(4)))
				b.CopyTile(0, kir.C(0), d)
			})
		}, kir.RuleDEST, "copy_tile addresses DEST tile 8; DEST holds 8 tiles"},
		{"missing init", func() *kir.Program {
			return pipeline(ir.BF16, 1, false, cfg, func(b *kir.Builder) {
				b.CopyTile(0, kir.C(0), kir.C(0))
			})
		}, kir.RuleInit, "copy_tile without its init: call copy_tile_to_dst_init_short first"},
		{"missing SFPU init", func() *kir.Program {
			return pipeline(ir.BF16, 1, false, cfg, func(b *kir.Builder) {
				b.CopyTileInit(0)
				b.CopyTile(0, kir.C(0), kir.C(0))
				b.SFPU(kir.SFPURecip, kir.C(0))
			})
		}, kir.RuleInit, "recip_tile without its init"},
		{"SFPU with math_approx_mode on", func() *kir.Program {
			approx := cfg
			approx.MathApproxMode = true
			approx.SFPU = sfpu.CodeLLK // tt-metal's calls take APPROX; tcc's programs do not
			return pipeline(ir.BF16, 1, false, approx, func(b *kir.Builder) {
				b.CopyTileInit(0)
				b.CopyTile(0, kir.C(0), kir.C(0))
				b.SFPUInit(kir.SFPUExp)
				b.SFPU(kir.SFPUExp, kir.C(0))
			})
		}, kir.RuleInit, "exp_tile with math_approx_mode on"},
		{"read beyond waited tiles", func() *kir.Program {
			return pipeline(ir.BF16, 1, false, cfg, func(b *kir.Builder) {
				b.CopyTileInit(0)
				b.CopyTile(0, kir.C(1), kir.C(0))
			})
		}, kir.RuleCBFlow, "reads tile 1 of CB c_0, but only 1 pages were waited for"},
		{"pack outside tile_regs_wait", func() *kir.Program {
			return pipeline(ir.BF16, 1, false, cfg, func(b *kir.Builder) {
				b.PackTile(kir.C(0), 16)
			})
		}, kir.RuleTileRegs, "pack_tile while DEST is acquired"},
		{"unpacker format mismatch", func() *kir.Program {
			p := kir.NewProgram("formats")
			rs := []ir.CoreRange{{}}
			p.AddCB(kir.CB{Index: 0, PageSize: 2048, Pages: 1, Format: ir.BF16, Cores: rs})
			p.AddCB(kir.CB{Index: 1, PageSize: 1088, Pages: 1, Format: ir.BFP8B, Cores: rs})
			p.AddCB(kir.CB{Index: 16, PageSize: 2048, Pages: 1, Format: ir.BF16, Cores: rs})
			rd := p.AddKernel(&kir.Kernel{Name: "reader", Role: kir.RoleReader, Processor: kir.RISCV1, Cores: rs})
			b := rd.Builder()
			for _, cb := range []int{0, 1} {
				b.CBReserveBack(cb, kir.C(1))
				b.CBPushBack(cb, kir.C(1))
			}
			cp := p.AddKernel(&kir.Kernel{Name: "compute", Role: kir.RoleCompute, Processor: kir.ComputeProc, Cores: rs, Compute: cfg})
			b = cp.Builder()
			b.HWStartup(0, 0, 16) // source B configured for c_0's bf16, not c_1's bfp8_b
			b.BinaryInit(kir.EltAdd, 0, 1)
			b.CBWaitFront(0, kir.C(1))
			b.CBWaitFront(1, kir.C(1))
			b.TileRegsAcquire()
			b.AddTiles(0, 1, kir.C(0), kir.C(0), kir.C(0))
			return p
		}, kir.RuleDataFormat, "add_tiles unpacks CB c_1 (bfp8_b) through source B, which is configured for bf16; call reconfig_data_format first"},
		{"misaligned DRAM read", func() *kir.Program {
			p := kir.NewProgram("misaligned")
			rs := []ir.CoreRange{{}}
			p.AddBuffer(kir.Buffer{Name: "a", Mem: ir.DRAM, DType: ir.BF16, Layout: ir.TileLayout, PageSize: 2048, Pages: 8})
			k := p.AddKernel(&kir.Kernel{Name: "reader", Role: kir.RoleReader, Processor: kir.RISCV1, Cores: rs})
			a, off := k.RuntimeArg("a"), k.RuntimeArg("off")
			k.SetRuntimeArgs(kir.Core{}, kir.BufferAddr("a", 0), kir.U32(32))
			k.Builder().NoCAsyncRead(kir.DRAMBankAddr{Bank: kir.C(1), Offset: kir.Add(a, off)}, kir.C(300032), kir.C(64))
			return p
		}, kir.RuleDRAMAlign, "is not 64-byte aligned"},
		{"DRAM read to a destination of another alignment", func() *kir.Program {
			// Row 1 of a bf16 tile's face 0 (offset 32) read on its own to
			// a 64-byte aligned destination: the card would shift it.
			p := kir.NewProgram("shifted")
			rs := []ir.CoreRange{{}}
			p.AddBuffer(kir.Buffer{Name: "a", Mem: ir.DRAM, DType: ir.BF16, Layout: ir.TileLayout, PageSize: 2048, Pages: 8})
			k := p.AddKernel(&kir.Kernel{Name: "reader", Role: kir.RoleReader, Processor: kir.RISCV1, Cores: rs})
			a := k.RuntimeArg("a")
			k.SetRuntimeArgs(kir.Core{}, kir.BufferAddr("a", 0))
			k.Builder().NoCAsyncRead(kir.DRAMBankAddr{Bank: kir.C(1), Offset: a}, kir.C(300032+32), kir.C(64))
			return p
		}, kir.RuleDRAMAlign, "must agree modulo 64"},
		{"partial DRAM page", func() *kir.Program {
			p := kir.NewProgram("partial")
			rs := []ir.CoreRange{{}}
			p.AddBuffer(kir.Buffer{Name: "a", Mem: ir.DRAM, DType: ir.BF16, Layout: ir.TileLayout, PageSize: 2048, Pages: 16})
			k := p.AddKernel(&kir.Kernel{Name: "reader", Role: kir.RoleReader, Processor: kir.RISCV1, Cores: rs})
			a := k.RuntimeArg("a")
			k.SetRuntimeArgs(kir.Core{}, kir.BufferAddr("a", 0))
			k.Builder().NoCAsyncRead(kir.DRAMBankAddr{Bank: kir.C(1), Offset: kir.Add(a, kir.C(1024))}, kir.C(300032), kir.C(2048))
			return p
		}, kir.RuleDRAMAlign, "reads neither whole pages nor within one page"},
		{"unallocated DRAM", func() *kir.Program {
			p := kir.NewProgram("wild")
			k := p.AddKernel(&kir.Kernel{Name: "reader", Role: kir.RoleReader, Processor: kir.RISCV1, Cores: []ir.CoreRange{{}}})
			k.Builder().NoCAsyncRead(kir.DRAMBankAddr{Bank: kir.C(1), Offset: kir.C(0x4000000)}, kir.C(300000), kir.C(64))
			return p
		}, kir.RuleMemory, "outside every allocated buffer"},
		{"block straddles the ring", func() *kir.Program {
			p := kir.NewProgram("straddle")
			rs := []ir.CoreRange{{}}
			p.AddCB(kir.CB{Index: 0, PageSize: 64, Pages: 3, Format: ir.BF16, Cores: rs})
			k := p.AddKernel(&kir.Kernel{Name: "reader", Role: kir.RoleReader, Processor: kir.RISCV1, Cores: rs})
			w := p.AddKernel(&kir.Kernel{Name: "writer", Role: kir.RoleWriter, Processor: kir.RISCV0, Cores: rs})
			b := k.Builder()
			b.For("i", kir.C(0), kir.C(3), func(kir.Var) {
				b.CBReserveBack(0, kir.C(2))
				b.CBPushBack(0, kir.C(2))
			})
			b = w.Builder()
			b.For("i", kir.C(0), kir.C(3), func(kir.Var) {
				b.CBWaitFront(0, kir.C(2))
				b.CBPopFront(0, kir.C(2))
			})
			return p
		}, kir.RuleCBFlow, "the block straddles the end of the ring"},
		{"NoC packet", func() *kir.Program {
			p := kir.NewProgram("big")
			k := p.AddKernel(&kir.Kernel{Name: "w", Role: kir.RoleWriter, Processor: kir.RISCV0, Cores: []ir.CoreRange{{}}})
			n := k.RuntimeArg("n")
			k.SetRuntimeArgs(kir.Core{}, kir.U32(20000))
			k.Builder().NoCAsyncWrite(kir.C(200000), kir.NoCAddr{X: kir.C(2), Y: kir.C(2), Addr: kir.C(400000)}, n)
			return p
		}, kir.RuleNoCPacket, "transfers 20000 bytes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.p()
			d := setup(t, p, nil)
			_, err := d.Run(p, kexec.RunOptions{})
			if err == nil {
				t.Fatal("Run succeeded")
			}
			var re *kir.RuleError
			if !errors.As(err, &re) || re.Rule != tc.want {
				t.Fatalf("Run returned %v, want a %s rule error", err, tc.want)
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error does not mention %q:\n%v", tc.msg, err)
			}
		})
	}
}

func TestDeterministicStats(t *testing.T) {
	run := func() *kexec.Stats {
		p := kirtest.EltwiseBinary(kir.EltSub, ir.BF16, 3, []kir.Core{{X: 0, Y: 0}, {X: 1, Y: 0}})
		d := setup(t, p, map[string][]float32{"a": randTiles(1, 6), "b": randTiles(2, 6)})
		return runOK(t, d, p)
	}
	a, b := run(), run()
	if diff := cmp.Diff(a, b); diff != "" {
		t.Errorf("stats differ between runs (-first +second):\n%s", diff)
	}
	if a.Steps == 0 || a.TileOps == 0 {
		t.Errorf("stats look empty: %+v", a)
	}
}

// TestAtomicBarrierRequired: a kernel that ends with a noc_semaphore_inc
// in flight is an error (the card may still be delivering the non-posted
// atomic when the next program starts); noc_async_atomic_barrier fixes it.
func TestAtomicBarrierRequired(t *testing.T) {
	build := func(barrier bool) *kir.Program {
		p := kir.NewProgram("inc")
		a, b := kir.Core{X: 0, Y: 0}, kir.Core{X: 1, Y: 0}
		p.AddSemaphore(kir.Semaphore{ID: 0, Cores: []ir.CoreRange{a.Range(), b.Range()}})
		k := p.AddKernel(&kir.Kernel{Name: "signal", Role: kir.RoleWriter, Processor: kir.RISCV0, Cores: []ir.CoreRange{a.Range()}})
		x, y := k.CommonArg("peer_x", kir.NoCX(b)), k.CommonArg("peer_y", kir.NoCY(b))
		kb := k.Builder()
		kb.NoCSemaphoreInc(kir.NoCAddr{X: x, Y: y, Addr: kir.GetSemaphore{ID: kir.C(0)}}, kir.C(1))
		if barrier {
			kb.NoCAsyncAtomicBarrier()
		}
		return p
	}
	_, err := kexec.NewDevice(bh).Run(build(false), kexec.RunOptions{})
	var re *kir.RuleError
	if !errors.As(err, &re) || re.Rule != kir.RuleAtomicBarrier {
		t.Fatalf("without the barrier: err = %v, want rule atomic-barrier", err)
	}
	if _, err := kexec.NewDevice(bh).Run(build(true), kexec.RunOptions{}); err != nil {
		t.Fatalf("with the barrier: %v", err)
	}
	p := build(false)
	p.Kernels[0].EndAtomics()
	if _, err := kexec.NewDevice(bh).Run(p, kexec.RunOptions{}); err != nil {
		t.Fatalf("after EndAtomics: %v", err)
	}
}

// TestUnwrittenL1IsGarbage: L1 never written reads as the garbage pattern
// (NaN as bf16 and fp32), not as zeros, so kernels that use stale L1 show.
func TestUnwrittenL1IsGarbage(t *testing.T) {
	d := kexec.NewDevice(bh)
	v, err := d.ReadL1(kir.Core{X: 3, Y: 4}, 300000, 8)
	if err != nil {
		t.Fatal(err)
	}
	for i, b := range v {
		want := byte(0xFF)
		if i%2 == 1 {
			want = 0x7F
		}
		if b != want {
			t.Fatalf("byte %d of never-written L1 = %#x, want the garbage pattern %#x", i, b, want)
		}
	}
}

// TestFP32UnpackToDest: copy_tile of a Float32 CB is exact only when the CB
// unpacks straight to DEST (UnpackToDestFp32); otherwise the value passes
// through source register A and is truncated to tf32, as on the card. An
// FPU op may not read a CB in that mode.
func TestFP32UnpackToDest(t *testing.T) {
	x := make([]float32, numerics.TileElems)
	for i := range x {
		x[i] = 1 + float32(i%7+1)*0x1p-20 // below tf32's 10 mantissa bits
	}
	copyBody := func(b *kir.Builder) {
		b.CopyTileInit(0)
		b.CopyTile(0, kir.C(0), kir.C(0))
	}
	run := func(p *kir.Program) ([]float32, error) {
		d := setup(t, p, map[string][]float32{"a": x})
		if _, err := d.Run(p, kexec.RunOptions{}); err != nil {
			return nil, err
		}
		return readTiles(t, d, "out"), nil
	}
	cfg := kir.ComputeConfig{MathFidelity: ir.HiFi4, FP32DestAccEn: true}
	got, err := run(pipeline(ir.FP32, 1, false, cfg, copyBody))
	if err != nil {
		t.Fatal(err)
	}
	if got[0] != numerics.TruncTF32(x[0]) || got[0] == x[0] {
		t.Errorf("default unpack mode: copy_tile gave %v, want the tf32 truncation %v of %v", got[0], numerics.TruncTF32(x[0]), x[0])
	}
	p := pipeline(ir.FP32, 1, false, cfg, copyBody)
	kir.Finish(p)
	if cp := p.Kernel("compute"); !cp.Compute.UnpacksToDest(0) {
		t.Fatalf("Finish did not set c_0 (fp32, copied only) to unpack to DEST: %v", cp.Compute.UnpackToDestFP32)
	}
	if got, err = run(p); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(x, got); diff != "" {
		t.Errorf("UnpackToDestFp32: copy_tile is not exact (-want +got):\n%s", diff)
	}
	// An FPU op reading a CB unpacked to DEST is an error.
	cfg.UnpackToDestFP32 = []int{0}
	_, err = run(pipeline(ir.FP32, 1, false, cfg, func(b *kir.Builder) {
		b.TransposeInit(0)
		b.TransposeTile(0, kir.C(0), kir.C(0))
	}))
	var re *kir.RuleError
	if !errors.As(err, &re) || re.Rule != kir.RuleUnpackMode {
		t.Errorf("transpose of an unpack-to-dest CB: err = %v, want rule unpack-mode", err)
	}
}

// TestFP32UnpackModeNeedsReconfig: the unpacker configured from a Float32
// CB that unpacks straight to DEST (destination format Float32) cannot
// read another Float32 CB through source A as tf32, nor the other way
// round: without reconfig_data_format between them the simulator stops,
// as ttsim does ("tensix_unpacr: unpack_to_dst=0 in_data_format=0
// out_data_format=0"); with it both run.
func TestFP32UnpackModeNeedsReconfig(t *testing.T) {
	cfg := kir.ComputeConfig{MathFidelity: ir.HiFi4, FP32DestAccEn: true, UnpackToDestFP32: []int{0}}
	copyA := func(b *kir.Builder) {
		b.CopyTileInit(0)
		b.CopyTile(0, kir.C(0), kir.C(0))
	}
	addB := func(b *kir.Builder) {
		b.BinaryInit(kir.EltAdd, 1, 1)
		b.BinaryTiles(kir.EltAdd, 1, 1, kir.C(0), kir.C(0), kir.C(1))
	}
	for _, tc := range []struct {
		name  string
		body  func(b *kir.Builder)
		fails bool // with rule data-format
	}{
		{"copy then add, no reconfig", func(b *kir.Builder) { b.ReconfigDataFormat(0, 1); copyA(b); addB(b) }, true},
		{"copy then add, reconfigured", func(b *kir.Builder) { b.ReconfigDataFormat(0, 1); copyA(b); b.ReconfigDataFormat(1, 1); addB(b) }, false},
		{"add then copy, no reconfig", func(b *kir.Builder) { b.ReconfigDataFormat(1, 1); addB(b); copyA(b) }, true},
		{"add then copy, reconfigured", func(b *kir.Builder) { b.ReconfigDataFormat(1, 1); addB(b); b.ReconfigDataFormat(0, 1); copyA(b) }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := pipeline(ir.FP32, 1, true, cfg, tc.body)
			d := setup(t, p, map[string][]float32{"a": randTiles(3, 1), "b": randTiles(4, 1)})
			_, err := d.Run(p, kexec.RunOptions{})
			var re *kir.RuleError
			switch {
			case !tc.fails && err != nil:
				t.Errorf("Run: %v, want no error", err)
			case tc.fails && (!errors.As(err, &re) || re.Rule != kir.RuleDataFormat):
				t.Errorf("Run: err = %v, want rule data-format", err)
			}
		})
	}
}

// TestWriteStaysInItsBuffer: a DRAM write addressed from buffer a's
// address but past a's pages (here into buffer b, allocated right after it)
// is an error naming a, not a silent overwrite of b.
func TestWriteStaysInItsBuffer(t *testing.T) {
	build := func(page uint32) *kir.Program {
		p := kir.NewProgram("overrun")
		core := kir.Core{}
		for _, n := range []string{"a", "b"} {
			p.AddBuffer(kir.Buffer{Name: n, Mem: ir.DRAM, DType: ir.BF16, Layout: ir.TileLayout, PageSize: 2048, Pages: 8})
		}
		p.AddCB(kir.CB{Index: 0, PageSize: 2048, Pages: 1, Format: ir.BF16, Cores: []ir.CoreRange{core.Range()}})
		k := p.AddKernel(&kir.Kernel{Name: "writer", Role: kir.RoleWriter, Processor: kir.RISCV0, Cores: []ir.CoreRange{core.Range()}})
		base := k.CommonArg("a_addr", kir.BufferAddr("a", 0))
		b := k.Builder()
		b.CBReserveBack(0, kir.C(1))
		b.NoCAsyncWrite(kir.GetWritePtr{CB: 0}, kir.InterleavedPageAddr(base, kir.C(page), 2048), kir.C(2048))
		b.NoCAsyncWriteBarrier()
		return p
	}
	run := func(p *kir.Program) error {
		d := kexec.NewDevice(bh)
		for _, b := range p.Buffers {
			if _, err := d.Alloc(b); err != nil {
				t.Fatal(err)
			}
		}
		_, err := d.Run(p, kexec.RunOptions{})
		return err
	}
	if err := run(build(7)); err != nil {
		t.Fatalf("the last page of a: %v", err)
	}
	err := run(build(8))
	var re *kir.RuleError
	if !errors.As(err, &re) || re.Rule != kir.RuleMemory || !strings.Contains(err.Error(), `leaves buffer "a"`) {
		t.Fatalf("page 8 of an 8-page buffer: err = %v, want a memory error naming buffer a", err)
	}
}

// TestMulticastCornerOrder: a multicast rectangle's corners must be in the
// order of the NoC it is issued on (kir.McastCorners): NoC 1 takes the
// bottom-right corner first. A card multicasts a rectangle in the wrong
// order to other cores (tt-metal's watcher refuses it), so the simulator
// must refuse it too.
func TestMulticastCornerOrder(t *testing.T) {
	src, lo, hi := kir.Core{X: 0, Y: 0}, kir.Core{X: 0, Y: 0}, kir.Core{X: 2, Y: 1}
	noc0 := kir.McastCorners(0, lo, hi)
	noc1 := kir.McastCorners(1, lo, hi)
	for _, tc := range []struct {
		name    string
		noc     int
		corners [4]kir.ArgValue
		sem     bool // noc_semaphore_set_multicast instead of a data multicast
		ok      bool
	}{
		{"noc0 data, noc0 order", 0, noc0, false, true},
		{"noc1 data, noc1 order", 1, noc1, false, true},
		{"noc1 sem, noc1 order", 1, noc1, true, true},
		{"noc1 data, noc0 order", 1, noc0, false, false},
		{"noc1 sem, noc0 order", 1, noc0, true, false},
		{"noc0 data, noc1 order", 0, noc1, false, false},
		{"noc0 sem, noc1 order", 0, noc1, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := kir.NewProgram("mcast_order")
			proc := kir.RISCV0
			if tc.noc == 1 {
				proc = kir.RISCV1
			}
			k := p.AddKernel(&kir.Kernel{Name: "sender", Role: kir.RoleWriter, Processor: proc, NoC: tc.noc, Cores: []ir.CoreRange{src.Range()}})
			x0, y0, x1, y1 := k.RuntimeArg("x0"), k.RuntimeArg("y0"), k.RuntimeArg("x1"), k.RuntimeArg("y1")
			k.SetRuntimeArgs(src, tc.corners[:]...)
			const at = 200000
			b := k.Builder()
			b.L1Write32(kir.C(at), kir.C(0x1234))
			dst := kir.MulticastAddr{X0: x0, Y0: y0, X1: x1, Y1: y1, Addr: kir.C(at)}
			if tc.sem {
				b.NoCSemaphoreSetMulticast(kir.C(at), dst, kir.C(5))
			} else {
				b.NoCAsyncWriteMulticast(kir.C(at), dst, kir.C(16), kir.C(5))
			}
			b.NoCAsyncWriteBarrier()
			d := kexec.NewDevice(bh)
			_, err := d.Run(p, kexec.RunOptions{})
			if tc.ok {
				if err != nil {
					t.Fatal(err)
				}
				v, rerr := d.ReadL1(kir.Core{X: 2, Y: 1}, at, 4)
				if rerr != nil {
					t.Fatal(rerr)
				}
				if got := uint32(v[0]) | uint32(v[1])<<8; got != 0x1234 {
					t.Errorf("far corner (2,1) holds %#x, want 0x1234", got)
				}
				return
			}
			var re *kir.RuleError
			if !errors.As(err, &re) || re.Rule != kir.RuleMcastRange {
				t.Fatalf("err = %v, want a %s rule error", err, kir.RuleMcastRange)
			}
			if !strings.Contains(err.Error(), fmt.Sprintf("NoC %d", tc.noc)) {
				t.Errorf("error %q does not name NoC %d", err, tc.noc)
			}
		})
	}
}

// TestNeverWrittenMemoryIsGarbage: DRAM and L1 a program never wrote read
// as the garbage pattern (0x7FFF per 16-bit half: NaN in bf16 and fp32),
// as a card leaves stale bytes there, not convenient zeros; so a kernel
// that writes only some rows of an output leaves visibly wrong padding.
func TestNeverWrittenMemoryIsGarbage(t *testing.T) {
	for _, mem := range []ir.MemKind{ir.DRAMInterleaved, ir.L1Interleaved} {
		t.Run(mem.String(), func(t *testing.T) {
			d := kexec.NewDevice(bh)
			if _, err := d.Alloc(kir.Buffer{Name: "b", PageSize: 2048, Pages: 9, DType: ir.BF16, Mem: ir.MemoryConfig{Kind: mem}}); err != nil {
				t.Fatal(err)
			}
			got, err := d.ReadPages("b", 0, 9)
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < len(got); i += 2 {
				if got[i] != 0xFF || got[i+1] != 0x7F {
					t.Fatalf("byte %d of a never-written %s buffer = %#x %#x, want the garbage pattern 0xff 0x7f", i, mem, got[i], got[i+1])
				}
			}
		})
	}
}
