package sfpu

import "fmt"

// Code is whose SFPU code a build runs: tcc's own programs (Programs, the
// default) or tt-metal's SFPU calls (the entries' Call and Init, which
// need tt-metal's SFPI compiler to build).
type Code uint8

const (
	// CodeTCC: tcc's programs; the simulator and the reference evaluator
	// execute their instructions (ir/sfpuisa), bit for bit as ttsim.
	CodeTCC Code = iota
	// CodeLLK: tt-metal's calls; the simulator and the reference
	// evaluator compute the exact function (Spec.Eval), which tt-metal's
	// accurate implementations approximate.
	CodeLLK
)

// Codes lists the codes in order.
var Codes = []Code{CodeTCC, CodeLLK}

func (c Code) String() string {
	switch c {
	case CodeTCC:
		return "tcc"
	case CodeLLK:
		return "llk"
	}
	return fmt.Sprintf("sfpu-code(%d)", uint8(c))
}

// ParseCode is the Code named s ("tcc" or "llk").
func ParseCode(s string) (Code, error) {
	for _, c := range Codes {
		if c.String() == s {
			return c, nil
		}
	}
	return 0, fmt.Errorf("unknown SFPU code %q: want tcc (tcc's own instruction sequences, the default) or llk (tt-metal's SFPU calls; needs the SFPI compiler)", s)
}

// HasProgram reports whether tcc has its own program for o (Programs);
// an op added to Table without one runs tt-metal's call (Code.For).
func (o Op) HasProgram() bool { return int(o) < len(Programs) && Programs[o] != nil }

// For is the code op o runs under c: c, except that an op without a tcc
// program (HasProgram false) runs tt-metal's call under CodeTCC too.
func (c Code) For(o Op) Code {
	if c == CodeTCC && !o.HasProgram() {
		return CodeLLK
	}
	return c
}

// Func is op o's element function under code c: the value DEST holds
// after the op on x (and the parameter or second operand p). For CodeTCC
// it is the program's result in an fp32 DEST (Program.Eval); for CodeLLK
// the exact function.
func (o Op) Func(c Code) func(x, p float32) float32 {
	if c.For(o) == CodeTCC {
		return Programs[o].Eval
	}
	return Table[o].Eval
}

// CyclesFor is the cycles of one tile call of o under code c: for
// CodeTCC, 3 per call + 4 faces x (2 + the program's Setup +
// 8 iterations x its cycles per iteration, Program.Cycles); for CodeLLK the entry's Cycles
// (counted from tt-metal's sources).
func (o Op) CyclesFor(c Code) float64 {
	if c.For(o) == CodeTCC {
		return tileCycles(Programs[o].FaceCycles(), Programs[o].Cycles())
	}
	return Table[o].Cycles
}
