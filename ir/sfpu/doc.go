// Package sfpu is the table of the SFPU's unary ops, the one place an
// SFPU op is declared. An entry says what the op computes on one value
// (Eval, the exact function) and how a kernel asks the card for it: the
// tt-metal call and its init, their header, declarations, template and
// constant arguments, and the op's time per tile.
//
// Every layer reads its part of an entry and has no case of its own per
// op: the graph reference evaluator (sim/ref) and the kernel executor
// (sim/kexec) run Eval, the lowerings and the eltwise-chain rules find an
// op by the name of the graph op flagged SFPU (ir/opspec), the C++ printer
// prints its calls and includes, the g++ syntax check compiles against its
// declarations, and the timing model charges its cycles. codegen/kir names
// the ops the lowerings use (kir.SFPUExp is Exp).
//
// The package sits at the bottom of the layering, beside ir/numerics whose
// SFPU functions the entries call, so that the reference evaluator reads
// the semantics without depending on codegen.
package sfpu
