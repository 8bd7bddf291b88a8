package kir

// Inspect visits the statements of body in program order (pre-order); when f
// returns true it descends into the bodies of For and If.
func Inspect(body []Stmt, f func(Stmt) bool) {
	for _, s := range body {
		if !f(s) {
			continue
		}
		switch s := s.(type) {
		case For:
			Inspect(s.Body, f)
		case If:
			Inspect(s.Then, f)
			Inspect(s.Else, f)
		}
	}
}

// operand is one expression operand of a statement; optional operands
// (For.Step, PackTile.OutTile, SFPU.Src) may be nil.
type operand struct {
	e        Expr
	optional bool
}

// StmtExprs returns the expression operands of s in argument order (nil
// entries, such as a nil For.Step or PackTile.OutTile, are left out). The
// bodies of For and If are not included.
func StmtExprs(s Stmt) []Expr {
	var es []Expr
	switch s := s.(type) {
	case Let:
		es = []Expr{s.Value}
	case Assign:
		es = []Expr{s.Value}
	case For:
		es = []Expr{s.Start, s.End, s.Step}
	case If:
		es = []Expr{s.Cond}
	default:
		for _, o := range instrOperands(s) {
			es = append(es, o.e)
		}
	}
	out := es[:0]
	for _, e := range es {
		if e != nil {
			out = append(out, e)
		}
	}
	return out
}

// SubExprs returns the direct operands of e.
func SubExprs(e Expr) []Expr {
	switch e := e.(type) {
	case Bin:
		return []Expr{e.X, e.Y}
	case GetSemaphore:
		return []Expr{e.ID}
	case GetEthSemaphore:
		return []Expr{e.ID}
	case NoCAddr:
		return []Expr{e.X, e.Y, e.Addr}
	case DRAMBankAddr:
		return []Expr{e.Bank, e.Offset}
	case MulticastAddr:
		return []Expr{e.X0, e.Y0, e.X1, e.Y1, e.Addr}
	case L1Read32:
		return []Expr{e.Addr}
	case ReadTileValue:
		return []Expr{e.Tile, e.Offset}
	}
	return nil
}

// InspectExpr visits e and its operands pre-order; when f returns false the
// operands of that node are skipped.
func InspectExpr(e Expr, f func(Expr) bool) {
	if e == nil || !f(e) {
		return
	}
	for _, s := range SubExprs(e) {
		InspectExpr(s, f)
	}
}

// ExprCBs returns the CB indices named by the calls inside e
// (get_write_ptr, get_read_ptr, get_tile_size, read_tile_value).
func ExprCBs(e Expr) []int {
	var out []int
	InspectExpr(e, func(e Expr) bool {
		switch e := e.(type) {
		case GetWritePtr:
			out = append(out, e.CB)
		case GetReadPtr:
			out = append(out, e.CB)
		case GetTileSize:
			out = append(out, e.CB)
		case ReadTileValue:
			out = append(out, e.CB)
		}
		return true
	})
	return out
}
