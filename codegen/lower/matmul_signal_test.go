package lower

import (
	"fmt"
	"slices"
	"testing"

	"github.com/tcc-dev/tcc/codegen/cpp"
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower/blocks"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/ir/longtest"
	"github.com/tcc-dev/tcc/sim/kexec"
	"github.com/tcc-dev/tcc/sim/timing"
)

// TestMatmulRowSignalOnSim lowers prefill matmuls with a row signal
// (MatmulRowSignal) to a receiver core outside the matmul's cores and
// adds a receiver kernel there that, row by row, waits for its block's
// count (RowSignalBlocks) and then copies that tile row of the result
// from DRAM to a second buffer. On the simulator the copy must equal the
// result bit for bit: every row the receiver was told of is in DRAM.
// Without the signal the receiver waits forever (the simulator reports
// the deadlock). Cases: one row block with a ring of activation rows, two
// row blocks (one semaphore each), and every row inside each sub-block
// (rowsInner: one increment of all the rows at the end); interleaved rows
// (MatmulRowSignal.Interleave), which the receiver copies in that order:
// a matmul computing them in order fails (the receiver copies a row not
// yet written).
func TestMatmulRowSignalOnSim(t *testing.T) {
	cases := []struct {
		name      string
		tgt       *target.Target
		rows, k   int
		n         int
		rowBlocks int
		inner     bool
		long      bool
		// interleave is MatmulRowSignal.Interleave.
		interleave int
	}{
		{"ring_of_one_row", rowSignalL1(), 96, 512, 32, 1, false, true, 0},
		// two row blocks of four rows, each in the order 0, 2, 1, 3 (two runs of two)
		{"interleaved", rowSignalL1(), 256, 512, 32, 2, false, false, 2},
		{"row_blocks_interleaved", smallL1(), 256, 1536, 96, 2, false, true, 2},
		{"four_row_blocks", quadL1(), 128, 512, 192, 4, false, true, 0},
		{"ring_of_rows", smallL1(), 96, 2048, 64, 1, false, true, 0},
		{"row_blocks_ring_of_one", smallL1(), 128, 1536, 96, 2, false, true, 0},
		{"rows_inner", target.Blackhole(), 96, 256, 128, 1, true, true, 3},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.long {
				longtest.Skip(t, "a further row-signal variant on the simulator")
			}
			// the receiver: a core of a further row of the grid, or the
			// grid's last core when the grid is whole
			tgt := *tc.tgt
			recv := kir.Core{X: tgt.GridX - 1, Y: tgt.GridY - 1}
			if tgt.GridY < target.Blackhole().GridY {
				tgt.GridY++
				recv = kir.Core{X: 0, Y: tgt.GridY - 1}
			}
			op := fcBuild(t, func(b *ir.Builder) []*ir.Value {
				return one(b.Matmul(fcIn(b, "a", ir.BF16, 1, tc.rows, tc.k), fcW(b, "w", ir.BFP8B, tc.k, tc.n)))
			})
			plain, err := Lower(op, NewContext(tc.tgt))
			if err != nil {
				t.Fatal(err)
			}
			sem := 0
			for _, s := range plain.Semaphores {
				sem = max(sem, s.ID+1)
			}
			ctx := NewContext(tc.tgt)
			ctx.RowSignal = &MatmulRowSignal{Sem: sem, Cores: []kir.Core{recv}, Interleave: tc.interleave}
			ctx.Validate = func(*kir.Program) error { return nil } // the receiver's core is outside tc.tgt: validated on tgt below
			p, err := Lower(op, ctx)
			if err != nil {
				t.Fatal(err)
			}
			if slices.Contains(p.Cores(), recv) {
				t.Fatalf("receiver %v is one of the matmul's cores", recv)
			}
			nb, per, err := RowSignalBlocks(p)
			if err != nil {
				t.Fatal(err)
			}
			if nb != tc.rowBlocks || per*nb != len(p.Cores()) {
				t.Fatalf("MM_ROW_SIGNAL %dx%d on %d cores; want %d row blocks over all of them", nb, per, len(p.Cores()), tc.rowBlocks)
			}
			if got := actHoldsAllRows(op, p); got != tc.inner {
				t.Fatalf("the activation CB holds every row (rowsInner): %v, want %v", got, tc.inner)
			}
			addRowReceiver(t, &tgt, p, op, recv, sem, nb, per, max(1, tc.interleave), false)
			if err := kir.Validate(p, &tgt); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			for _, k := range p.Kernels {
				if _, err := cpp.PrintKernel(p, k); err != nil {
					t.Fatalf("printing kernel %s: %v", k.Name, err)
				}
			}
			args := fcArgs(op, uint64(4100+i))
			want := refEval(t, op, args)
			d := kexec.NewDevice(&tgt)
			for _, b := range p.Buffers {
				if _, err := d.Alloc(b); err != nil {
					t.Fatal(err)
				}
			}
			for j, v := range op.Operands {
				if err := upload(d, ctx.BufferName(v), v, args[j]); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := d.Run(p, kexec.RunOptions{}); err != nil {
				t.Fatalf("Run: %v", err)
			}
			r := op.Results[0]
			got, err := download(d, ctx.BufferName(r), r)
			if err != nil {
				t.Fatal(err)
			}
			cp, err := download(d, "row_copy", r)
			if err != nil {
				t.Fatal(err)
			}
			info := fmt.Sprintf("%d cores, %d row blocks", len(p.Cores()), nb)
			fcCompare(t, "result", want[0].Data, got, info)
			fcCompare(t, "the receiver's row copies", got, cp, info)
		})
	}
}

// addRowReceiver adds to p, on core recv, semaphores sem..sem+nb-1 and a
// kernel that copies op's result row by row to buffer row_copy once the
// row's block counts per increments for it (waitAll: once its block's
// every row is counted, before its first row); the j-th row counted in a
// block is its row PermutedRow(j, il, rows a block).
func addRowReceiver(t *testing.T, tgt *target.Target, p *kir.Program, op *ir.Op, recv kir.Core, sem, nb, per, il int, waitAll bool) {
	t.Helper()
	r := op.Results[0]
	var out kir.Buffer
	for _, b := range p.Buffers {
		if b.Name == NewContext(tgt).BufferName(r) {
			out = b
		}
	}
	cp := out
	cp.Name = "row_copy"
	p.AddBuffer(cp)
	rg := []ir.CoreRange{{X0: recv.X, Y0: recv.Y, X1: recv.X, Y1: recv.Y}}
	for b := range nb {
		p.AddSemaphore(kir.Semaphore{ID: sem + b, Cores: rg})
	}
	cb := p.AddCB(kir.CB{Index: 0, PageSize: out.PageSize, Pages: 1, Format: r.Type.DType, Cores: rg, Name: "row_copy"})
	k := p.AddKernel(&kir.Kernel{Name: "row_receiver", Role: kir.RoleReader, Processor: kir.RISCV1, NoC: 1, Cores: rg})
	src, err := blocks.NewAccess(k, tgt, "out_addr", out)
	if err != nil {
		t.Fatal(err)
	}
	dst, err := blocks.NewAccess(k, tgt, "copy_addr", cp)
	if err != nil {
		t.Fatal(err)
	}
	rows, nt := r.Type.Shape.Rows2D()/ir.TileSize, r.Type.Shape.Cols2D()/ir.TileSize
	b := k.Builder()
	b.For("blk", kir.C(0), kir.Ci(nb), func(blk kir.Var) {
		if waitAll {
			b.NoCSemaphoreWaitMin(kir.GetSemaphore{ID: kir.Add(kir.Ci(sem), blk)}, kir.Ci(rows/nb*per))
		}
		b.For("j", kir.C(0), kir.Ci(rows/nb), func(j kir.Var) {
			b.NoCSemaphoreWaitMin(kir.GetSemaphore{ID: kir.Add(kir.Ci(sem), blk)}, kir.Mul(kir.Add(j, kir.C(1)), kir.Ci(per)))
			cr := rows / nb
			row := kir.Add(kir.Mul(blk, kir.Ci(cr)), kir.Add(kir.Mul(kir.Mod(j, kir.Ci(il)), kir.Ci(cr/il)), kir.Div(j, kir.Ci(il))))
			b.For("c", kir.C(0), kir.Ci(nt), func(c kir.Var) {
				page := kir.Add(kir.Mul(row, kir.Ci(nt)), c)
				blocks.ReadPage(b, src, cb, page)
				blocks.WritePage(b, dst, cb, page)
			})
		})
	})
}

// actHoldsAllRows reports whether p's activation CB holds every tile row
// of op's activation (the resident program's rowsInner).
func actHoldsAllRows(op *ir.Op, p *kir.Program) bool {
	s := op.Operands[0].Type.Shape
	for _, cb := range p.CBs {
		if cb.Name == "act" {
			return cb.Pages == s.Rows2D()/ir.TileSize*(s.Cols2D()/ir.TileSize)
		}
	}
	return false
}

// rowSignalL1 is smallGrid with 130 KiB of L1 per core for CBs: a
// [1, 96, 512] activation's rows (32 KiB each) then come in a ring of
// one next to the weights and actRing's margin, at a small K.
func rowSignalL1() *target.Target {
	t := smallGrid()
	t.L1Size = t.L1UnreservedBase + 130<<10
	return t
}

// TestMatmulRowSignalOverlapPredicted predicts, with the timing model, a
// matmul of 8 tile rows ([1, 256, 2048] x [2048, 32] bfp8_b, a ring of
// activation rows) with a row signal and a receiver that copies each row
// as it is counted (addRowReceiver), against the same receiver waiting
// for every row first: the row-by-row receiver must end at most 0.8x as
// long after the matmul's writers (predicted: 4.0 us against 6.25 us;
// the receiver's one-tile copies, read then write under their own
// barriers, take ~0.8 us a row, so at this size most rows still land
// faster than it copies). A signal that counted the rows only at the end
// would make the two the same.
func TestMatmulRowSignalOverlapPredicted(t *testing.T) {
	tgt := smallL1()
	tgt.GridY++
	recv := kir.Core{X: 0, Y: tgt.GridY - 1}
	op := fcBuild(t, func(b *ir.Builder) []*ir.Value {
		return one(b.Matmul(fcIn(b, "a", ir.BF16, 1, 256, 2048), fcW(b, "w", ir.BFP8B, 2048, 32)))
	})
	tail := func(waitAll bool) (exposed float64) {
		ctx := NewContext(smallL1())
		ctx.RowSignal = &MatmulRowSignal{Sem: 8, Cores: []kir.Core{recv}}
		ctx.Validate = func(*kir.Program) error { return nil }
		p, err := Lower(op, ctx)
		if err != nil {
			t.Fatal(err)
		}
		if actHoldsAllRows(op, p) {
			t.Fatal("the activation CB holds every row: want a ring (rows signalled one by one)")
		}
		nb, per, err := RowSignalBlocks(p)
		if err != nil {
			t.Fatal(err)
		}
		addRowReceiver(t, tgt, p, op, recv, 8, nb, per, 1, waitAll)
		if err := kir.Validate(p, tgt); err != nil {
			t.Fatalf("Validate: %v", err)
		}
		pt, err := timing.Simulate(p, tgt, timing.Default(), timing.Options{})
		if err != nil {
			t.Fatal(err)
		}
		var mm, rc float64
		for _, k := range pt.Devices[0].Kernels {
			switch k.Kernel {
			case "row_receiver":
				rc = k.FinishUS
			case "writer":
				mm = max(mm, k.FinishUS)
			}
		}
		t.Logf("waitAll %v: the matmul's writers end at %.2f us, the receiver at %.2f us", waitAll, mm, rc)
		return rc - mm
	}
	rowByRow, all := tail(false), tail(true)
	if rowByRow > 0.8*all {
		t.Errorf("the row-by-row receiver ends %.2f us after the matmul, the one waiting for every row %.2f us: want at most 0.8x", rowByRow, all)
	}
}
