package lower_test

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/ir/longtest"
	"github.com/tcc-dev/tcc/sim/timing"
)

// shiftSFPU counts, among relu, negative, add_binary and min_binary, the
// SFPU calls of op's compute kernel as written (not as run).
func shiftSFPU(t *testing.T, op *ir.Op) map[string]int {
	t.Helper()
	p, err := lower.Lower(op, lower.NewContext(target.Blackhole()))
	require.NoError(t, err)
	got := map[string]int{}
	for _, kern := range p.Kernels {
		if kern.Name != "compute" {
			continue
		}
		kir.Inspect(kern.Body, func(s kir.Stmt) bool {
			if c, ok := s.(kir.SFPU); ok {
				switch c.Op {
				case kir.SFPURelu, kir.SFPUNegative, kir.SFPUAddBinary, kir.SFPUMinBinary:
					got[c.Op.String()]++
				}
			}
			return true
		})
	}
	return got
}

// TestFlashPrefillMinShift: the prefill attention's new shift is -c (the
// chunk's row max c), then in later chunks min(-c, nm) by one min_binary,
// not m + relu(c - m) (two add_binary, relu, two negative): the same bits
// (TestFlashPrefillOnSim passed against the relu reference with it), so the
// prefill kernel has one negative, one min_binary and no relu, and its
// add_binary are the rescale factor's and l's. Decode keeps the relu form.
// And (TCC_LONG: ~2 CPU-s) the 27B's 256-token program at position 12,288
// of a 16k cache (items of 49 to 64 chunks; compute-bound) takes at least
// 1.5% less time than with the relu form (predicted: 1,004.0 against
// 1,026.7 us; 1,014.6 against 1,037.1 before prefillMaskKeep).
func TestFlashPrefillMinShift(t *testing.T) {
	got := map[string]map[string]int{
		"prefill_d256": shiftSFPU(t, sdpaGatedOp(t, ir.BF16, 1, 64, 12, 2, 256, 1024, "HiFi4")),
		"decode_d256":  shiftSFPU(t, sdpaGatedOp(t, ir.BF16, 1, 0, 12, 2, 256, 1024, "HiFi4")),
	}
	want := map[string]map[string]int{
		"prefill_d256": {"negative": 1, "min_binary": 1, "add_binary": 2},
		"decode_d256":  {"negative": 6, "relu": 1, "add_binary": 5},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("compute's SFPU calls (-want +got):\n%s", diff)
	}
	t.Run("time", func(t *testing.T) {
		longtest.Skip(t, "the 27B's 256-token prefill attention at position 12,288 simulated twice (~2 CPU-s)")
		on := simulateLongPrefill27B(t)
		var off timing.DeviceTime
		withKnob(lower.PrefillMinShift, false, func() { off = simulateLongPrefill27B(t) })
		t.Logf("min_binary: %.1f us; relu form: %.1f us", on.US, off.US)
		if on.US > 0.985*off.US {
			t.Errorf("%.1f us, want under 98.5%% of %.1f", on.US, off.US)
		}
	})
}

// simulateLongPrefill27B is the timing model's prediction of the 27B's
// 256-token prefill attention (mesh 1x2 per device) at position 12,288 of
// a 16,384-long cache, where compute, not the reader, binds.
func simulateLongPrefill27B(t *testing.T) timing.DeviceTime {
	t.Helper()
	tgt := target.Blackhole()
	p, err := lower.Lower(sdpaGatedOp(t, ir.BF16, 1, 256, 12, 2, 256, 16384, "HiFi4"), lower.NewContext(tgt))
	require.NoError(t, err)
	flashAtPos(t, p, 12288)
	pt, err := timing.Simulate(p, tgt, timing.Default(), timing.Options{})
	require.NoError(t, err)
	return pt.Devices[0]
}

// scoreLoopInits counts the reconfig_data_format and mm_init_short calls
// op's compute kernel writes in its score loop (the For over t) outside
// any if, and inside one.
func scoreLoopInits(t *testing.T, op *ir.Op) map[string]int {
	t.Helper()
	p, err := lower.Lower(op, lower.NewContext(target.Blackhole()))
	require.NoError(t, err)
	got := map[string]int{}
	var count func(body []kir.Stmt, where string)
	count = func(body []kir.Stmt, where string) {
		for _, s := range body {
			switch s := s.(type) {
			case kir.ReconfigDataFormat:
				got["reconfig "+where]++
			case kir.MatmulInit:
				got["mm_init "+where]++
			case kir.If:
				count(s.Then, "in if")
				count(s.Else, "in if")
			case kir.For:
				count(s.Body, where)
			}
		}
	}
	for _, kern := range p.Kernels {
		if kern.Name != "compute" {
			continue
		}
		kir.Inspect(kern.Body, func(s kir.Stmt) bool {
			if f, ok := s.(kir.For); ok && f.Var.Name == "t" {
				count(f.Body, "per tile")
				return false
			}
			return true
		})
	}
	return got
}

// TestFlashPrefillMaskKeep: the prefill score loop re-establishes the
// products' unpacker formats and matmul init at the end of the mask's
// copy, inside its if, so the loop's tiles without a mask run neither
// (decode keeps them after the if, per tile). The products are the same
// (TestFlashPrefillOnSim); (TCC_LONG: ~2 CPU-s) the 27B's 256-token
// program at position 12,288 of a 16k cache takes less time than with
// them per tile (predicted: 1,004.0 against 1,014.6 us).
func TestFlashPrefillMaskKeep(t *testing.T) {
	got := map[string]map[string]int{
		"prefill_d256": scoreLoopInits(t, sdpaGatedOp(t, ir.BF16, 1, 64, 12, 2, 256, 1024, "HiFi4")),
		"decode_d256":  scoreLoopInits(t, sdpaGatedOp(t, ir.BF16, 1, 0, 12, 2, 256, 1024, "HiFi4")),
	}
	want := map[string]map[string]int{
		"prefill_d256": {"reconfig in if": 2, "mm_init in if": 1},
		"decode_d256":  {"reconfig in if": 1, "reconfig per tile": 1, "mm_init per tile": 1},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("score loop's reconfig_data_format and mm_init_short calls (-want +got):\n%s", diff)
	}
	t.Run("time", func(t *testing.T) {
		longtest.Skip(t, "the 27B's 256-token prefill attention at position 12,288 simulated twice (~2 CPU-s)")
		on := simulateLongPrefill27B(t)
		var off timing.DeviceTime
		withKnob(lower.PrefillMaskKeep, false, func() { off = simulateLongPrefill27B(t) })
		t.Logf("inits in the mask's branch: %.1f us; per tile: %.1f us", on.US, off.US)
		if on.US >= off.US {
			t.Errorf("%.1f us, want under %.1f", on.US, off.US)
		}
	})
}

// expDests lists, per exp call (exp or exp_softmax) of op's compute
// kernel as written, its DEST operand: a constant's value or a variable's
// name.
func expDests(t *testing.T, op *ir.Op) []string {
	t.Helper()
	p, err := lower.Lower(op, lower.NewContext(target.Blackhole()))
	require.NoError(t, err)
	var got []string
	for _, kern := range p.Kernels {
		if kern.Name != "compute" {
			continue
		}
		kir.Inspect(kern.Body, func(s kir.Stmt) bool {
			if c, ok := s.(kir.SFPU); ok && (c.Op == kir.SFPUExp || c.Op == kir.SFPUExpSoftmax) {
				switch d := c.Dst.(type) {
				case kir.Const:
					got = append(got, fmt.Sprint(d.V))
				case kir.Var:
					got = append(got, d.Name)
				default:
					got = append(got, fmt.Sprintf("%T", d))
				}
			}
			return true
		})
	}
	return got
}

// TestFlashPrefillExpGroup: the prefill softmax's exp loop takes 4 score
// tiles per DEST acquire (its add and exp into DEST[k], k < 4, then their
// packs), not one into DEST[0]; the rescale factor's exp stays in
// DEST[0], and decode keeps one tile per acquire (its third exp: the
// combine's). The exp block is the
// same (TestFlashPrefillOnSim); (TCC_LONG: ~2 CPU-s) the 27B's 256-token
// program at position 12,288 of a 16k cache takes less time than with one
// tile per acquire (predicted: 1,000.5 against 1,004.0 us).
func TestFlashPrefillExpGroup(t *testing.T) {
	got := map[string][]string{
		"prefill_d256": expDests(t, sdpaGatedOp(t, ir.BF16, 1, 64, 12, 2, 256, 1024, "HiFi4")),
		"decode_d256":  expDests(t, sdpaGatedOp(t, ir.BF16, 1, 0, 12, 2, 256, 1024, "HiFi4")),
	}
	want := map[string][]string{"prefill_d256": {"k", "0"}, "decode_d256": {"0", "0", "0"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("DEST operands of the exp calls (-want +got):\n%s", diff)
	}
	t.Run("time", func(t *testing.T) {
		longtest.Skip(t, "the 27B's 256-token prefill attention at position 12,288 simulated twice (~2 CPU-s)")
		on := simulateLongPrefill27B(t)
		var off timing.DeviceTime
		withInt(lower.PrefillExpGroup, 1, func() { off = simulateLongPrefill27B(t) })
		t.Logf("4 score tiles per acquire: %.1f us; one: %.1f us", on.US, off.US)
		if on.US >= off.US {
			t.Errorf("%.1f us, want under %.1f", on.US, off.US)
		}
	})
}
