package lower

import (
	"fmt"
	"strconv"

	"github.com/tcc-dev/tcc/codegen/kir"
)

// Row signal: a tile-row matmul's writers publish their rows as they
// complete, so that another part of the same program (the ring of a
// row-parallel projection's all-reduce, issue 31) may start on a row while
// the matmul computes the next. This is tt-metal's fused op signaler
// (ttnn/cpp/ttnn/operations/ccl/ccl_op_fusion.hpp MatmulFusedOpSignaler,
// kernel_common/worker_sync_utils.hpp OpSignaler): there the matmul's
// in1 writer calls synchronize_workers_and_signal_op once per batch of
// output; here every writer signals once per tile row, after that row's
// write barrier (blocks.WriteTilesLive ends each row with one), with one
// noc_semaphore_inc per receiver, so a receiver's count proves the row's
// writes landed.

// MatmulRowSignal asks a matmul's program (Context.RowSignal) to publish
// its output's tile rows.
//
// Postcondition of the program's writers: on every core of Cores,
// semaphore Sem+b counts Cores-per-block increments for each tile row of
// row block b that every core of that block has written (row blocks:
// planGrid; one block unless the plan splits the rows), rows in order:
// once the count reaches (j+1)*BlockCores(p), block b's rows
// b*coreRows .. b*coreRows+j are in DRAM. A program whose writer runs
// every row inside each sub-block (rowsInner: the rows complete only with
// the last sub-block) increments by its rows once, at the end. The
// matmul's program declares semaphores Sem .. Sem+blocks-1 (initial 0) on
// its own cores (the id's address, get_semaphore); the program that runs
// the matmul with receivers declares them on Cores.
type MatmulRowSignal struct {
	// Sem is the first semaphore id (block b uses Sem+b).
	Sem int
	// Cores are the receivers (worker or ethernet cores).
	Cores []kir.Core
	// Interleave, when above 1, orders each core's rows over that many
	// equal runs of its block's rows (the ring's lanes, which carry
	// contiguous shares of the tensor: issue 31): the core's j-th row is
	// row (j mod I)*(cr/I) + j/I of its block of cr rows (permRow), so
	// every run gets a row every I rows. Each row's products are the
	// same; only the order changes. cr must be a multiple of I.
	Interleave int
}

// interleave is the row signal's Interleave (1: rows in order).
func (m *mmProgram) interleave() int {
	if sig := m.ctx.RowSignal; sig != nil && sig.Interleave > 1 {
		return sig.Interleave
	}
	return 1
}

// permRow is the block row of a core's j-th row (MatmulRowSignal.Interleave;
// j itself without it).
func (m *mmProgram) permRow(j kir.Expr) kir.Expr {
	n := m.interleave()
	if n == 1 {
		return j
	}
	return kir.Add(kir.Mul(kir.Mod(j, kir.Ci(n)), kir.Ci(m.coreRows()/n)), kir.Div(j, kir.Ci(n)))
}

// permFunc is permRow for the activation multicast, nil without an
// interleave (the multicast's pages unchanged).
func (m *mmProgram) permFunc() func(kir.Expr) kir.Expr {
	if m.interleave() == 1 {
		return nil
	}
	return m.permRow
}

// PermutedRow is the block row a core with an Interleave of n over cr rows
// a block computes j-th (permRow's arithmetic, for receivers).
func PermutedRow(j, n, cr int) int {
	if n <= 1 {
		return j
	}
	return j%n*(cr/n) + j/n
}

// RowSignalBlocks returns, for a program lowered with a row signal, the
// row blocks its cores split the rows into and the cores of each block
// (the count a receiver's semaphore gains per row): the writer's
// MM_ROW_SIGNAL define.
func RowSignalBlocks(p *kir.Program) (blocks, cores int, err error) {
	for _, k := range p.Kernels {
		if v, ok := k.Defines["MM_ROW_SIGNAL"]; ok {
			if _, err := fmt.Sscanf(v, "%dx%d", &blocks, &cores); err != nil {
				return 0, 0, fmt.Errorf("MM_ROW_SIGNAL %q: %v", v, err)
			}
			return blocks, cores, nil
		}
	}
	return 0, 0, fmt.Errorf("program %s has no row signal (MM_ROW_SIGNAL)", p.Name)
}

// rowSignalArgs are the writer's row-signal runtime args: its block's
// semaphore id and the receivers' NoC coordinates.
type rowSignalArgs struct {
	sem  kir.ArgRef
	x, y []kir.ArgRef
}

// declareRowSignal declares the writer's row-signal args (after every
// other runtime arg of the writer: setArgs appends rowSignalValues last),
// or returns nil without a row signal. A matmul whose writer writes user
// rows or gathered rows has no tile rows to publish: an error.
func (m *mmProgram) declareRowSignal() *rowSignalArgs {
	sig := m.ctx.RowSignal
	if sig == nil {
		return nil
	}
	if m.users > 0 || len(m.epi.gathers()) > 0 || len(sig.Cores) == 0 {
		m.fail(fmt.Errorf("rule matmul-row-signal: %s: a row signal needs a matmul of tile rows (users %d, gathered epilogue inputs %d) and at least one receiver (%d)", m.op.Name(), m.users, len(m.epi.gathers()), len(sig.Cores)))
		return nil
	}
	// get_semaphore(id) on the writer's core names the address of the
	// receivers' semaphore id: the ids exist on the matmul's cores too
	// (tt-metal's OpSignaler semaphore likewise spans both sides).
	for b := range max(1, m.rowBlocks) {
		for _, s := range m.p.Semaphores {
			if s.ID == sig.Sem+b {
				m.fail(fmt.Errorf("rule matmul-row-signal: %s: the row signal's semaphore %d is one of the matmul's own", m.op.Name(), s.ID))
				return nil
			}
		}
		m.p.AddSemaphore(kir.Semaphore{ID: sig.Sem + b, Cores: m.rs})
	}
	if n := m.interleave(); m.coreRows()%n != 0 {
		m.fail(fmt.Errorf("rule matmul-row-signal: %s: %d tile rows a core do not split into %d equal runs (Interleave)", m.op.Name(), m.coreRows(), n))
		return nil
	}
	m.wr.Define("MM_ROW_SIGNAL", fmt.Sprintf("%dx%d", max(1, m.rowBlocks), len(m.cores)/max(1, m.rowBlocks)))
	a := &rowSignalArgs{sem: m.wr.RuntimeArg("row_signal_sem")}
	for i := range sig.Cores {
		s := "row_signal" + strconv.Itoa(i)
		a.x = append(a.x, m.wr.RuntimeArg(s+"_x"))
		a.y = append(a.y, m.wr.RuntimeArg(s+"_y"))
	}
	return a
}

// rowSignalValues are declareRowSignal's values for the writer of the
// i-th core (cores run block by block: planGrid).
func (m *mmProgram) rowSignalValues(i int) []kir.ArgValue {
	sig := m.ctx.RowSignal
	if sig == nil {
		return nil
	}
	block := i / (len(m.cores) / max(1, m.rowBlocks))
	vals := []kir.ArgValue{kir.U32(uint32(sig.Sem + block))}
	for _, c := range sig.Cores {
		vals = append(vals, kir.NoCX(c), kir.NoCY(c))
	}
	return vals
}

// emitRowSignal emits, after rows tile rows' write barrier, rows
// increments of the block's semaphore on every receiver.
func (a *rowSignalArgs) emit(b *kir.Builder, rows kir.Expr) {
	if a == nil {
		return
	}
	b.Comment("Row signal: this core's part of the row is in DRAM (the write barrier above); count it on every receiver.")
	for i := range a.x {
		b.NoCSemaphoreInc(kir.NoCAddr{X: a.x[i], Y: a.y[i], Addr: kir.GetSemaphore{ID: a.sem}}, rows)
	}
}

// finish waits for the row signal's increments to leave the core.
func (a *rowSignalArgs) finish(b *kir.Builder) {
	if a != nil {
		b.NoCAsyncAtomicBarrier()
	}
}
