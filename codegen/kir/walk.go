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
	case CBReserveBack:
		es = []Expr{s.N}
	case CBPushBack:
		es = []Expr{s.N}
	case CBWaitFront:
		es = []Expr{s.N}
	case CBPopFront:
		es = []Expr{s.N}
	case NoCAsyncRead:
		es = []Expr{s.Src, s.Dst, s.Size}
	case NoCAsyncWrite:
		es = []Expr{s.Src, s.Dst, s.Size}
	case NoCAsyncWriteMulticast:
		es = []Expr{s.Src, s.Dst, s.Size, s.NumDests}
	case NoCSemaphoreSet:
		es = []Expr{s.Addr, s.Value}
	case NoCSemaphoreWait:
		es = []Expr{s.Addr, s.Value}
	case NoCSemaphoreWaitMin:
		es = []Expr{s.Addr, s.Value}
	case NoCSemaphoreInc:
		es = []Expr{s.Addr, s.Incr}
	case NoCSemaphoreSetMulticast:
		es = []Expr{s.Src, s.Dst, s.NumDests}
	case L1Write32:
		es = []Expr{s.Addr, s.Value}
	case EthSendBytes:
		es = []Expr{s.Src, s.Dst, s.Size}
	case EthWaitForBytes:
		es = []Expr{s.Size}
	case CopyTile:
		es = []Expr{s.Tile, s.Dst}
	case BinaryTiles:
		es = []Expr{s.Tile0, s.Tile1, s.Dst}
	case BcastTiles:
		es = []Expr{s.Tile0, s.Tile1, s.Dst}
	case MatmulTiles:
		es = []Expr{s.Tile0, s.Tile1, s.Dst}
	case MatmulBlockInit:
		es = []Expr{s.CtDim, s.RtDim, s.KtDim}
	case MatmulBlock:
		es = []Expr{s.Tile0, s.Tile1, s.Dst, s.CtDim, s.RtDim, s.KtDim}
	case ReduceTile:
		es = []Expr{s.Tile, s.ScalerTile, s.Dst}
	case TransposeTile:
		es = []Expr{s.Tile, s.Dst}
	case SFPU:
		es = []Expr{s.Dst, s.Src}
	case PackTile:
		es = []Expr{s.Dst, s.OutTile}
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

// CBsOf returns the CB indices s names, in argument order (inputs before the
// output for compute ops). Expressions are not searched.
func CBsOf(s Stmt) []int {
	switch s := s.(type) {
	case CBReserveBack:
		return []int{s.CB}
	case CBPushBack:
		return []int{s.CB}
	case CBWaitFront:
		return []int{s.CB}
	case CBPopFront:
		return []int{s.CB}
	case ComputeKernelHWStartup:
		return []int{s.ICB0, s.ICB1, s.OCB}
	case CopyTileInit:
		return []int{s.CB}
	case CopyTile:
		return []int{s.CB}
	case BinaryInit:
		return []int{s.ICB0, s.ICB1}
	case BinaryTiles:
		return []int{s.ICB0, s.ICB1}
	case BcastInit:
		return []int{s.ICB0, s.ICB1}
	case BcastTiles:
		return []int{s.ICB0, s.ICB1}
	case MatmulInit:
		return []int{s.In0, s.In1}
	case MatmulTiles:
		return []int{s.In0, s.In1}
	case MatmulBlockInit:
		return []int{s.In0, s.In1}
	case MatmulBlock:
		return []int{s.In0, s.In1}
	case ReduceInit:
		return []int{s.ICB, s.ScalerCB, s.OCB}
	case ReduceTile:
		return []int{s.ICB, s.ScalerCB}
	case TransposeInit:
		return []int{s.CB}
	case TransposeTile:
		return []int{s.CB}
	case PackTile:
		return []int{s.CB}
	case ReconfigDataFormat:
		return []int{s.SrcA, s.SrcB}
	case PackReconfigDataFormat:
		return []int{s.CB}
	}
	return nil
}

// ExprCBs returns the CB indices named by the calls inside e
// (get_write_ptr, get_read_ptr, get_tile_size).
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
		}
		return true
	})
	return out
}
