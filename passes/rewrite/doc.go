// Package rewrite is tcc's pattern rewrite engine: named rules that match
// small op trees in a graph region and replace them, typically by one fused op.
//
// A Rule has a Name, a one-line Rewrite comment "before => after", a Pattern,
// an optional side condition Where and a Build function. Patterns are trees:
//
//	Op(kind, operands...)  a value produced by an op of that kind, in the root's region
//	Var("x")               any value, bound to x; a repeated x must bind the same value
//	Any()                  any value, unbound
//	OneOf(p, q, ...)       the first alternative that matches
//
// Op(...).As("name") names a matched op so Where and Build can read its
// attributes (Match.Op), and Match.Value returns bound variables. Operands of
// commutative ops (add, mul; see Commutative) are tried in both orders.
//
// By default a match is rejected when a value computed inside it (by a
// matched op other than the root) is read outside it, is a graph output or a
// state update: fusing it would compute that value twice. Rules may opt out
// with AllowSharedInterior.
//
// Build receives a Builder that inserts new ops just before the root and
// infers their types with ir.InferTypes; it returns the values that replace
// the root's results. Every fused op it creates (ir.OpInfo.Fused) gets an
// ir.Decomposition: clones of the matched ops reading placeholder inputs,
// one per fused operand, in operand order. EquivalencePair turns a fused op
// into two standalone graphs (fused and decomposed) with matching inputs, for
// checking one against the other on random data with the reference evaluator.
//
// Engine.Run applies the rules region by region to a fixpoint, erasing dead
// ops after every firing, and returns Stats with firing counts per rule per
// region. Rules that undo each other are detected when a region returns to
// a state it had before; runaway rules hit a firing bound. Both are errors
// naming the rules.
package rewrite
