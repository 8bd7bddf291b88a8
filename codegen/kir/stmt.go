package kir

// Stmt is a statement node. The set is closed: the control statements Let,
// Assign, For, If, Comment of this file, and the instructions, one type per
// tt-metal API call, generated into stmt_gen.go from the instruction table
// codegen/internal/insnspec (which also gives each its C++ name, APIName).
// Printer and executor switch over the same set.
type Stmt interface{ isStmt() }

// ---- control ----

// Let declares Var and initialises it with Value (`uint32_t v = value;`).
type Let struct {
	Var   Var
	Value Expr
}

// Assign stores Value into a declared Var.
type Assign struct {
	Var   Var
	Value Expr
}

// For is `for (uint32_t v = Start; v < End; v += Step) { Body }`; End and
// Step are re-evaluated every iteration as in C++. A nil Step means 1.
type For struct {
	Var        Var
	Start, End Expr
	Step       Expr
	Body       []Stmt
}

// If is `if (Cond) { Then } else { Else }` (Cond != 0 is true).
type If struct {
	Cond Expr
	Then []Stmt
	Else []Stmt
}

// Comment is printed as a C++ comment; it does nothing.
type Comment struct{ Text string }

func (Let) isStmt()     {}
func (Assign) isStmt()  {}
func (For) isStmt()     {}
func (If) isStmt()      {}
func (Comment) isStmt() {}

// ---- the enums of the instructions' plain fields ----

// EltwiseOp is an FPU element-wise binary operation.
type EltwiseOp uint8

const (
	EltAdd EltwiseOp = iota
	EltSub
	EltMul
)

func (o EltwiseOp) String() string {
	switch o {
	case EltAdd:
		return "add"
	case EltSub:
		return "sub"
	}
	return "mul"
}

// BcastDim says which part of the second operand tile is broadcast.
type BcastDim uint8

const (
	// BcastRows broadcasts row 0 of in1 down all rows.
	BcastRows BcastDim = iota
	// BcastCols broadcasts column 0 of in1 across all columns.
	BcastCols
	// BcastScalar broadcasts element (0,0) of in1.
	BcastScalar
)

func (d BcastDim) String() string {
	switch d {
	case BcastRows:
		return "rows"
	case BcastCols:
		return "cols"
	}
	return "scalar"
}

// ReduceOp is the reduction function.
type ReduceOp uint8

const (
	ReduceSum ReduceOp = iota
	ReduceMax
)

func (o ReduceOp) String() string {
	if o == ReduceMax {
		return "max"
	}
	return "sum"
}

// ReduceDim is the reduced dimension.
type ReduceDim uint8

const (
	// ReduceRow reduces each row to one value (result in column 0).
	ReduceRow ReduceDim = iota
	// ReduceCol reduces each column to one value (result in row 0).
	ReduceCol
	// ReduceScalar reduces the tile to element (0,0).
	ReduceScalar
)

func (d ReduceDim) String() string {
	switch d {
	case ReduceRow:
		return "row"
	case ReduceCol:
		return "col"
	}
	return "scalar"
}
