package kir

import "fmt"

// Type is the C++ type of a local variable or expression.
type Type uint8

const (
	// U32T is uint32_t (the default; all arguments are U32T).
	U32T Type = iota
	// U64T is uint64_t: NoC addresses.
	U64T
)

func (t Type) String() string {
	if t == U64T {
		return "uint64_t"
	}
	return "uint32_t"
}

// Expr is an expression node. The set of node types is closed: Const, Var,
// ArgRef, Bin, and the value-returning API calls GetWritePtr, GetReadPtr,
// GetTileSize, GetSemaphore, NoCAddr, DRAMBankAddr, MulticastAddr,
// L1Read32, MyNoCX, MyNoCY, NumDRAMBanks and, in compute kernels only,
// ReadTileValue.
type Expr interface{ isExpr() }

// Const is a uint32 literal.
type Const struct{ V uint32 }

// Var is a local variable, declared by Let or For. Names are unique within
// a kernel.
type Var struct {
	Name string
	Type Type
}

// ArgRef reads the kernel argument called Name; its kind and index come
// from the kernel's argument table.
type ArgRef struct{ Name string }

// BinOp is a binary operator.
type BinOp uint8

const (
	OpAdd BinOp = iota
	OpSub
	OpMul
	OpDiv
	OpMod
	OpShl
	OpShr
	OpAnd
	OpOr
	OpXor
	OpLt
	OpLe
	OpGt
	OpGe
	OpEq
	OpNe
	OpLAnd // &&
	OpLOr  // ||
)

var binOpSyms = [...]string{"+", "-", "*", "/", "%", "<<", ">>", "&", "|", "^", "<", "<=", ">", ">=", "==", "!=", "&&", "||"}

// Symbol is the C++ operator.
func (o BinOp) Symbol() string {
	if int(o) < len(binOpSyms) {
		return binOpSyms[o]
	}
	return fmt.Sprintf("binop(%d)", int(o))
}

func (o BinOp) String() string { return o.Symbol() }

// IsComparison reports whether o yields a 0/1 truth value.
func (o BinOp) IsComparison() bool { return o >= OpLt }

// Bin is X Op Y with C++ unsigned semantics (wrapping arithmetic in the
// expression's Type; comparisons give 0 or 1).
type Bin struct {
	Op   BinOp
	X, Y Expr
}

// GetWritePtr is get_write_ptr(CB): the L1 address of the first reserved page.
type GetWritePtr struct{ CB int }

// GetReadPtr is get_read_ptr(CB): the L1 address of the front page.
type GetReadPtr struct{ CB int }

// GetTileSize is get_tile_size(CB): bytes per tile of the CB's data format.
type GetTileSize struct{ CB int }

// GetSemaphore is get_semaphore(ID): the L1 address of semaphore ID.
type GetSemaphore struct{ ID Expr }

// NoCAddr is get_noc_addr(X, Y, Addr): the U64 NoC address of L1 address
// Addr on the core at NoC coordinates (X, Y).
type NoCAddr struct{ X, Y, Addr Expr }

// DRAMBankAddr is get_noc_addr_from_bank_id<true>(Bank, Offset): the U64 NoC
// address of byte Offset of DRAM bank Bank.
type DRAMBankAddr struct{ Bank, Offset Expr }

// MulticastAddr is get_noc_multicast_addr(X0, Y0, X1, Y1, Addr): the U64
// multicast address of L1 address Addr on the NoC rectangle (X0,Y0)-(X1,Y1).
type MulticastAddr struct{ X0, Y0, X1, Y1, Addr Expr }

// L1Read32 reads the uint32 at L1 address Addr of this core
// (*(volatile tt_l1_ptr uint32_t*)Addr).
type L1Read32 struct{ Addr Expr }

// ReadTileValue is read_tile_value(CB, Tile, Offset), a compute kernel's
// read of a value a data-movement kernel handed it through a CB: the
// uint32 at word Offset of page Tile counted from the CB's read pointer
// (the front page). The unpack thread reads it and passes it to the math
// and pack threads, so all three see one value (a loop count a compute
// kernel takes from it is the same on the three). The kernel must have
// waited for the page (cb_wait_front) and not popped it yet.
type ReadTileValue struct {
	CB           int
	Tile, Offset Expr
}

// MyNoCX is my_x[noc_index]: this core's NoC x coordinate.
type MyNoCX struct{}

// MyNoCY is my_y[noc_index]: this core's NoC y coordinate.
type MyNoCY struct{}

// NumDRAMBanks is NUM_DRAM_BANKS: the number of DRAM banks of the device the
// kernel is built for, a define of tt-metal's JIT build (8 on a p150a, 7 on
// a p100a), so interleaved addressing never bakes in a bank count.
type NumDRAMBanks struct{}

func (Const) isExpr()         {}
func (Var) isExpr()           {}
func (ArgRef) isExpr()        {}
func (Bin) isExpr()           {}
func (GetWritePtr) isExpr()   {}
func (GetReadPtr) isExpr()    {}
func (GetTileSize) isExpr()   {}
func (GetSemaphore) isExpr()  {}
func (NoCAddr) isExpr()       {}
func (DRAMBankAddr) isExpr()  {}
func (MulticastAddr) isExpr() {}
func (L1Read32) isExpr()      {}
func (ReadTileValue) isExpr() {}
func (MyNoCX) isExpr()        {}
func (MyNoCY) isExpr()        {}
func (NumDRAMBanks) isExpr()  {}

// TypeOf is the type of e: U64T for NoC addresses and any arithmetic
// involving one (comparisons are U32T), U32T otherwise.
func TypeOf(e Expr) Type {
	switch e := e.(type) {
	case Var:
		return e.Type
	case NoCAddr, DRAMBankAddr, MulticastAddr:
		return U64T
	case Bin:
		if e.Op.IsComparison() {
			return U32T
		}
		if TypeOf(e.X) == U64T || TypeOf(e.Y) == U64T {
			return U64T
		}
	}
	return U32T
}

// C is the constant v.
func C(v uint32) Expr { return Const{V: v} }

// Ci is the constant v given as an int (which must fit uint32).
func Ci(v int) Expr { return Const{V: uint32(v)} }

// Add is x + y.
func Add(x, y Expr) Expr { return Bin{OpAdd, x, y} }

// Sub is x - y.
func Sub(x, y Expr) Expr { return Bin{OpSub, x, y} }

// Mul is x * y.
func Mul(x, y Expr) Expr { return Bin{OpMul, x, y} }

// Div is x / y.
func Div(x, y Expr) Expr { return Bin{OpDiv, x, y} }

// Mod is x % y.
func Mod(x, y Expr) Expr { return Bin{OpMod, x, y} }

// Shl is x << y.
func Shl(x, y Expr) Expr { return Bin{OpShl, x, y} }

// Shr is x >> y.
func Shr(x, y Expr) Expr { return Bin{OpShr, x, y} }

// And is x & y.
func And(x, y Expr) Expr { return Bin{OpAnd, x, y} }

// Or is x | y.
func Or(x, y Expr) Expr { return Bin{OpOr, x, y} }

// Lt is x < y.
func Lt(x, y Expr) Expr { return Bin{OpLt, x, y} }

// Le is x <= y.
func Le(x, y Expr) Expr { return Bin{OpLe, x, y} }

// Gt is x > y.
func Gt(x, y Expr) Expr { return Bin{OpGt, x, y} }

// Ge is x >= y.
func Ge(x, y Expr) Expr { return Bin{OpGe, x, y} }

// Eq is x == y.
func Eq(x, y Expr) Expr { return Bin{OpEq, x, y} }

// Ne is x != y.
func Ne(x, y Expr) Expr { return Bin{OpNe, x, y} }

// LAnd is x && y.
func LAnd(x, y Expr) Expr { return Bin{OpLAnd, x, y} }

// LOr is x || y.
func LOr(x, y Expr) Expr { return Bin{OpLOr, x, y} }
