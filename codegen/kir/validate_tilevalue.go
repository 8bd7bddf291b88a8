package kir

// tileValues checks that every read_tile_value of compute kernel k reads
// a CB the kernel waited for before it, in program order (RuleCBFlow): the
// value lives in a page the reader pushed, and only cb_wait_front makes
// it the front page the call reads. Whether the page is still waited for
// (not popped) at run time, and its index below the pages waited for, the
// simulator checks.
func (v *validator) tileValues(k *Kernel) {
	if k.Role != RoleCompute {
		return
	}
	waited := map[int]bool{}
	Inspect(k.Body, func(s Stmt) bool {
		for _, e := range StmtExprs(s) {
			InspectExpr(e, func(e Expr) bool {
				if r, ok := e.(ReadTileValue); ok && !waited[r.CB] {
					v.add(RuleCBFlow, k.Name, nil, r.CB, "read_tile_value(c_%d, ...) in %s before any cb_wait_front(c_%d): the value must be in a page the kernel waited for", r.CB, stmtName(s), r.CB)
				}
				return true
			})
		}
		if w, ok := s.(CBWaitFront); ok {
			waited[w.CB] = true
		}
		return true
	})
}
