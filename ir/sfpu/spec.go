package sfpu

// Op is a unary operation the SFPU applies to a tile in DEST. Its
// constants (table.go) index Table.
type Op uint8

// Spec declares one SFPU op; everything else about it is derived from
// here: its kernel-IR name and the graph op it lowers from (Name), the
// tt-metal calls the C++ printer emits, their template arguments and
// constant arguments, and their header (the includes follow), the
// declarations the g++ syntax check compiles against, whether it takes a
// scalar, its cost in the timing model, and its semantics in the kernel
// executor and the reference evaluator. The printer has no case of its
// own for any op.
type Spec struct {
	Op   Op
	Name string // kernel-IR name; a graph op of this name flagged SFPU lowers to it
	Call string // tt-metal call on DEST[dst]
	Init string // its init; ops sharing one init share its state
	// Header declares Call and Init; Decl is their declarations for the
	// syntax check (tt-metal's signatures, defaults included), with the
	// file and line they were read from in a comment.
	Header, Decl string
	// InitTemplate and CallTemplate are the template arguments the printer
	// passes to Init and Call, in declaration order ("" passes none, so
	// every template parameter takes its default). Eval is the exact
	// function, so every approximation switch of the declaration (a bool
	// parameter named *approx* or *fast*) must end up false: an entry
	// whose declaration defaults one to true sets it here
	// (codegen/kir's TestSFPUApproxSwitchesOff).
	InitTemplate, CallTemplate string
	// Param: the op takes a float32 scalar (SFPU.Param bits, the graph op's
	// value attribute), passed as the call's second argument.
	Param bool
	// Binary: the op's second operand is the tile DEST[SFPU.Src] (Eval's
	// p), the call is Call(dst, src, dst); no graph op lowers to it.
	Binary bool
	// Consts are constant arguments the call takes after dst, printed as
	// float32 bits with their names in a comment (softplus's beta, 1/beta
	// and threshold); Eval computes with the same values.
	Consts []Const
	// Cycles is the time of the op on one tile (sim/timing): the
	// instructions the pinned tt-llk function issues for a 32x32 tile with
	// these template arguments and an fp32 DEST (every tcc kernel with an
	// SFPU op sets fp32_dest_acc_en), counted by the rules of cycles.go.
	// CyclesSource says where the count comes from: the file and lines of
	// the function and the per-iteration arithmetic.
	Cycles       float64
	CyclesSource string
	// Eval is the op on one DEST value x (p the scalar, or for a Binary op
	// the value of DEST[src] at the same place): float32 results
	// of the float64 formula or float32 arithmetic, math_approx_mode off.
	Eval func(x, p float32) float32
}

// Const is one constant float32 argument of an SFPU call.
type Const struct {
	Name  string // the declaration's parameter name, for the printed comment
	Value float32
}

func (o Op) String() string {
	if int(o) < len(Table) {
		return Table[o].Name
	}
	return "sfpu?"
}

// Spec is the op's table entry; it panics on an op outside the table.
func (o Op) Spec() *Spec { return &Table[o] }

// HasParam reports whether the op takes a scalar parameter.
func (o Op) HasParam() bool { return int(o) < len(Table) && Table[o].Param }

// IsBinary reports whether the op reads a second DEST tile (SFPU.Src).
func (o Op) IsBinary() bool { return int(o) < len(Table) && Table[o].Binary }

// InitGroup is the first op sharing o's init call (binop_with_scalar_tile_init
// serves add_scalar and mul_scalar): after its init, any op of the group
// may run.
func (o Op) InitGroup() Op {
	for _, s := range Table {
		if s.Init == Table[o].Init {
			return s.Op
		}
	}
	return o
}

// Ops lists every Op in table order.
var Ops = func() []Op {
	ops := make([]Op, len(Table))
	for i := range Table {
		ops[i] = Table[i].Op
	}
	return ops
}()

// ByName is the op of kernel-IR name n; ok is false when the table has
// no entry n.
func ByName(n string) (op Op, ok bool) {
	for _, s := range Table {
		if s.Name == n {
			return s.Op, true
		}
	}
	return 0, false
}
