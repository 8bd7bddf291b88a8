package lower

import (
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
)

// Resident weights: a prefill matmul (an activation of several tile rows,
// not per-user rows) whose every core's weight slice fits its L1 streams
// that slice once, not once per tile row.
//
// The reader moves the weights in row 0 only, in the blocks of the
// per-row path (so row 0's products start as blocks arrive), each block
// reserving exactly its kc x sb tiles; the weight CBs hold the core's
// whole slice of each (slot, dtype) and compute never pops them until the
// last row is done: per row it indexes the resident tiles from a running
// position (matmul_block's weight tile index), which is back at 0 at the
// start of every row. The accumulation order of every output tile is the
// per-row path's (K in order into fp32 DEST, one packing), so the results
// are bit for bit the same.
//
// With more than one core and no norm prologue the activation rows come
// by multicast (multicore.Rounds, one round per tile row, from the
// writer), into a ring of two rows when they fit next to the weights
// (the writer multicasts row r+1 before it writes row r's results, so
// compute never waits for the next row), else of one row (the writer
// multicasts row r, compute then waits for it at the start of each row).
// Without the multicast every core would read the whole activation: at a
// 256-token 27B step, 110 cores x 256 x 5120 bf16 is 288 MB next to the
// 45 MB of weights.
//
// When a slice does not fit (the CB plan exceeds the L1 budget), the
// program is the per-row one, planned again with its own costs.

// residentOK reports whether f may keep its weights resident: several
// tile rows of one activation (not users' rows).
func (f *fusedMatmul) residentOK() bool { return f.rows > 1 && f.users == 0 }

// residentPages is, per weight CB (cbKey), the most tiles one core's
// slice of the weights of that slot and dtype holds under ranges.
func (f *fusedMatmul) residentPages(ranges [][2]int) map[cbKey]int {
	most := map[cbKey]int{}
	for _, r := range ranges {
		per, off := map[cbKey]int{}, 0
		for _, pt := range f.parts {
			_, n := partRange(r[0], r[1], off, pt.nt)
			off += pt.nt
			for slot, w := range pt.weights {
				per[cbKey{slot, w.Type.DType}] += n * f.kt
			}
		}
		for k, n := range per {
			most[k] = max(most[k], n)
		}
	}
	return most
}

// actRing is the activation rows the resident program's activation CB
// holds: 2 when two rows fit next to the weight slices (weightBytes per
// core) and a margin for the other CBs, else 1.
func (m *mmProgram) actRing(weightBytes int) int {
	row := m.kt * m.act.Type.DType.TileBytes()
	if weightBytes+2*row+residentMargin <= m.ctx.Target.L1Budget() {
		return 2
	}
	return 1
}

// residentMargin is the L1 actRing leaves for the CBs besides the
// weights and the activation (results, epilogue inputs and scratch: a
// few DEST sub-blocks).
const residentMargin = 64 << 10

// weightSliceBytes is the L1 of the weight CBs of pages (residentPages).
func weightSliceBytes(t *target.Target, pages map[cbKey]int) int {
	n := 0
	for k, p := range pages {
		n += target.AlignUp(p*k.dt.TileBytes(), t.L1Align)
	}
	return n
}

// residentCosts are f's cost-model inputs for the resident program (f
// checked, rows > 1): per column each weight's tiles cross the NoC once
// while compute multiplies them once per row, so a column costs, per K
// tile and weight, the longer of the two; the epilogue runs per row; each
// core receives every activation row; DRAM reads every weight tile once
// and the activation once per column group (about two).
func (f *fusedMatmul) residentCosts(fid ir.MathFidelity) mmCosts {
	var c mmCosts
	bytes := 0
	for _, p := range f.parts {
		col := 0
		for _, w := range p.weights {
			col += f.kt * max(f.rows*(MatmulTileCycles(fid)+2*UnpackTileCycles), w.Type.DType.TileBytes()/NoCBytesPerCycle)
			bytes += p.nt * f.kt * w.Type.DType.TileBytes()
		}
		c.colCycles = max(c.colCycles, col)
		c.items += p.nt
	}
	c.colCycles += f.rows * f.epi.tileOps() * EltwiseTileCycles
	for _, in := range f.epi.inputs() {
		c.colCycles += f.rows * in.v.Type.DType.TileBytes() / NoCBytesPerCycle
	}
	actRow := f.kt * f.act.Type.DType.TileBytes()
	c.coreCycles = f.rows * actRow / NoCBytesPerCycle
	if f.norm != nil {
		c.coreCycles += f.rows * (f.kt*f.norm.w.Type.DType.TileBytes()/NoCBytesPerCycle + 4*f.kt*EltwiseTileCycles)
	}
	c.floorCycles = (bytes + 2*f.rows*actRow) / DRAMBytesPerCycle
	return c
}

// weightCBs is m's weight CBs in the order of their first weight.
func (m *mmProgram) weightCBs() []int {
	var cbs []int
	seen := map[int]bool{}
	for _, pt := range m.parts {
		for slot, w := range pt.weights {
			if cb := m.wCB[cbKey{slot, w.Type.DType}]; !seen[cb] {
				seen[cb] = true
				cbs = append(cbs, cb)
			}
		}
	}
	return cbs
}

// residentWeightPos declares, in compute, the running position of every
// weight CB in its resident tiles (0).
func (m *mmProgram) residentWeightPos(b *kir.Builder) map[int]kir.Var {
	pos := map[int]kir.Var{}
	for _, cb := range m.weightCBs() {
		pos[cb] = b.LetT("w_pos", kir.U32T, kir.C(0))
	}
	return pos
}
