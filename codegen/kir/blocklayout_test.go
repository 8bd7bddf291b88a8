package kir

import (
	"fmt"
	"testing"
)

// TestBlockLayout: every tile has one slot, no two tiles share one, every
// block holds at most its capacity, a block's tiles are its group's
// columns of consecutive K rows k-major, and SlotExpr computes Slot.
func TestBlockLayout(t *testing.T) {
	for _, l := range []BlockLayout{
		{Kt: 160, Nt: 160, Period: 3, Dest: 4, KB: 7},  // one group a core
		{Kt: 160, Nt: 272, Period: 3, Dest: 4, KB: 14}, // the 27B MLP's gate at 1x2
		{Kt: 160, Nt: 258, Period: 8, Dest: 4, KB: 7},  // two groups a core, a last one of 2 columns
		{Kt: 272, Nt: 159, Period: 7, Dest: 4, KB: 14}, // groups of 4 and 3 columns (R = 18)
		{Kt: 5, Nt: 1, Period: 2, Dest: 4, KB: 2},
		{Kt: 7, Nt: 10, Period: 1, Dest: 4, KB: 1}, // one column a core, one row a block
		{Kt: 3, Nt: 9, Period: 4, Dest: 4, KB: 8},  // blocks longer than the weight
	} {
		t.Run(fmt.Sprintf("%dx%d_p%d_d%d_kb%d", l.Kt, l.Nt, l.Period, l.Dest, l.KB), func(t *testing.T) {
			if err := l.Check(); err != nil {
				t.Fatal(err)
			}
			seen := map[[2]int]int{}
			fill := make([]int, l.Blocks())
			for p := 0; p < l.Kt*l.Nt; p++ {
				blk, at := l.Slot(p)
				if blk < 0 || blk >= l.Blocks() || at < 0 || at >= l.BlockTiles() {
					t.Fatalf("page %d: block %d slot %d outside %d blocks of %d", p, blk, at, l.Blocks(), l.BlockTiles())
				}
				if q, dup := seen[[2]int{blk, at}]; dup {
					t.Fatalf("pages %d and %d share block %d slot %d", q, p, blk, at)
				}
				seen[[2]int{blk, at}] = p
				fill[blk]++
				// the next tile of the row in the same group follows it
				k, n := p/l.Nt, p%l.Nt
				if first, w, _, _ := l.group(n); n+1 < first+w {
					if b2, a2 := l.Slot(k*l.Nt + n + 1); b2 != blk || a2 != at+1 {
						t.Fatalf("tile (%d,%d) at %d/%d, its right neighbour at %d/%d", k, n, blk, at, b2, a2)
					}
				}
				env := map[string]uint32{"p": uint32(p)}
				be, ae := l.SlotExpr(Var{Name: "p"})
				if gb, ga := evalConst(t, be, env), evalConst(t, ae, env); gb != blk || ga != at {
					t.Fatalf("page %d: SlotExpr %d/%d, Slot %d/%d", p, gb, ga, blk, at)
				}
			}
			// cores streaming their runs in step: the first blocks of eight
			// runs' first groups are in eight different banks
			if l.Runs() >= 8 {
				banks := map[int]bool{}
				for run := 0; run < 8; run++ {
					blk, _ := l.Slot(run * l.Period)
					banks[blk%8] = true
				}
				if len(banks) != 8 {
					t.Errorf("the first blocks of runs 0..7 fall in %d banks, want 8", len(banks))
				}
			}
			empty := 0
			for _, n := range fill {
				if n == 0 {
					empty++
				}
			}
			// only the last, shorter run leaves block numbers unused
			if max := l.runBlocks(); empty >= max {
				t.Errorf("%d of %d block numbers unused, want fewer than a run's %d", empty, l.Blocks(), max)
			}
		})
	}
}

// evalConst evaluates an expression of Bin, Const and Var nodes.
func evalConst(t *testing.T, e Expr, env map[string]uint32) int {
	t.Helper()
	var ev func(e Expr) uint32
	ev = func(e Expr) uint32 {
		switch x := e.(type) {
		case Const:
			return x.V
		case Var:
			return env[x.Name]
		case Bin:
			a, b := ev(x.X), ev(x.Y)
			switch x.Op {
			case OpAdd:
				return a + b
			case OpSub:
				return a - b
			case OpMul:
				return a * b
			case OpDiv:
				return a / b
			case OpMod:
				return a % b
			case OpLt:
				if a < b {
					return 1
				}
				return 0
			}
		}
		t.Fatalf("cannot evaluate %#v", e)
		return 0
	}
	return int(ev(e))
}
