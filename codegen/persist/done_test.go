package persist

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/tcc-dev/tcc/codegen"
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/models/tinymlp"
	"github.com/tcc-dev/tcc/passes"
)

// TestDoneRects: the done signal's multicast rectangles cover the bounding
// box of the worker dependents, each with contiguous NoC columns and rows
// (Blackhole's worker columns 0..6 and 7..10 are NoC x 1..7 and 10..13),
// and count their cores besides the sender.
func TestDoneRects(t *testing.T) {
	tgt := target.Blackhole()
	c := func(x, y int) kir.Core { return kir.Core{X: x, Y: y} }
	for _, tc := range []struct {
		name   string
		cs     []kir.Core
		sender kir.Core
		want   []doneRect
	}{
		{"none", nil, c(0, 0), nil},
		{"one row left of the gap, sender inside", []kir.Core{c(0, 0), c(1, 0), c(3, 0)}, c(0, 0), []doneRect{{0, 0, 3, 0, 3}}},
		{"across the NoC gap", []kir.Core{c(5, 1), c(8, 2)}, c(0, 0), []doneRect{{5, 1, 6, 2, 4}, {7, 1, 8, 2, 4}}},
		{"only the sender", []kir.Core{c(2, 2)}, c(2, 2), nil},
		{"ethernet sender", []kir.Core{c(0, 0), c(1, 1)}, kir.Core{X: 3, Y: kir.EthRow}, []doneRect{{0, 0, 1, 1, 4}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := doneRects(tgt, tc.cs, tc.sender)
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(doneRect{})); diff != "" {
				t.Errorf("doneRects (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDoneMulticastTTMetal: every done-signal multicast of tiny-mlp's
// persistent program follows tt-metal's rules for
// noc_semaphore_set_multicast (the pinned tt-metal 923191064229):
//   - corners in the order of the NoC it is issued on: start <= end on
//     NoC 0, start >= end on NoC 1 (tt_metal/hw/inc/internal/debug/
//     sanitize.h:339-349, virtual coordinates; Blackhole's NOC_0_X is the
//     identity, noc_nonblocking_api.h:41);
//   - num_dests counts the cores that ack: the rectangle's worker cores
//     without the sender, which the non-loopback call does not write
//     (dataflow_api.h:1542-1545; ncrisc_noc_fast_write adds num_dests to
//     the acks noc_async_write_barrier waits for, noc_nonblocking_api.h:315;
//     tt-metal's own matmul sender passes num_cores - 1,
//     reader_bmm_tile_layout_in0_sender_dram_sharded.cpp:107-113).
func TestDoneMulticastTTMetal(t *testing.T) {
	g := tinymlp.BuildGraph(tinymlp.Sizes{Layers: 2, Hidden: 128, Intermediate: 256, Vocab: 512, Batch: 1})
	_, err := passes.Run(g, passes.Options{})
	require.NoError(t, err)
	b, err := codegen.Compile(g, target.Blackhole())
	require.NoError(t, err)
	p, _, err := Build(b)
	require.NoError(t, err)
	tg := b.Target
	coord := func(k *kir.Kernel, e kir.Expr) int {
		a := k.LookupArg(e.(kir.ArgRef).Name)
		require.NotNil(t, a)
		x, y, err := tg.WorkerNoC(a.Value.Core.X, a.Value.Core.Y)
		require.NoError(t, err)
		if a.Value.Kind == kir.ValNoCX {
			return x
		}
		return y
	}
	n := 0
	for _, k := range p.Kernels {
		kir.Inspect(k.Body, func(s kir.Stmt) bool {
			m, ok := s.(kir.NoCSemaphoreSetMulticast)
			if !ok {
				return true
			}
			d := m.Dst.(kir.MulticastAddr)
			if x, ok := d.X0.(kir.ArgRef); !ok || !strings.HasPrefix(x.Name, "persist_mc") {
				return true // a phase's own multicast
			}
			n++
			x0, y0, x1, y1 := coord(k, d.X0), coord(k, d.Y0), coord(k, d.X1), coord(k, d.Y1)
			if (k.NoC == 0 && (x0 > x1 || y0 > y1)) || (k.NoC == 1 && (x0 < x1 || y0 < y1)) {
				t.Errorf("%s (NoC %d): multicast (%d,%d)-(%d,%d) in the wrong corner order", k.Name, k.NoC, x0, y0, x1, y1)
			}
			sender := kir.CoresOf(k.Cores)
			require.Len(t, sender, 1, "%s leads a phase: one core", k.Name)
			sx, sy, err := tg.WorkerNoC(sender[0].X, sender[0].Y)
			require.NoError(t, err)
			dests := 0
			for y := min(y0, y1); y <= max(y0, y1); y++ {
				for x := min(x0, x1); x <= max(x0, x1); x++ {
					if _, _, ok := tg.WorkerAt(x, y); ok && (x != sx || y != sy) {
						dests++
					}
				}
			}
			if got := int(m.NumDests.(kir.Const).V); got != dests {
				t.Errorf("%s: multicast (%d,%d)-(%d,%d) from (%d,%d) with num_dests %d, want %d (its worker cores but the sender)", k.Name, x0, y0, x1, y1, sx, sy, got, dests)
			}
			return true
		})
	}
	if n == 0 {
		t.Fatal("no done multicast in tiny-mlp's persistent program")
	}
	t.Logf("%d done multicasts checked", n)
}
