// Package example is a worked example of an out-of-tree fusion rule
// package: rules kept outside tcc's passes package and linked into tcc at
// the command line. It adds the family "scalar" with one rule,
// FoldMulScalar:
//
//	mul_scalar(mul_scalar(x, a), b) => mul_scalar(x, a*b)
//
// # Using it
//
// From the tcc checkout:
//
//	tcc passes --rules ./passes/external/example
//	tcc report ops tiny-mlp --stage fused --rules ./passes/external/example
//	tcc ir tiny-mlp --stage fused --rules ./passes/external/example --disable FoldMulScalar
//
// The first command builds a tcc binary with the rules linked in (the rule
// driver, see package passes/external) and caches it; the next ones reuse
// it until a source file changes. The new family and rule then behave like
// built-in ones: `tcc passes` lists them, reports count their firings and
// --disable turns them off.
//
// # Writing a rule package
//
//  1. Make a package that is not main, in the tcc tree (like this one) or
//     in a module of its own (see below).
//
//  2. Declare exactly func Rules() []*rewrite.Rule (rewrite is
//     github.com/tcc-dev/tcc/passes/rewrite), returning new rule values in
//     the order they are tried at each op, more specific rules first. tcc
//     rejects the package, naming it, if the signature differs.
//
//  3. Optionally declare const Family = "name" (ASCII letters, digits, '_'
//     and '-'; not a built-in family such as "norm"); the default is the
//     package name.
//
//  4. Write each rule as in tcc's own families (package passes, "Adding a
//     fusion rule"): a Name unique among all rules, a one-line Rewrite
//     "before => after", a Pattern built from rewrite.Op, Var, Any and
//     OneOf (name ops with As to read their attributes), a Where side
//     condition that rejects every match where the replacement is not a
//     valid substitute, and a Build that emits the replacement with b.Emit1.
//     Rules must not keep mutable state: tcc copies them per run. Ops must
//     exist in tcc's op table (ir/opspec); a new fused op kind needs a
//     change to tcc itself.
//
//  5. Test the rules with test data, as tcc's own are: txtar cases with
//     expect=Rule / expect-not=Rule directives, an input graph and the
//     expected output, run by rulestest.Run (github.com/tcc-dev/tcc/
//     passes/rulestest), which also checks every fused op against its
//     decomposition; see rules_test.go and testdata/ here. Or, without
//     the runner: register them with
//     passes.RegisterExternal(Family, Rules()...) and run passes.Run on
//     small graphs, written in ir's text form and read with ir.Parse,
//     checking firing counts (Result.Rewrites) and the rewritten graph, with
//     a negative case for every side condition; passes/external's
//     register_test.go does this for FoldMulScalar, and also compares the
//     fused and unfused graphs with the reference evaluator (sim/ref).
//
// # A rule package in its own module
//
// The module must build on its own against a tcc checkout: require tcc,
// point at the checkout with a replace directive (or a go.work), use a go
// directive no older than tcc's, and run go mod tidy:
//
//	module example.com/myrules
//
//	go 1.26.8
//
//	require github.com/tcc-dev/tcc v0.0.0
//
//	replace github.com/tcc-dev/tcc => ../tcc
//
// Then pass its directory (relative to the working directory, which need
// not be in that module): tcc passes --rules ../myrules. The driver is built
// from the tcc checkout the replace directive names.
//
// FoldMulScalar's side condition is the interesting part: folding is only
// valid when it cannot overflow, underflow or produce NaN where the pair of
// ops would not, so it requires a, b and a*b to be finite, within float32
// range, and a*b non-zero unless a or b is zero.
package example
