package lower

import (
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/ir"
)

// Cost-model constants, in Tensix cycles at 1.35 GHz. They are estimates
// from reference/blackhole.md, good enough to choose a core count, not to
// predict time.
const (
	// DispatchCycles is what one more core adds to launching a program
	// (its launch message and runtime arguments).
	DispatchCycles = 60
	// NoCBytesPerCycle is one core's sustained NoC read rate (~61 B/cycle
	// measured for large reads).
	NoCBytesPerCycle = 61
	// DRAMBytesPerCycle is the chip's sustained DRAM rate (~430 GB/s).
	DRAMBytesPerCycle = 318
	// EltwiseTileCycles is the FPU or SFPU time of one eltwise tile op.
	EltwiseTileCycles = 32
	// UnpackTileCycles is the unpacker time of one operand tile, the value
	// sim/timing fits on the measured decode matmuls (its unpack_tile
	// parameter; TestPlanMatchesTimingModel keeps the two equal). The
	// matmul plans still charge two such unpacks in series with each tile
	// product, more than sim/timing now predicts (its matmul_unpack_tile
	// overlaps the products): a conservative weight on compute that keeps
	// the plans, and so the builds, as they were.
	UnpackTileCycles = 59
	// PackTileCycles is the packer time of one tile from fp32 DEST.
	PackTileCycles = 64
	// DRAMReadLatencyCycles and L1ReadLatencyCycles are the round trips of
	// one 2 KiB NoC read from DRAM and from another core's L1 (sim/timing's
	// latency tables at 2 KiB): what a reader pays per barrier when it has
	// one page in flight.
	DRAMReadLatencyCycles = 538
	L1ReadLatencyCycles   = 414
	// FillStoreCycles is one word store of a fill loop with its loop
	// step (sim/timing: a few scalar statements of 2 cycles).
	FillStoreCycles = 8
)

// MatmulTileCycles is the time of one 32x32x32 tile product at fidelity f:
// 16 cycles per multiplier pass (LoFi 1 pass ... HiFi4 4 passes).
func MatmulTileCycles(f ir.MathFidelity) int {
	if n := f.Passes(); n > 0 {
		return 16 * n
	}
	return 64
}

// Split is a division of Items work items over Cores cores: core i (in
// row-major grid order) takes items [i*PerCore, min((i+1)*PerCore, Items)).
// Every core gets at least one item.
type Split struct {
	Items, Cores, PerCore int
	// Cost is the model's estimate for this split, in cycles.
	Cost int
	// Bounds, when set (Cores+1 ascending entries from 0 to Items),
	// gives core i the items Bounds[i]..Bounds[i+1]-1 instead of PerCore
	// each (Balance).
	Bounds []int
}

// Range is the first item and the item count of core i.
func (s Split) Range(i int) (start, count int) {
	if s.Bounds != nil {
		return s.Bounds[i], s.Bounds[i+1] - s.Bounds[i]
	}
	start = i * s.PerCore
	return start, min(s.PerCore, s.Items-start)
}

// Balance returns s with Bounds that split its items, in order, into
// s.Cores contiguous ranges whose largest total weight (weight(i) > 0 of
// item i) is the least possible: a core's share of items that cost more
// (a prefill prologue's k items against its gate items) is smaller.
func (s Split) Balance(weight func(i int) int) Split {
	if s.Cores < 1 || s.Items < 1 {
		return s
	}
	w := make([]int, s.Items)
	lo, hi := 0, 0
	for i := range w {
		w[i] = max(weight(i), 1)
		lo, hi = max(lo, w[i]), hi+w[i]
	}
	// fits reports whether ranges of at most load each cover the items
	// with s.Cores cores, and fills bounds.
	bounds := make([]int, s.Cores+1)
	fits := func(load int) bool {
		c, sum := 0, 0
		for i, x := range w {
			if sum+x > load {
				c++
				if c >= s.Cores {
					return false
				}
				bounds[c], sum = i, 0
			}
			sum += x
		}
		for c++; c <= s.Cores; c++ {
			bounds[c] = s.Items
		}
		return true
	}
	for lo < hi {
		if mid := (lo + hi) / 2; fits(mid) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	fits(lo)
	s.Bounds = bounds
	return s
}

// SetArgs gives core i of cores its share (start, count) = Range(i) as the
// runtime args (start, count) of rd and of wr and (count) of cp unless cp
// is nil.
func (s Split) SetArgs(cores []kir.Core, rd, cp, wr *kir.Kernel) {
	for i, c := range cores {
		st, n := s.Range(i)
		rd.SetRuntimeArgs(c, kir.U32(uint32(st)), kir.U32(uint32(n)))
		if cp != nil {
			cp.SetRuntimeArgs(c, kir.U32(uint32(n)))
		}
		wr.SetRuntimeArgs(c, kir.U32(uint32(st)), kir.U32(uint32(n)))
	}
}

// PlanSplit chooses how many of at most maxCores cores share items work
// items, minimising
//
//	cost(n) = n*DispatchCycles + max(ceil(items/n)*itemCycles + perCoreCycles, floorCycles)
//
// (see the package doc); ties go to fewer cores. Only core counts that give
// every core at least one item are considered. items and maxCores must be
// positive.
func PlanSplit(items, maxCores, itemCycles, perCoreCycles, floorCycles int) Split {
	return planSplitBy(items, maxCores, func(n, per int) int {
		return n*DispatchCycles + max(per*itemCycles+perCoreCycles, floorCycles)
	})
}

// SpreadBanks is s (an even split, Bounds nil) with the fewest cores of
// at least s.Cores and at most maxCores whose per-core item count is
// coprime with banks (then the fewest below s.Cores; s when there is
// none), its Cost unchanged. Interleaved pages are dealt to the banks in
// turn, so cores whose first items lie per apart read their one-page
// operands' first pages from banks c*per mod banks: every bank when per
// is coprime with banks, only banks/gcd(per, banks) of them when it is
// not, and the cores, stepping through their items together, then queue
// on those few banks for the whole program (gdn_chunk_prep at 4,096
// tokens, predicted: 1,012 us at 40 items a core, 827 at 39).
func SpreadBanks(s Split, maxCores, banks int) Split {
	if s.Bounds != nil || banks <= 1 || s.Items <= 0 {
		return s
	}
	ok := func(n int) (Split, bool) {
		per := (s.Items + n - 1) / n
		if (s.Items+per-1)/per != n || gcd(per, banks) != 1 {
			return Split{}, false
		}
		return Split{Items: s.Items, Cores: n, PerCore: per, Cost: s.Cost}, true
	}
	for n := s.Cores; n <= min(maxCores, s.Items); n++ {
		if t, found := ok(n); found {
			return t
		}
	}
	for n := s.Cores - 1; n >= 1; n-- {
		if t, found := ok(n); found {
			return t
		}
	}
	return s
}

// gcd is the greatest common divisor of two positive ints.
func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// planSplitBy is the core count of at most maxCores minimising cost(n,
// per) over the counts that give every core at least one of items items
// (per = ceil(items/n)); ties go to fewer cores.
func planSplitBy(items, maxCores int, cost func(n, per int) int) Split {
	best := Split{}
	for n := 1; n <= min(items, maxCores); n++ {
		per := (items + n - 1) / n
		used := (items + per - 1) / per
		if used != n {
			continue // the same per-core load is reached with fewer cores
		}
		c := cost(n, per)
		if best.Cores == 0 || c < best.Cost {
			best = Split{Items: items, Cores: n, PerCore: per, Cost: c}
		}
	}
	return best
}

// NormGatherCycles is what one more partial adds to a split-row norm's
// combine on the core that adds it: unpacking the partial tile to DEST and
// one SFPU add.
const NormGatherCycles = UnpackTileCycles + EltwiseTileCycles

// NormHopCycles is what the second level of a two-level combine adds to
// the critical path besides its adds: a sub-leader packs its sum, writes
// it to the leader (about one L1 round trip with its acknowledgement) and
// increments the leader's semaphore.
const NormHopCycles = PackTileCycles + L1ReadLatencyCycles

// normGatherPath is the critical path of combining n partials with
// subgroups of fan cores (multicore.Exchange.Fan; fan >= n: one level):
// on one level n adds, on two the fan adds of subgroup 0 (the others run
// alongside), the hop and the leader's ceil(n/fan)-1 adds of the
// subgroups' sums.
func normGatherPath(n, fan int) int {
	if fan <= 0 || fan >= n {
		return n * NormGatherCycles
	}
	subs := (n + fan - 1) / fan
	return (fan+subs-1)*NormGatherCycles + NormHopCycles
}

// NormExchangeFan is the subgroup size with the shortest combine of a
// group of n cores (normGatherPath), 0 when one level is as short: a
// two-level tree pays from about 12 cores, with subgroups of about
// sqrt(n). Ties go to one level, then to the larger subgroups.
func NormExchangeFan(n int) int {
	best, fan := normGatherPath(n, n), 0
	for f := n - 1; f >= 1; f-- {
		if c := normGatherPath(n, f); c < best {
			best, fan = c, f
		}
	}
	return fan
}

// PlanNormSplit is the split of one tile row of wt tiles over at most
// maxCores cores of a split-row norm (norm.go), minimising
//
//	cost(n) = n*DispatchCycles + gather(n) + ceil(wt/n)*tileCycles
//
// where tileCycles is one tile's compute on a core and gather(n) the
// critical path of the combine on NormExchangeFan(n)'s tree
// (normGatherPath): every core works on its chunk in parallel, then the
// partial sums are added. Ties go to fewer cores.
func PlanNormSplit(wt, maxCores, tileCycles int) Split {
	return planSplitBy(wt, maxCores, func(n, per int) int {
		return n*DispatchCycles + normGatherPath(n, NormExchangeFan(n)) + per*tileCycles
	})
}

// PlanMatmul is the split of a decode matmul's nt output tile columns over
// the worker cores: each output tile costs kt tile products with the unpack
// of both operand tiles (or the NoC time of its kt weight tiles, whichever
// is longer), each core also reads the kt activation tiles, and all cores
// together cannot beat DRAM reading kt*nt weight tiles.
func PlanMatmul(kt, nt, maxCores int, w, a ir.DType, f ir.MathFidelity) Split {
	perTile := max(MatmulTileCycles(f)+2*UnpackTileCycles, w.TileBytes()/NoCBytesPerCycle)
	perCore := kt * a.TileBytes() / NoCBytesPerCycle
	floor := kt * nt * w.TileBytes() / DRAMBytesPerCycle
	return PlanSplit(nt, maxCores, kt*perTile, perCore, floor)
}

// planStream splits tiles over the grid for a program whose reader moves
// one tile of each of reads operands per barrier (blocks.ReadPage,
// blocks.Gather), in turn, and whose compute spends computeCycles on each
// result tile: a core's tile costs the longest of its compute, its NoC
// transfer of bytesPerTile and one DRAM round trip per operand read (the
// reader has one tile in flight), and all cores together cannot beat DRAM
// moving every tile's bytes. A split by NoC time alone stops at a handful
// of cores (a [1,256,10240] SiLU took 6: 440 us predicted, where the
// SFPU's ~1,000 cycles per tile want the grid).
func planStream(tiles, maxCores, bytesPerTile, reads, computeCycles int) Split {
	perTile := max(computeCycles, bytesPerTile/NoCBytesPerCycle, max(reads, 1)*DRAMReadLatencyCycles)
	floor := tiles * bytesPerTile / DRAMBytesPerCycle
	return PlanSplit(tiles, maxCores, perTile, 0, floor)
}

// planEltwise splits tiles over the grid for an op that streams bytesPerTile
// bytes per tile through a core.
func planEltwise(tiles, maxCores, bytesPerTile int) Split {
	perTile := max(EltwiseTileCycles, bytesPerTile/NoCBytesPerCycle)
	floor := tiles * bytesPerTile / DRAMBytesPerCycle
	return PlanSplit(tiles, maxCores, perTile, 0, floor)
}
