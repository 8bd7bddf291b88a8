package kir

// CB-flow rules of Validate: which CBs a kernel produces and consumes
// (kernelCBUses), statically known page counts against each CB's page
// count, and the per-iteration ring-cycle rule of loops that move
// multi-page blocks (flow, cycles).

import "sort"

// cbUse records how one kernel uses one CB.
type cbUse struct {
	produce, consume, tiled bool      // tiled: compute unpacks or packs whole tiles
	counts                  []cbCount // statically known counts
}

type cbCount struct {
	what string
	n    uint64
}

func kernelCBUses(k *Kernel, env *staticEnv) map[int]*cbUse {
	uses := map[int]*cbUse{}
	get := func(cb int) *cbUse {
		u := uses[cb]
		if u == nil {
			u = &cbUse{}
			uses[cb] = u
		}
		return u
	}
	count := func(cb int, what string, n Expr) {
		if c, ok := env.exact(n); ok {
			get(cb).counts = append(get(cb).counts, cbCount{what, c})
		}
	}
	Inspect(k.Body, func(s Stmt) bool {
		switch s := s.(type) {
		case CBReserveBack:
			get(s.CB).produce = true
			count(s.CB, "cb_reserve_back", s.N)
		case CBPushBack:
			get(s.CB).produce = true
			count(s.CB, "cb_push_back", s.N)
		case CBWaitFront:
			get(s.CB).consume = true
			count(s.CB, "cb_wait_front", s.N)
		case CBPopFront:
			get(s.CB).consume = true
			count(s.CB, "cb_pop_front", s.N)
		case PackTile:
			get(s.CB).produce = true
			get(s.CB).tiled = true
		case CopyTile, BinaryTiles, BcastTiles, MatmulTiles, MatmulBlock, ReduceTile, TransposeTile:
			for _, cb := range CBsOf(s) {
				get(cb).consume = true
				get(cb).tiled = true
			}
		default:
			for _, cb := range append(CBsOf(s), stmtExprCBs(s)...) {
				get(cb)
			}
		}
		return true
	})
	return uses
}

// flow checks CB page counts and the per-iteration cycle rule.
func (v *validator) flow(k *Kernel, env *staticEnv) {
	uses := kernelCBUses(k, env)
	cbs := make([]int, 0, len(uses))
	for cb := range uses {
		cbs = append(cbs, cb)
	}
	sort.Ints(cbs)
	for _, c := range CoresOf(k.Cores) {
		c := c
		for _, idx := range cbs {
			cb := v.p.CBOn(c, idx)
			if cb == nil {
				v.add(RuleCBCount, k.Name, &c, idx, "the kernel uses CB c_%d, which is not configured on this core", idx)
				continue
			}
			if uses[idx].tiled && cb.PageSize != cb.Format.TileBytes() {
				v.add(RuleCBConfig, k.Name, &c, idx, "compute unpacks or packs CB c_%d, but its page size %d is not one %s tile (%d bytes)", idx, cb.PageSize, cb.Format, cb.Format.TileBytes())
			}
		}
	}
	// Page counts against the page count of each configuration the kernel sees.
	for _, idx := range cbs {
		seen := map[*CB]bool{}
		for _, c := range CoresOf(k.Cores) {
			cb := v.p.CBOn(c, idx)
			if cb == nil || seen[cb] || cb.Pages <= 0 {
				continue
			}
			seen[cb] = true
			for _, n := range uses[idx].counts {
				if n.n < 1 || n.n > uint64(cb.Pages) {
					v.add(RuleCBFlow, k.Name, nil, idx, "%s(c_%d, %d): the count must be between 1 and the CB's %d pages", n.what, idx, n.n, cb.Pages)
				}
			}
			v.cycles(k, env, idx, cb.Pages, k.Body)
		}
	}
}

// moved is the number of pages a block pushes (pops) of cb, when known.
func moved(env *staticEnv, body []Stmt, cb int, pop bool) (uint64, bool) {
	var total uint64
	for _, s := range body {
		switch s := s.(type) {
		case CBPushBack:
			if !pop && s.CB == cb {
				n, ok := env.exact(s.N)
				if !ok {
					return 0, false
				}
				total += n
			}
		case CBPopFront:
			if pop && s.CB == cb {
				n, ok := env.exact(s.N)
				if !ok {
					return 0, false
				}
				total += n
			}
		case For:
			inner, ok := moved(env, s.Body, cb, pop)
			if !ok {
				return 0, false
			}
			if inner == 0 {
				continue
			}
			trips, ok := tripCount(env, s)
			if !ok {
				return 0, false
			}
			total += trips * inner
		case If:
			a, ok1 := moved(env, s.Then, cb, pop)
			b, ok2 := moved(env, s.Else, cb, pop)
			if !ok1 || !ok2 || a != b {
				return 0, false
			}
			total += a
		}
	}
	return total, true
}

func tripCount(env *staticEnv, f For) (uint64, bool) {
	start, ok1 := env.exact(f.Start)
	end, ok2 := env.exact(f.End)
	step := uint64(1)
	ok3 := true
	if f.Step != nil {
		step, ok3 = env.exact(f.Step)
	}
	if !ok1 || !ok2 || !ok3 || step == 0 {
		return 0, false
	}
	if end <= start {
		return 0, true
	}
	return (end - start + step - 1) / step, true
}

// maxBlock is the largest statically known multi-page reserve (wait) of cb
// directly in body (not in nested loops).
func maxBlock(env *staticEnv, body []Stmt, cb int, pop bool) uint64 {
	var m uint64
	var walk func([]Stmt)
	walk = func(b []Stmt) {
		for _, s := range b {
			switch s := s.(type) {
			case CBReserveBack:
				if !pop && s.CB == cb {
					if n, ok := env.exact(s.N); ok {
						m = max(m, n)
					}
				}
			case CBWaitFront:
				if pop && s.CB == cb {
					if n, ok := env.exact(s.N); ok {
						m = max(m, n)
					}
				}
			case If:
				walk(s.Then)
				walk(s.Else)
			}
		}
	}
	walk(body)
	return m
}

func (v *validator) cycles(k *Kernel, env *staticEnv, cb, pages int, body []Stmt) {
	Inspect(body, func(s Stmt) bool {
		f, ok := s.(For)
		if !ok {
			return true
		}
		for _, pop := range []bool{false, true} {
			block := maxBlock(env, f.Body, cb, pop)
			if block <= 1 {
				continue
			}
			n, ok := moved(env, f.Body, cb, pop)
			if !ok || n == 0 {
				continue
			}
			if uint64(pages)%n != 0 {
				verb, blk := "pushes", "reserves"
				if pop {
					verb, blk = "pops", "waits for"
				}
				v.add(RuleCBFlow, k.Name, nil, cb,
					"loop over %q %s blocks of %d pages and %s %d pages per iteration, which does not divide the CB's %d pages: a block would straddle the end of the ring (pushes and pops in one ring cycle must add up to the page count)",
					f.Var.Name, blk, block, verb, n, pages)
			}
		}
		return true
	})
}
