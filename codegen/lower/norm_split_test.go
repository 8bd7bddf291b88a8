package lower

import (
	"fmt"
	"testing"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
)

// splitCores lowers op and fails unless every one of its tile rows got a
// group of several cores (the split-row plan of norm_split.go) on the
// kernel named compute.
func splitCores(t *testing.T, p *kir.Program, compute string, rows int) {
	t.Helper()
	k := p.Kernel(compute)
	if k == nil {
		t.Fatalf("no kernel %q", compute)
	}
	n := 0
	for _, r := range k.Cores {
		n += (r.X1 - r.X0 + 1) * (r.Y1 - r.Y0 + 1)
	}
	if n < 2*rows || n%rows != 0 {
		t.Fatalf("%s runs on %d cores for %d tile rows, want a group of >= 2 cores per row", compute, n, rows)
	}
	t.Logf("%d tile rows on %d cores (%d per row)", rows, n, n/rows)
}

// TestSplitNormOnSim runs the split-row norms of rms_norm,
// rms_norm_plain and add_rmsnorm on the simulator against the reference
// evaluator on random inputs, at the 27B's hidden size on one row and on
// several tile rows (one group of cores per row).
func TestSplitNormOnSim(t *testing.T) {
	tgt := target.Blackhole()
	single := []struct {
		rows int
		mcase
	}{
		{1, mcase{name: "rms_norm_5120", build: func(b *ir.Builder) *ir.Value {
			return b.RMSNorm(in(b, "x", tt(ir.BF16, dram, 1, 1, 5120)), in(b, "w", tt(ir.BF16, dram, 5120)), 1e-6, 1)
		}}},
		{3, mcase{name: "rms_norm_3_rows", build: func(b *ir.Builder) *ir.Value {
			return b.RMSNorm(in(b, "x", tt(ir.BF16, dram, 96, 2048)), in(b, "w", tt(ir.BF16, dram, 2048)), 1e-6, 1)
		}}},
		{1, mcase{name: "rms_norm_5120_offset_0", build: func(b *ir.Builder) *ir.Value {
			return b.RMSNorm(b.Input("x", ir.T(ir.BF16, 1, 5120)), b.Weight("norm.weight", ir.T(ir.BF16, 5120)), 1e-6, 0)
		}}},
		{2, mcase{name: "rms_norm_2_rows_partial", build: func(b *ir.Builder) *ir.Value {
			// 40 rows: the second tile row is half padding.
			return b.RMSNorm(b.Input("x", ir.T(ir.BF16, 40, 1024)), b.Weight("norm.weight", ir.T(ir.BF16, 1024)), 1e-5, 1)
		}}},
		{1, mcase{name: "rms_norm_plain_5120", build: func(b *ir.Builder) *ir.Value {
			return b.RMSNormPlain(in(b, "x", tt(ir.FP32, dram, 1, 5120)), 1e-6)
		}}},
		{4, mcase{name: "rms_norm_plain_4_rows", build: func(b *ir.Builder) *ir.Value {
			return b.RMSNormPlain(in(b, "x", tt(ir.BF16, dram, 128, 1024)), 1e-6)
		}}},
	}
	for i, tc := range single {
		t.Run(tc.name, func(t *testing.T) {
			_, op := graphOp(t, tc.build)
			p, err := Lower(op, NewContext(tgt))
			if err != nil {
				t.Fatal(err)
			}
			splitCores(t, p, "compute", tc.rows)
			runCase(t, tgt, tc.mcase, uint64(i)+900)
		})
	}
	fused := []struct {
		name  string
		rows  int
		build func(b *ir.Builder) []*ir.Value
	}{
		{"add_rmsnorm_5120", 1, func(b *ir.Builder) []*ir.Value {
			return b.AddRMSNorm(fcIn(b, "a", ir.BF16, 1, 1, 5120), fcIn(b, "b", ir.BF16, 1, 1, 5120), fcW(b, "w", ir.BF16, 5120), 1e-6, 1)
		}},
		{"add_rmsnorm_3_rows", 3, func(b *ir.Builder) []*ir.Value {
			return b.AddRMSNorm(fcIn(b, "a", ir.BF16, 96, 1024), fcIn(b, "b", ir.BF16, 96, 1024), fcW(b, "w", ir.BF16, 1024), 1e-6, 0)
		}},
	}
	for i, tc := range fused {
		t.Run(tc.name, func(t *testing.T) {
			op := fcBuild(t, tc.build)
			p := fcRun(t, tgt, op, uint64(i)+950, nil)
			splitCores(t, p, "compute", tc.rows)
		})
	}
}

// TestSplitNormCollective: the all_reduce_add_rmsnorm tail takes a group
// of cores per tile row, on one row at the 27B's hidden size and on
// several rows (TestFusedCollectivesOnCluster runs these shapes on the
// simulated cluster against the reference).
func TestSplitNormCollective(t *testing.T) {
	for _, tc := range []struct {
		fusedCCLCase
		rows int
	}{
		{fusedCCLCases[6], 1}, // add+norm hidden 1x2
		{fusedCCLCases[8], 1}, // add+norm hidden 1x4
		{fusedCCLCases[7], 3}, // add+norm rows 1x2
		{fusedCCLCases[9], 2}, // add+norm rows 1x4
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !tc.norm {
				t.Fatalf("case %q has no norm", tc.name)
			}
			_, op := fusedCCLGraph(t, tc.fusedCCLCase)
			p, err := Lower(op, NewContext(target.Blackhole()))
			if err != nil {
				t.Fatal(err)
			}
			splitCores(t, p, "tail_compute", tc.rows)
		})
	}
}

// TestPlanNormSplit: the 27B's 160-tile row goes to a few tens of cores,
// a 2-tile row to two, and a plan never leaves a core without tiles.
func TestPlanNormSplit(t *testing.T) {
	s := PlanNormSplit(160, 110, normTileCycles)
	if s.Cores < 8 || s.Cores > 40 {
		t.Errorf("160 tiles: %d cores, want 8..40", s.Cores)
	}
	if s := PlanNormSplit(2, 110, normTileCycles); s.Cores != 2 {
		t.Errorf("2 tiles: %d cores, want 2", s.Cores)
	}
	for wt := 1; wt < 200; wt += 7 {
		s := PlanNormSplit(wt, 27, normTileCycles)
		if (s.Cores-1)*s.PerCore >= wt || s.Cores*s.PerCore < wt {
			t.Errorf("%d tiles: %d cores of %d tiles leave a core empty or tiles over", wt, s.Cores, s.PerCore)
		}
	}
	if planNormSplit(target.Blackhole(), 60, 160, 0, 110, normTileCycles) != nil {
		t.Error("60 tile rows on 110 cores: want one core per row (no split plan)")
	}
}

// TestNormExchangeFan: small groups add on one level; from 12 cores the
// exchange takes subgroups of about sqrt(n) cores, whose critical path is
// shorter than one level's.
func TestNormExchangeFan(t *testing.T) {
	for _, tc := range []struct{ n, want int }{{2, 0}, {4, 0}, {11, 0}, {12, 4}, {16, 4}, {27, 7}, {40, 8}} {
		t.Run(fmt.Sprint(tc.n), func(t *testing.T) {
			got := NormExchangeFan(tc.n)
			if got != tc.want {
				t.Errorf("NormExchangeFan(%d) = %d, want %d", tc.n, got, tc.want)
			}
			if got > 0 && normGatherPath(tc.n, got) >= normGatherPath(tc.n, 0) {
				t.Errorf("%d cores: the tree's path %d is not shorter than one level's %d", tc.n, normGatherPath(tc.n, got), normGatherPath(tc.n, 0))
			}
		})
	}
}
