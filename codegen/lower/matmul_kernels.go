package lower

import (
	"fmt"
	"strconv"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower/blocks"
)

// The reader, compute and writer kernels of a fused matmul (the engine
// doc in matmul_engine.go).

// mmPartArgs are a part's reader arguments: its weights' page access, its
// width and the core's (start, count) of its columns.
type mmPartArgs struct {
	wAcc         []*blocks.Access
	nt           kir.ArgRef
	start, count kir.ArgRef
}

// reader adds the reader: per tile row the activation (or the prologue's
// inputs; nothing when multicast), then per part, per sub-block, the
// weight blocks of each slot and the epilogue's input tiles.
func (m *mmProgram) reader() error {
	m.rd = newReader(m.p, m.rs)
	rKt := m.rd.CompileArg("kt", uint32(m.kt))
	ab := &accessBinder{ctx: m.ctx}
	if m.norm != nil {
		m.norm.bindReader(ab, m.rd, m.act)
	}
	var aAcc *blocks.Access
	if m.norm == nil && !m.mcast {
		aAcc = ab.bind(m.rd, "a_addr", m.act)
	}
	inAcc := make([]*blocks.Access, len(m.inCB))
	for i, in := range m.epi.inputs() {
		inAcc[i] = ab.bind(m.rd, in.name+"_addr", in.v)
	}
	pas := make([]mmPartArgs, len(m.parts))
	for pi, pt := range m.parts {
		pa := &pas[pi]
		for slot, w := range pt.weights {
			pa.wAcc = append(pa.wAcc, ab.bind(m.rd, fmt.Sprintf("w%d_%d_addr", pi, slot), w))
		}
		pa.nt = m.rd.CompileArg(fmt.Sprintf("nt%d", pi), uint32(pt.nt))
		pa.start, pa.count = m.rd.RuntimeArg(fmt.Sprintf("start%d", pi)), m.rd.RuntimeArg(fmt.Sprintf("count%d", pi))
	}
	if ab.err != nil {
		return ab.err
	}
	b := m.rd.Builder()
	if m.norm != nil {
		blocks.ScalerTile(b, m.norm.scaler, 1)
	}
	rowLoop(b, m.rows, func(r kir.Expr) {
		if m.norm != nil {
			m.norm.readRow(b, m.fusedMatmul, r, rKt)
		} else if !m.mcast {
			blocks.ReadPagesBatch(b, aAcc, m.cbAct, m.rowPage(r, rKt, kir.C(0)), rKt)
		}
		for pi, pt := range m.parts {
			pa := pas[pi]
			b.ForStep("nb", kir.C(0), pa.count, kir.Ci(m.dest), func(nb kir.Var) {
				sb := subBlock(b, pa.count, nb, m.dest)
				col := b.Let("col", kir.Add(pa.start, nb))
				for slot, w := range pt.weights {
					m.readWeights(b, m.wCB[cbKey{slot, w.Type.DType}], pa.wAcc[slot], w.Type.DType.TileBytes(), rKt, pa.nt, col, sb)
				}
				for i, acc := range inAcc {
					blocks.ReadPages(b, acc, m.inCB[i], m.rowPage(r, pa.nt, col), sb)
				}
			})
		}
	})
	return nil
}

// readWeights emits the reads of the kt x sb weight tiles of sub-block
// columns [col, col+sb) of a weight nt tiles wide (tiles of tb bytes) into
// cb. Blocks of kbRows K rows of the sub-block's sb columns (a sub-block
// narrower than the plan's takes more rows, so every barrier waits for
// about as many tiles as a full one): every read of a block in flight, one
// barrier per block. A block always occupies kb x dest pages of the ring
// (a short last block or sub-block leaves pages unused), so blocks never
// straddle the ring's end.
func (m *mmProgram) readWeights(b *kir.Builder, cb int, acc *blocks.Access, tb int, kt, nt kir.Expr, col, sb kir.Var) {
	kr := kbRows(b, sb, m.kb, min(m.dest, m.plan.PerCore))
	b.ForStep("k0", kir.C(0), kt, kr, func(k0 kir.Var) {
		kc := blocks.BlockLenOf(b, "kc", kt, k0, kr)
		b.CBReserveBack(cb, kir.Ci(m.kb*m.dest))
		l1 := b.Let("l1", kir.GetWritePtr{CB: cb})
		b.For("k", kir.C(0), kc, func(kk kir.Var) {
			b.For("j", kir.C(0), sb, func(j kir.Var) {
				page := kir.Add(kir.Mul(kir.Add(k0, kk), nt), kir.Add(col, j))
				dst := kir.Add(l1, kir.Mul(kir.Add(kir.Mul(kk, sb), j), kir.Ci(tb)))
				b.NoCAsyncRead(acc.PageAddr(page), dst, kir.Ci(tb))
			})
		})
		b.NoCAsyncReadBarrier()
		b.CBPushBack(cb, kir.Ci(m.kb*m.dest))
	})
}

// compute adds the compute kernel: fp32 DEST, per tile row the prologue,
// then per part, per sub-block of at most dest output tiles, the products
// of each weight slot packed to the epilogue's CB and the epilogue.
func (m *mmProgram) compute() {
	m.cp = newCompute(m.p, m.rs, kir.ComputeConfig{MathFidelity: m.ctx.Fidelity, FP32DestAccEn: true})
	cKt := m.cp.CompileArg("kt", uint32(m.kt))
	c := blocks.NewCompute(m.p, m.cp)
	counts := make([]kir.ArgRef, len(m.parts))
	for pi := range m.parts {
		counts[pi] = m.cp.RuntimeArg(fmt.Sprintf("count%d", pi))
	}
	firstOut := m.outCB[m.parts[0].out.Type.DType]
	if m.norm != nil {
		m.norm.startup(c)
	} else {
		c.MatmulStartup(m.cbAct, m.wCB[cbKey{0, m.parts[0].weights[0].Type.DType}], firstOut)
	}
	computeRow := func() {
		if m.norm != nil {
			m.norm.row(c, cKt, m.kt)
		}
		for pi, pt := range m.parts {
			out := m.outCB[pt.out.Type.DType]
			// Enter the loop configured for the first product and its packing,
			// so a plain part's loop body keeps that configuration.
			c.PackConfig(m.epi.dst(0, out))
			c.ForStep("nb", kir.C(0), counts[pi], kir.Ci(m.dest), func(nb kir.Var) {
				sb := subBlock(c.B, counts[pi], nb, m.dest)
				for slot, w := range pt.weights {
					m.product(c, m.wCB[cbKey{slot, w.Type.DType}], m.epi.dst(slot, out), cKt, sb)
				}
				m.epi.compute(c, sb, m.inCB, out)
			})
		}
		c.B.CBWaitFront(m.cbAct, cKt)
		c.B.CBPopFront(m.cbAct, cKt)
	}
	if m.rows == 1 {
		computeRow()
	} else {
		c.For("r", kir.C(0), kir.Ci(m.rows), func(kir.Var) { computeRow() })
	}
	if m.norm != nil {
		c.B.CBPopFront(m.norm.scaler, kir.C(1))
	}
	m.cp.Define("MM_CORES", strconv.Itoa(m.plan.Cores))
	m.cp.Define("MM_TILES_PER_CORE", strconv.Itoa(m.plan.PerCore))
	m.cp.Define("MM_SUBBLOCK", strconv.Itoa(m.dest))
}

// product emits the sb tiles of one weight's products: the K loop over
// the weight blocks of wcb accumulating in DEST, then the sb tiles packed
// to dst (one page each).
func (m *mmProgram) product(c *blocks.Compute, wcb, dst int, kt kir.Expr, sb kir.Var) {
	cb := c.B
	// Block matmul: per K step the activation tile is unpacked once for
	// the sub-block's sb weight tiles.
	c.MatmulBlockConfig(m.cbAct, wcb, sb, kt)
	c.Acquire()
	kr := kbRows(cb, sb, m.kb, min(m.dest, m.plan.PerCore))
	c.ForStep("k0", kir.C(0), kt, kr, func(k0 kir.Var) {
		kc := blocks.BlockLenOf(cb, "kc", kt, k0, kr)
		// The activation arrives in chunks: wait for the pages this block
		// uses (immediate after the first sub-block).
		cb.CBWaitFront(m.cbAct, kir.Add(k0, kc))
		cb.CBWaitFront(wcb, kir.Ci(m.kb*m.dest))
		c.For("k", kir.C(0), kc, func(kk kir.Var) {
			c.MatmulBlock(m.cbAct, wcb, kir.Add(k0, kk), kir.Mul(kk, sb), kir.C(0), sb, kt)
		})
		cb.CBPopFront(wcb, kir.Ci(m.kb*m.dest))
	})
	c.Commit()
	c.Wait()
	c.PackConfig(dst)
	c.For("j", kir.C(0), sb, func(j kir.Var) {
		cb.CBReserveBack(dst, kir.C(1))
		c.Pack(j, dst)
		cb.CBPushBack(dst, kir.C(1))
	})
	c.Release()
}

// writer adds the writer: each part's tiles to its result, in order (per
// user row with users), after receiving the activation row by multicast
// when m.mcast. It returns the multicast's per-core writer arguments.
func (m *mmProgram) writer() (map[kir.Core][]kir.ArgValue, error) {
	m.wr = newWriter(m.p, m.rs)
	var mcastArgs map[kir.Core][]kir.ArgValue
	if m.mcast {
		aAcc, err := accessOf(m.ctx, m.wr, "a_addr", m.act)
		if err != nil {
			return nil, err
		}
		if mcastArgs, err = actMulticast(m.p, m.t, m.wr, m.cbAct, aAcc, m.kt, blocks.LiveRows(m.act.Type.Shape), m.cores, m.rs); err != nil {
			return nil, err
		}
	}
	wb := m.wr.Builder()
	ab := &accessBinder{ctx: m.ctx}
	oAccs := make([]*blocks.Access, len(m.parts))
	for pi, pt := range m.parts {
		oAccs[pi] = ab.bind(m.wr, fmt.Sprintf("out%d_addr", pi), pt.out)
	}
	if ab.err != nil {
		return nil, ab.err
	}
	wStarts, wCounts := make([]kir.ArgRef, len(m.parts)), make([]kir.ArgRef, len(m.parts))
	for pi := range m.parts {
		wStarts[pi], wCounts[pi] = m.wr.RuntimeArg(fmt.Sprintf("start%d", pi)), m.wr.RuntimeArg(fmt.Sprintf("count%d", pi))
	}
	rowLoop(wb, m.rows, func(r kir.Expr) {
		for pi, pt := range m.parts {
			ocb := m.outCB[pt.out.Type.DType]
			if m.users > 0 {
				writeUserRows(wb, oAccs[pi], ocb, m.users, pt.nt, blocks.ElemBytes(pt.out.Type.DType), wStarts[pi], wCounts[pi])
				continue
			}
			blocks.WritePages(wb, oAccs[pi], ocb, m.rowPage(r, kir.Ci(pt.nt), wStarts[pi]), wCounts[pi])
		}
	})
	return mcastArgs, nil
}

// setArgs sets every core's runtime arguments: the (start, count) of each
// part in its range for the reader and the writer (after the multicast's
// arguments), the counts for compute.
func (m *mmProgram) setArgs(mcastArgs map[kir.Core][]kir.ArgValue) {
	for i, core := range m.cores {
		s, n := m.ranges[i][0], m.ranges[i][1]
		off := 0
		var rv, cv []kir.ArgValue
		for _, pt := range m.parts {
			ps, pn := partRange(s, n, off, pt.nt)
			off += pt.nt
			rv = append(rv, kir.U32(uint32(ps)), kir.U32(uint32(pn)))
			cv = append(cv, kir.U32(uint32(pn)))
		}
		wv := rv
		if m.mcast {
			wv = append(append([]kir.ArgValue(nil), mcastArgs[core]...), rv...)
		}
		m.rd.SetRuntimeArgs(core, rv...)
		m.cp.SetRuntimeArgs(core, cv...)
		m.wr.SetRuntimeArgs(core, wv...)
	}
}
