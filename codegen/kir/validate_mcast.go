package kir

// mcastCorners checks RuleMcastRange where the corners are known at build
// time: every get_noc_multicast_addr whose four corners are arguments
// (common, or runtime on each core) resolving to NoC coordinates or
// constants must name its rectangle in the order of the kernel's NoC
// (McastOrdered). Corners computed in the kernel are left to the
// simulator, which checks every multicast it executes.
func (v *validator) mcastCorners(k *Kernel) {
	if k.Role == RoleCompute {
		return
	}
	var rects []MulticastAddr
	Inspect(k.Body, func(s Stmt) bool {
		for _, e := range StmtExprs(s) {
			InspectExpr(e, func(e Expr) bool {
				if m, ok := e.(MulticastAddr); ok {
					rects = append(rects, m)
				}
				return true
			})
		}
		return true
	})
	if len(rects) == 0 {
		return
	}
	// coord resolves corner e on core c to a NoC coordinate (x or y).
	coord := func(e Expr, c Core, x bool) (int, bool) {
		ref, ok := e.(ArgRef)
		if !ok {
			return 0, false
		}
		a := k.LookupArg(ref.Name)
		if a == nil {
			return 0, false
		}
		val := a.Value
		if a.Kind == RuntimeArg {
			vals := k.RuntimeValuesOn(c)
			if a.Index >= len(vals) {
				return 0, false
			}
			val = vals[a.Index]
		}
		switch val.Kind {
		case ValConst:
			return int(val.Const), true
		case ValNoCX, ValNoCY:
			if val.Core.IsEth() {
				return 0, false
			}
			nx, ny, err := v.t.WorkerNoC(val.Core.X, val.Core.Y)
			if err != nil || (val.Kind == ValNoCX) != x {
				return 0, false
			}
			if x {
				return nx, true
			}
			return ny, true
		}
		return 0, false
	}
	reported := make([]bool, len(rects))
	for _, c := range CoresOf(k.Cores) {
		for i, m := range rects {
			if reported[i] {
				continue
			}
			x0, ok0 := coord(m.X0, c, true)
			y0, ok1 := coord(m.Y0, c, false)
			x1, ok2 := coord(m.X1, c, true)
			y1, ok3 := coord(m.Y1, c, false)
			if !ok0 || !ok1 || !ok2 || !ok3 || McastOrdered(k.NoC, x0, y0, x1, y1) {
				continue
			}
			reported[i] = true
			v.add(RuleMcastRange, k.Name, &c, NoCB, "get_noc_multicast_addr(%s, %s, %s, %s) names (%d,%d)-(%d,%d) on a kernel issuing on NoC %d, which needs %s (kir.McastCorners)",
				m.X0.(ArgRef).Name, m.Y0.(ArgRef).Name, m.X1.(ArgRef).Name, m.Y1.(ArgRef).Name, x0, y0, x1, y1, k.NoC, McastOrder(k.NoC))
		}
	}
}
