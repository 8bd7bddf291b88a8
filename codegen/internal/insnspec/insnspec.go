// Package insnspec is the instruction table of the kernel IR: every device
// instruction (one tt-metal kernel API call, codegen/kir's statement types
// other than the control statements) is declared here once, as data. The
// generator codegen/internal/insngen turns the table into
// codegen/kir/stmt_gen.go (the statement types and their isStmt methods,
// APIName, the kernel-class predicates, the operand and CB lists, the FPU
// reads, the init each call needs, the list of every instruction) and
// codegen/cpp/insn_gen.go (the header of every call, the argument lists the
// printer emits, the declarations the g++ syntax check compiles against).
//
// The package holds no code the compiler runs; it is imported only by the
// generator and by the freshness tests.
package insnspec

// Class is the kind of kernel an instruction may appear in.
type Class uint8

const (
	// AnyKernel: data-movement and compute kernels (the CB calls).
	AnyKernel Class = iota
	// Compute: compute kernels only.
	Compute
	// DataMovement: reader and writer kernels only.
	DataMovement
	// Eth: data-movement kernels on ethernet cores only.
	Eth
)

// FieldKind says how a field is used.
type FieldKind uint8

const (
	// Plain is a Go value printed by its Type (bool as true/false) or by a
	// hand-written printer; it is neither an operand nor a CB.
	Plain FieldKind = iota
	// CB is a circular-buffer index (int), printed as a number.
	CB
	// Expr is an expression operand that must be present.
	Expr
	// OptExpr is an expression operand that may be nil.
	OptExpr
	// L1Ptr is an expression operand holding an L1 address, printed as a
	// volatile uint32_t pointer.
	L1Ptr
)

// Field is one field of an instruction's Go type.
type Field struct {
	Name string
	Kind FieldKind
	// Type is the Go type of a Plain field (in package kir); CB fields are
	// int and expression fields kir.Expr.
	Type string
	// FPU: the CB is unpacked through the FPU source registers.
	FPU bool
}

// Insn declares one instruction.
type Insn struct {
	// Go is the statement's type name in package kir.
	Go string
	// Doc is its doc comment without the leading "// " (lines separated by
	// newlines); it starts with Go.
	Doc string
	// Section is the heading the type is listed under in the generated file.
	Section string
	Class   Class
	// Call is the tt-metal function the statement prints as. A family of
	// calls (add_tiles / sub_tiles / mul_tiles) leaves it empty and lists
	// its Variants instead: the call for each combination of field values
	// the pinned release has (any other combination has no name and cannot
	// be printed). NameFunc instead names a hand-written kir function
	// `func(s T) string` (the SFPU ops, whose names are kir.SFPUTable's).
	// A statement with none of the three prints as something other than a
	// call (L1Write32, a volatile store).
	Call     string
	NameFunc string
	Variants []Variant
	Fields   []Field
	// Args are the field names passed to the call, in C++ order. Printer,
	// when set, names a hand-written method of codegen/cpp's printer
	// `func(s kir.T) (tmpl string, args []string, comment string)` used
	// instead.
	Args    []string
	Printer string
	// Header is the compute-kernel header that declares the call(s);
	// data-movement calls come from the dataflow (or ethernet) API.
	Header string
	// Init is the Go type of the init call that must precede this call
	// (the fields of the same name are its configuration); Uninit is the
	// call that undoes this init.
	Init, Uninit string
	// DMDecl and ComputeDecl are the declarations of the call(s) for the
	// syntax check's tt_api.h, for data-movement and compute kernels (the
	// pinned release's signatures, with file:line comments). An empty
	// declaration is one another entry of the same header declares.
	DMDecl, ComputeDecl string
	// StubOnly: the compute declarations are visible only to kernels that
	// include Header (tt_api.h's tcc-header-begin / -end block).
	StubOnly bool
}

// Variant is one call of a family: the call when every field of When
// (field name, kir constant) has that value.
type Variant struct {
	When [][2]string
	Call string
}

// HasCall reports whether the instruction prints as a tt-metal call.
func (in *Insn) HasCall() bool { return in.Call != "" || in.NameFunc != "" || len(in.Variants) > 0 }

// AllCalls is every tt-metal name the instruction can print as, known
// statically (none for a NameFunc).
func (in *Insn) AllCalls() []string {
	if in.Call != "" {
		return []string{in.Call}
	}
	var out []string
	for _, v := range in.Variants {
		out = append(out, v.Call)
	}
	return out
}

// Field returns the field named n, or nil.
func (in *Insn) Field(n string) *Field {
	for i := range in.Fields {
		if in.Fields[i].Name == n {
			return &in.Fields[i]
		}
	}
	return nil
}

// IsOperand reports whether the field is an expression operand.
func (f Field) IsOperand() bool { return f.Kind == Expr || f.Kind == OptExpr || f.Kind == L1Ptr }
