package persist

import (
	"fmt"
	"slices"

	"github.com/tcc-dev/tcc/codegen"
	"github.com/tcc-dev/tcc/codegen/cpp"
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
)

// card is what Prepare adds to a persistent program for the card: the
// tables buffer, the images buffer and the estimated code of each merged
// kernel (as printed, with the arguments and defines Prepare gives it).
type card struct {
	tables, text kir.Buffer
	est          map[*kir.Kernel]kir.CodeEstimate
}

// cardBuffers computes p's card buffers (see Prepare) without changing p:
// a kernel that lacks the common arguments Prepare adds is estimated as a
// copy that has them. Errors: kir.Persist.Tables's, codegen/cpp's estimate's.
func cardBuffers(p *kir.Program, b *codegen.Build) (*card, error) {
	t := b.Target
	tables, err := p.Persist.Tables()
	if err != nil {
		return nil, fmt.Errorf("persist: program %q: %w", p.Name, err)
	}
	c := &card{est: map[*kir.Kernel]kir.CodeEstimate{}}
	// The kernels as Prepare leaves them: the tables hold their argument
	// vectors (kir.Tables.Args), the card arguments included.
	withArgs := *p
	withArgs.Kernels = make([]*kir.Kernel, len(p.Kernels))
	for i, k := range p.Kernels {
		kc := k
		if !k.OnEth() && k.LookupArg("persist_tables") == nil {
			cp := *k
			cp.Args = slices.Clone(k.Args)
			cp.Defines = MergeDefines(p, k)
			withCardArgs(&cp)
			kc = &cp
		}
		withArgs.Kernels[i] = kc
		pc, err := cpp.EstimatePersistentKernel(p, kc)
		if err != nil {
			return nil, err
		}
		c.est[k] = pc.Shared
	}
	c.tables = sharded(t, kir.TablesBuffer, tables.Bytes(&withArgs))
	img := kir.EstimatePersistentImages(p, t, func(k *kir.Kernel) kir.CodeEstimate { return c.est[k] })
	c.text = sharded(t, kir.TextBuffer, target.AlignUp(max(img.Bytes, kir.CtlStride), kir.CtlStride))
	return c, nil
}

// withCardArgs gives worker merged kernel k the common arguments
// persist_ctl and persist_tables (the control and tables buffers'
// addresses).
func withCardArgs(k *kir.Kernel) {
	if k.LookupArg("persist_ctl") == nil {
		k.CommonArg("persist_ctl", kir.BufferAddr(CtlBuffer, 0))
	}
	if k.LookupArg("persist_tables") == nil {
		k.CommonArg("persist_tables", kir.BufferAddr(kir.TablesBuffer, 0))
	}
}

// sharded is a uint32 L1 buffer of one n-byte page on every worker core.
func sharded(t *target.Target, name string, n int) kir.Buffer {
	grid := ir.CoreRange{X0: 0, Y0: 0, X1: t.GridX - 1, Y1: t.GridY - 1}
	return kir.Buffer{Name: name, DType: ir.UInt32, Layout: ir.RowMajorLayout, PageSize: n, Pages: t.GridX * t.GridY,
		Mem: ir.MemoryConfig{Kind: ir.L1HeightSharded, Shard: &ir.ShardSpec{Grid: grid, Shape: [2]int{1, n / 4}}}}
}

// earlyOver returns a *kir.RuleError (l1-budget) for the first phase of ps
// with early CBs whose CBs, placed as the simulator places them (early
// ones from its CBBase), end above top on some core; nil when all fit.
func earlyOver(t *target.Target, prog string, ps *kir.Persist, top uint64) error {
	for i := range ps.Phases {
		ph := &ps.Phases[i]
		if len(ph.EarlyCBs) == 0 {
			continue
		}
		for _, s := range placeSpans(t, uint64(ph.CBBase), ph.EarlyCBs, ph.CBs) {
			if s.Hi > top {
				c := s.Cores[0]
				return &kir.RuleError{Rule: kir.RuleL1Budget, Program: prog, Core: &c, CB: kir.NoCB,
					Msg: fmt.Sprintf("phase %d (%s) begins early: its CBs end at %#x, %d bytes above the %#x its L1 buffers leave (tables and images included)", i, ph.Name, s.Hi, s.Hi-top, top)}
			}
		}
	}
	return nil
}
