// Package passes is tcc's graph pipeline: a table of passes with ordering
// constraints, run in order with verification in between, and the fusion
// rules the fuse pass applies.
//
// # Pipeline
//
// A Pass has a Name, a one-line Doc and a Run function over the graph. A
// Pipeline lists passes in order plus Constraints ("A before B", with the
// reason); Validate checks them. Default is
//
//	verify → fuse → place → verify
//
// Pipeline.Run (and the package-level Run for Default) verifies the graph
// after every pass unless Options.SkipVerify, prints it with ir.Print after
// the passes named in Options.PrintAfter, skips those in Options.Disable
// (unknown names are errors that list the valid ones), records the wall
// time of each pass in Result.Timings, and wraps errors with the pass name
// and position ("pass fuse (#2): ...").
//
// The fuse pass runs the rewrite engine (package passes/rewrite) with every
// registered rule and records firing counts per rule per layer in
// Result.Rewrites. The place pass (Place) is the minimal placement: every op
// result goes to DRAM interleaved, float results in tile layout, unless an
// earlier pass recorded a deliberate placement with Context.MarkPlaced.
//
// # Adding a fusion rule (for kernel authors)
//
// Rules come in families, one file per family: fuse_<family>.go (see
// fuse_norm.go). To add a rule:
//
//  1. Write a constructor returning a *rewrite.Rule with a Name (CamelCase,
//     used in reports and test data), a one-line Rewrite comment
//     "before => after", a Pattern built from rewrite.Op, Var, Any and
//     OneOf, an optional Where side condition (check weight kinds, shapes,
//     dtypes, attribute values with m.Value and m.Op), and a Build function
//     that emits the fused op with b.Emit1 and returns it. Build gets a
//     builder that infers types; the fused op's decomposition (the matched
//     ops) is recorded for you. If the fused op kind is new, add it to
//     ir/opspec first (Fused: true) and give it reference semantics in
//     sim/ref.
//
//  2. Register the family once in that file:
//     var _ = registerRules("family", ruleA, ruleB). Rules are tried in
//     that order at each op, so put the more specific rule first.
//
//  3. Add test data: testdata/<family>/<case>.txt, a txtar file whose
//     comment holds directives (expect=Rule, expect=Rule*N for an exact
//     count, expect-not=Rule) and whose "input" section is a graph in ir's
//     text form. Add negative cases for every side condition.
//
//  4. Write each "output" section with the command below (leave it out for
//     cases the rules leave unchanged), then read the diff: the expected
//     graph is the review.
//
//     go test ./passes -run TestRuleData -update
//
// TestRuleData runs all registered rules on every case, checks the
// directives, the printed result, that it verifies and round-trips through
// ir.Parse, and evaluates every fused op against its decomposition with the
// reference evaluator (sim/ref) on random inputs, so a rule that computes
// something else fails even when the expected text was updated blindly.
package passes
