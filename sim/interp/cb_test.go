package interp

import (
	"errors"
	"slices"
	"testing"

	"github.com/tcc-dev/tcc/codegen/kir"
)

// TestCBBooks: the CB calls keep the ring's books, block when the ring is
// full or empty, and refuse what a card's CB would not do.
func TestCBBooks(t *testing.T) {
	type call struct {
		name string
		n    uint64
	}
	for _, tc := range []struct {
		name     string
		calls    []call
		straddle bool
		// want is the outcome of the last call: "ok", "blocked" or the
		// rule of its fault; books are WrPos, RdPos, Filled, Reserved, Waited after it.
		want  string
		books [5]int
	}{
		{"reserve push wait pop", []call{{"cb_reserve_back", 2}, {"cb_push_back", 2}, {"cb_wait_front", 2}, {"cb_pop_front", 1}}, false, "ok", [5]int{2, 1, 1, 0, 1}},
		{"full ring blocks", []call{{"cb_reserve_back", 4}, {"cb_push_back", 4}, {"cb_reserve_back", 1}}, false, "blocked", [5]int{0, 0, 4, 0, 0}},
		{"empty ring blocks", []call{{"cb_wait_front", 1}}, false, "blocked", [5]int{}},
		{"count", []call{{"cb_reserve_back", 5}}, false, "cb-flow", [5]int{}},
		{"push unreserved", []call{{"cb_reserve_back", 1}, {"cb_push_back", 2}}, false, "cb-flow", [5]int{0, 0, 0, 1, 0}},
		{"pop unwaited", []call{{"cb_reserve_back", 1}, {"cb_push_back", 1}, {"cb_pop_front", 1}}, false, "cb-flow", [5]int{1, 0, 1, 0, 0}},
		{"straddle", []call{{"cb_reserve_back", 3}, {"cb_push_back", 3}, {"cb_wait_front", 3}, {"cb_pop_front", 3}, {"cb_reserve_back", 2}}, false, "cb-flow", [5]int{3, 3, 0, 0, 0}},
		{"straddle allowed", []call{{"cb_reserve_back", 3}, {"cb_push_back", 3}, {"cb_wait_front", 3}, {"cb_pop_front", 3}, {"cb_reserve_back", 2}, {"cb_push_back", 2}}, true, "ok", [5]int{1, 3, 2, 0, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			core := testCore(t)
			cb := core.CB(0)
			var outcome string
			for _, c := range tc.calls {
				wait, f := cbCalls[c.name].do(cb, c.n, tc.straddle)
				switch {
				case f != nil:
					outcome = f.Rule.String()
				case wait:
					outcome = "blocked"
				default:
					outcome = "ok"
				}
				if outcome != "ok" {
					break
				}
			}
			got := [5]int{cb.WrPos, cb.RdPos, cb.Filled, cb.Reserved, cb.Waited}
			if outcome != tc.want || got != tc.books {
				t.Errorf("outcome %s, books %v; want %s, %v", outcome, got, tc.want, tc.books)
			}
		})
	}
}

// TestCBCallBlocks: a blocked CB call tells the machine what it waits for
// and runs again, from the same instruction, when resumed.
func TestCBCallBlocks(t *testing.T) {
	k := reader(func(b *kir.Builder) {
		b.CBWaitFront(0, kir.C(2))
		b.CBPopFront(0, kir.C(2))
	})
	core := testCore(t)
	th, st := runKernel(t, k, core, nil)
	want := []Wait{{Kind: WaitFilled, Call: "cb_wait_front", CB: 0, Want: 2}}
	if st != Blocked || th.PC != 0 || !slices.Equal(th.S.waits, want) {
		t.Fatalf("status %d at %d, waits %+v; want blocked at 0 on %+v", st, th.PC, th.S.waits, want)
	}
	if r := th.S.waits[0].Reason(); r != "waits for 2 pages, 0 available" {
		t.Errorf("reason %q", r)
	}
	cb := core.CB(0)
	cb.Filled, cb.WrPos = 2, 2 // a producer pushed two pages
	for !th.Done() {
		if st := th.Step(); st < 0 {
			t.Fatalf("status %d after the push: %v", st, th.Err)
		}
	}
	if want := []string{"cb_wait_front[2]", "cb_pop_front[2]"}; !slices.Equal(th.S.log, want) {
		t.Errorf("ran %v, want %v", th.S.log, want)
	}
}

// TestSemaphoreWait: the waits read the word through the machine and
// block until it holds; the plain forms refuse an ethernet core.
func TestSemaphoreWait(t *testing.T) {
	sem := kir.GetSemaphore{ID: kir.C(3)}
	addr := uint64(0x1000 + 3*SemaphoreStride)
	for _, tc := range []struct {
		name string
		s    kir.Stmt
		word uint64
		eth  bool
		want string // "ok", "blocked" or a fault's rule
	}{
		{"equal", kir.NoCSemaphoreWait{Addr: sem, Value: kir.C(2)}, 2, false, "ok"},
		{"not equal", kir.NoCSemaphoreWait{Addr: sem, Value: kir.C(2)}, 3, false, "blocked"},
		{"at least", kir.NoCSemaphoreWaitMin{Addr: sem, Value: kir.C(2)}, 3, false, "ok"},
		{"below", kir.NoCSemaphoreWaitMin{Addr: sem, Value: kir.C(2)}, 1, false, "blocked"},
		{"plain on eth", kir.NoCSemaphoreWait{Addr: kir.C(0x2000), Value: kir.C(2)}, 2, true, "eth-wait"},
		{"eth form on eth", kir.EthNoCSemaphoreWait{Addr: kir.C(0x2000), Value: kir.C(2)}, 2, true, "ok"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			core, a := testCore(t), addr
			if tc.eth {
				core.Eth, a = true, 0x2000
			}
			k := reader(func(b *kir.Builder) { b.Emit(tc.s) })
			th, st := runKernel(t, k, core, map[uint64]uint64{a: tc.word})
			got := "ok"
			var f *Fault
			switch {
			case errors.As(th.Err, &f):
				got = f.Rule.String()
			case st == Blocked:
				got = "blocked"
				if w := th.S.waits[0]; w.Kind != WaitWord || w.Addr != a || w.Have != tc.word || core.SemaphoreAt(w.Addr) != 3 {
					t.Errorf("wait %+v", w)
				}
			}
			if got != tc.want {
				t.Errorf("%s, want %s", got, tc.want)
			}
		})
	}
}
