package persist

import (
	"reflect"
	"slices"
	"sort"

	"github.com/tcc-dev/tcc/codegen"
	"github.com/tcc-dev/tcc/codegen/internal/insnspec"
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/target"
)

// Early begins (kir.EarlyBegin): on a worker core, the NCRISC thread of a
// phase M whose NCRISC kernel starts with statements that read only
// weights (firstTouch > 0; M's waits are lazy) begins M as soon as its own
// part of the phase S before M on the core is done, while the core's
// BRISC and compute threads still run S: a matmul's weight reader, idle
// at the end of a norm, of the GDN recurrence or of the gate/up matmul,
// streams its first weight blocks under them. (BRISC is the core's
// signaler: it counts S's end on the leader, so it never begins early.)
//
// The phases still live on the core when its NCRISC begins M are S (its
// BRISC and compute threads; all of S when S itself began early there:
// S's early CBs then hold weights S's compute has not read) and, when S
// began early, the phase R before S (its BRISC and compute). At most that:
// M does not begin early on a core where R began early too. On every core
// where M begins early:
//   - the CBs M's NCRISC kernel names (M's early CBs) must not be named by
//     a live kernel: M's CB indices that are are renumbered, in the whole
//     phase M (its CBs, every kernel's statements, its compute
//     configurations' CB lists), to indices neither M configures nor a
//     live kernel names (cbMaps);
//   - M's early CBs lie above every CB of S (kir.Phase.CBBase: the highest
//     end of S's CBs on those cores, which lie above R's when S began
//     early) and every CB of M ends below the L1 the program's L1 buffers
//     may take (l1Top, counting every L1 buffer on every core, and the
//     card's tables and images buffers, which Prepare adds: build plans
//     again with them reserved when the early CBs would reach them); M's other
//     CBs, installed once S ended on the whole core, are placed from the
//     unreserved base around the early ones (kir.PlaceCBs);
//   - M's early rings are earlyDepth times deeper when that fits.
//
// M begins early on no core when the renumbering or the L1 fails, or when
// its early rings offer less than minEarlyRing.

// minEarlyRing is the least ring space (bytes per core) the early CBs of
// a phase must offer: a phase whose early reads fit in less (a norm's
// gamma) gains little, and its early begin would keep the next phase, a
// matmul, from beginning early when the phase before it began early too.
const minEarlyRing = 32 << 10

// earlyRISC is the RISC that begins a phase early: the worker cores'
// weight readers run on NCRISC; BRISC signals.
const earlyRISC = kir.RISCV1

// planEarly decides the early begins of ps (appending to ps.Early, setting
// the phases' CBBase and renumbering their CBs) and returns, per phase,
// the CB renumbering its kernels' statements need (nil: none). reserve is
// L1 per core the early CBs must leave free below the program's buffers
// (the card's tables and images buffers, Prepare: build's second pass).
func planEarly(b *codegen.Build, ps *kir.Persist, kern func(p int, c kir.Core, proc kir.Processor) *kir.Kernel, fixed map[string]bool, bufs []kir.Buffer, reserve uint64) []map[int]int {
	t := b.Target
	n := len(ps.Phases)
	maps := make([]map[int]int, n)
	last := map[kir.Core]int{}
	prev := make([]map[kir.Core]int, n)
	for p := range ps.Phases {
		prev[p] = map[kir.Core]int{}
		for _, c := range ps.Phases[p].Cores {
			if c.IsEth() {
				continue
			}
			if q, ok := last[c]; ok {
				prev[p][c] = q
			}
			last[c] = p
		}
	}
	top := l1Top(t, bufs)
	top -= min(top, reserve)
	earlyOn := make([]map[kir.Core]bool, n)
	for p := range ps.Phases {
		ph := &ps.Phases[p]
		if !lazyPhase(ph, fixed) {
			continue
		}
		var cands []kir.Core
		use := map[int]bool{}
		forbid := map[int]bool{}
		for _, c := range ph.Cores {
			q, ok := prev[p][c]
			if !ok || c.IsEth() {
				continue
			}
			k := kern(p, c, earlyRISC)
			if k == nil || firstTouch(k, []kir.Core{c}, fixed) == 0 {
				continue
			}
			// The phases still live on c when its NCRISC begins p: q (its
			// BRISC and compute; all of it when q itself began early on c:
			// its NCRISC's CBs then hold data q's compute has not read),
			// and, when q began early, the phase r before q (its BRISC and
			// compute). No longer chains.
			live := []struct {
				q    int
				all  bool
				some bool
			}{{q, earlyOn[q][c], true}}
			if earlyOn[q][c] {
				r, ok := prev[q][c]
				if ok && earlyOn[r][c] {
					continue
				}
				if ok {
					live = append(live, struct {
						q    int
						all  bool
						some bool
					}{r, false, true})
				}
			}
			cands = append(cands, c)
			for i := range cbUse(k) {
				use[i] = true
			}
			for _, l := range live {
				procs := []kir.Processor{kir.RISCV0, kir.ComputeProc}
				if l.all {
					procs = append(procs, earlyRISC)
				}
				for _, proc := range procs {
					if o := kern(l.q, c, proc); o != nil {
						for i := range cbUse(o) {
							if to, ok := maps[l.q][i]; ok {
								i = to
							}
							forbid[i] = true
						}
					}
				}
			}
		}
		if len(cands) == 0 || len(use) == 0 || ringBytes(ph.CBs, use, cands[0]) < minEarlyRing {
			continue
		}
		configured := map[int]bool{}
		for _, cb := range ph.CBs {
			configured[cb.Index] = true
		}
		var names []int
		for i := range use {
			names = append(names, i)
		}
		sort.Ints(names)
		cm := map[int]int{}
		taken := map[int]bool{}
		for _, e := range names {
			if !forbid[e] {
				cm[e] = e
				taken[e] = true
			}
		}
		ok := true
		for _, e := range names {
			if _, done := cm[e]; done {
				continue
			}
			f := -1
			for i := 0; i < t.MaxCBs && f < 0; i++ {
				if !forbid[i] && !configured[i] && !taken[i] {
					f = i
				}
			}
			if f < 0 {
				ok = false
				break
			}
			cm[e], taken[f] = f, true
		}
		if !ok {
			continue
		}
		// M's CBs above S's on the early cores, below the buffers.
		base := uint64(0)
		byPrev := map[int][]kir.Core{}
		for _, c := range cands {
			q := prev[p][c]
			base = max(base, cbEnd(t, &ps.Phases[q], c))
			byPrev[q] = append(byPrev[q], c)
		}
		base = (base + 63) &^ 63
		cbs := remapCBs(ph.CBs, cm)
		var early []int
		for _, e := range names {
			early = append(early, cm[e])
		}
		sort.Ints(early)
		// Deeper rings for the early CBs (the reader runs further ahead),
		// earlyDepth times when the L1 allows.
		fits := false
		for k := earlyDepth; k >= 1 && !fits; k-- {
			deep := deepen(cbs, early, k)
			if placedEnd(t, base, early, deep) <= top {
				cbs, fits = deep, true
			}
		}
		if !fits {
			continue
		}
		ph.CBs, ph.CBBase, ph.EarlyCBs = cbs, uint32(base), early
		for i := range ph.Kernels {
			ph.Kernels[i].Compute.UnpackToDestFP32 = remapList(ph.Kernels[i].Compute.UnpackToDestFP32, cm)
		}
		var qs []int
		for q := range byPrev {
			qs = append(qs, q)
		}
		sort.Ints(qs)
		earlyOn[p] = map[kir.Core]bool{}
		for _, q := range qs {
			ps.Early = append(ps.Early, kir.EarlyBegin{Phase: p, Prev: q, Processor: earlyRISC, Cores: byPrev[q], CBs: early})
			for _, c := range byPrev[q] {
				earlyOn[p][c] = true
			}
		}
		for e, f := range cm {
			if e != f {
				if maps[p] == nil {
					maps[p] = map[int]int{}
				}
				maps[p][e] = f
			}
		}
	}
	return maps
}

// cbUse is the set of CB indices k's statements and expressions name.
func cbUse(k *kir.Kernel) map[int]bool {
	out := map[int]bool{}
	kir.Inspect(k.Body, func(s kir.Stmt) bool {
		for _, i := range kir.CBsOf(s) {
			out[i] = true
		}
		for _, e := range kir.StmtExprs(s) {
			for _, i := range kir.ExprCBs(e) {
				out[i] = true
			}
		}
		return true
	})
	return out
}

// placeSpans places cbs as the simulator places a phase's (kir.PlaceCBs:
// the CBs early from base first, the others from L1UnreservedBase; CBs
// backed by a buffer take no L1 of their own).
func placeSpans(t *target.Target, base uint64, early []int, cbs []kir.CB) []kir.CBSpan {
	addrs := kir.PlaceCBs(cbs, uint64(t.L1UnreservedBase), early, base)
	var out []kir.CBSpan
	for i, cb := range cbs {
		if cb.Backing != "" || cb.Bytes() <= 0 {
			continue
		}
		out = append(out, kir.CBSpan{Cores: kir.CoresOf(cb.Cores), Lo: addrs[i], Hi: addrs[i] + uint64(cb.Bytes())})
	}
	return out
}

// cbEnd is the end of phase ph's CBs on core c (L1UnreservedBase when it
// has none there).
func cbEnd(t *target.Target, ph *kir.Phase, c kir.Core) uint64 {
	end := uint64(t.L1UnreservedBase)
	for _, s := range placeSpans(t, uint64(ph.CBBase), ph.EarlyCBs, ph.CBs) {
		if slices.Contains(s.Cores, c) {
			end = max(end, s.Hi)
		}
	}
	return end
}

// placedEnd is the highest end of cbs placed with early from base on any
// core.
func placedEnd(t *target.Target, base uint64, early []int, cbs []kir.CB) uint64 {
	end := base
	for _, s := range placeSpans(t, base, early, cbs) {
		end = max(end, s.Hi)
	}
	return end
}

// l1Top bounds the L1 the program's CBs may use: the L1 size less every L1
// buffer's bytes per core (as if each had a page on every core).
func l1Top(t *target.Target, bufs []kir.Buffer) uint64 {
	used := 0
	for i := range bufs {
		b := &bufs[i]
		if b.Mem.Kind.IsDRAM() || b.PageSize <= 0 {
			continue
		}
		used += b.PagesPerCore(t.GridX, t.GridY)*target.AlignUp(b.PageSize, t.L1Align) + t.L1Align
	}
	return uint64(max(t.L1Size-used, 0))
}

func remapCBs(cbs []kir.CB, cm map[int]int) []kir.CB {
	out := append([]kir.CB(nil), cbs...)
	for i := range out {
		if f, ok := cm[out[i].Index]; ok {
			out[i].Index = f
		}
	}
	return out
}

func remapList(xs []int, cm map[int]int) []int {
	if xs == nil {
		return nil
	}
	out := make([]int, len(xs))
	for i, x := range xs {
		out[i] = x
		if f, ok := cm[x]; ok {
			out[i] = f
		}
	}
	sort.Ints(out)
	return out
}

// cbFields lists, by kir statement type name, the fields holding a CB
// index (insnspec: the instruction table kir's statements come from).
var cbFields = func() map[string][]string {
	out := map[string][]string{}
	for _, in := range insnspec.All() {
		for _, f := range in.Fields {
			if f.Kind == insnspec.CB {
				out[in.Go] = append(out[in.Go], f.Name)
			}
		}
	}
	return out
}()

// remapStmtCBs renumbers the CB fields of the statement copy v (a settable
// struct value) by cm.
func remapStmtCBs(v reflect.Value, cm map[int]int) {
	for _, name := range cbFields[v.Type().Name()] {
		f := v.FieldByName(name)
		if !f.IsValid() || f.Kind() != reflect.Int {
			continue
		}
		if to, ok := cm[int(f.Int())]; ok {
			f.SetInt(int64(to))
		}
	}
}

// ringBytes is the ring space of the CBs of cbs with an index in use on
// core c.
func ringBytes(cbs []kir.CB, use map[int]bool, c kir.Core) int {
	n := 0
	for _, cb := range cbs {
		if use[cb.Index] && cb.Backing == "" && kir.InRanges(cb.Cores, c) {
			n += cb.Bytes()
		}
	}
	return n
}

// earlyDepth is how many times deeper an early CB's ring is than the
// source program's, L1 permitting (else less deep): the reader then runs
// that much further ahead. The first four layers of the 27B decode at 1x2
// predict a GDN layer (in-projection end to the next one's) in 369.0 us at
// 2x, 363.4 us at 3x, 363.6 us at 4x.
const earlyDepth = 3

// deepen returns cbs with the rings of the CBs early k times as deep (a
// ring of whole blocks stays one of whole blocks).
func deepen(cbs []kir.CB, early []int, k int) []kir.CB {
	out := append([]kir.CB(nil), cbs...)
	for i := range out {
		if out[i].Backing == "" && slices.Contains(early, out[i].Index) {
			out[i].Pages *= k
		}
	}
	return out
}
