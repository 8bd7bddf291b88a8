// Package passes is tcc's graph pipeline: a table of passes with ordering
// constraints, run in order with verification in between, and the fusion
// rules the three fusion passes apply.
//
// # Pipeline
//
// A Pass has a Name, a one-line Doc and a Run function over the graph. A
// Pipeline lists passes in order plus Constraints ("A before B", with the
// reason); Validate checks them. Default is
//
//	verify → fuse-blocks → fuse-layout → fuse → fuse-boundaries → pack-rows → place → verify
//
// fuse-boundaries (fuse_boundary.go) joins a layer's closing
// all_reduce_add and the next layer's input rms_norm, which the rewrite
// engine cannot (it never matches across regions). pack-rows
// (pack_rows.go) runs the row-wise programs of a decode step of B > 1
// users on the users' rows packed into one tile row.
//
// Pipeline.Run (and the package-level Run for Default) verifies the graph
// after every pass unless Options.SkipVerify, prints it with ir.Print after
// the passes named in Options.PrintAfter, skips those in Options.Disable
// (unknown names are errors that list the valid ones), records the wall
// time of each pass in Result.Timings, and wraps errors with the pass name
// and position ("pass fuse (#4): ..."). Options.Rules replaces the
// registered rules (Rules()) for one run; that is how --disable RULE and
// the tests leave a rule out.
//
// The fusion passes run the rewrite engine (package passes/rewrite) and
// merge its firing counts per rule per region into Result.Rewrites. The
// place pass (Place) is the minimal placement: every op result goes to
// DRAM interleaved, float results in tile layout, unless an earlier pass
// recorded a deliberate placement with Context.MarkPlaced.
//
// # The three fusion passes
//
// Rules come in families, one file per family: fuse_<family>.go. StageOf
// (the stageOf table in default.go) assigns each family to one pass:
//
//   - fuse-blocks (gdn, attention, mlp): whole blocks, matched as the
//     model writes them, INCLUDING their reshapes, typecasts, to_memory
//     copies and slices: the GDN conv + gates and recurrence, the GDN
//     prefill's chunk steps, the attention prologue and gated SDPA, the
//     SwiGLU MLP. Put a rule here when its pattern needs those layout ops
//     to be still present.
//   - fuse-layout (layout): folds the layout ops that are left (reshape
//     chains, typecast round trips, memory moves, the embedding reshape)
//     into neighbouring programs, joins data movements in a row into one
//     layout_chain (the GDN prefill's head split and output path) and
//     moves an RMSNorm of rows moved whole before the movement.
//   - fuse (every other family: norm, residual, collective, eltwise,
//     matmul, and out-of-tree packages): epilogues and small groups, seen
//     after layout elimination, so their patterns look through no layout
//     op: rms_norm, add + rms_norm, all_reduce + add (+ rms_norm), sibling
//     matmuls, matmul + add, eltwise chains.
//
// A family not in stageOf runs in fuse. Within a pass the engine scans
// each region's ops in program order and tries, at each op, the rules
// anchored at that op's kind: families in name order, each family's rules
// in its own order; the first match fires, dead ops are erased and the
// scan restarts, until nothing matches. Two consequences for rule authors:
// a generic rule anchored early in a sequence (an eltwise chain rule at
// rsqrt) fires before a specific rule anchored at the sequence's last op
// (the norm rule at the final mul) and can break its pattern, so give
// generic rules side conditions that leave such interiors alone; and a
// rule must not depend on another having fired for correctness (every rule
// can be disabled, see Testing).
//
// # Adding a fusion rule (for kernel authors)
//
// A rule is one constructor in its family's file plus test data:
//
//  1. The fused op. If the replacement is a new op kind, add it to the
//     family's list in ir/opspec/fused.go with Fused: true and a one-line
//     Doc giving its exact semantics, including where it rounds to the
//     storage dtype (reproduce the decomposition's rounding points, so the
//     fused op agrees with it at storage formats); write its shape rule in
//     ir/shape_rules_<family>.go first, then run go generate ./ir; give it
//     a reference evaluator, written from the Doc line (not by evaluating
//     the decomposition), in sim/ref/fused_<family>.go.
//
//     Then its lowering: a function func(op *ir.Op, ctx *Context)
//     (*kir.Program, error) in codegen/lower (built from the blocks and
//     primitives the existing fused lowerings use) registered in the
//     lowerings table of codegen/lower/lower.go, for example
//
//     ir.OpMatmulSwiGLU: lowerMatmulSwiGLU,
//
//     and a case in codegen/lower's simulator tests (modelops_test.go or
//     the family's fused_*_test.go) that runs the program on random
//     inputs and compares it with the evaluator bit for bit.
//     TestEveryOpKindHasALowering fails for an op kind in the table
//     without one, so a fused op cannot pass the tests and fail only at
//     tcc run.
//
//  2. The rule: a constructor returning a *rewrite.Rule with a Name
//     (CamelCase, unique across all families; used in reports, test data
//     and --disable), a one-line Rewrite comment "before => after", a
//     Pattern built from rewrite.Op, Var, Any and OneOf (name ops with As
//     to read their attributes), a Where side condition that rejects
//     every match the replacement does not compute exactly (check weight
//     kinds, shapes, dtypes and attributes with m.Value and m.Op), and a
//     Build that emits the replacement with b.Emit / b.Emit1 and returns
//     one value per replaced root result. The builder infers result types;
//     for every emitted op whose table entry is Fused the matched ops are
//     recorded as its decomposition (op.Decomp) and op.Rule names the rule.
//     By default a match whose interior values are read outside it is
//     rejected, so fusion never duplicates work (Rule.AllowSharedInterior
//     lifts this).
//
//  3. Register it: the family file holds one
//     var _ = registerRules("family", ruleA, ruleB); rules are tried in
//     that order at each op, so put the more specific rule first. A new
//     family runs in the fuse pass unless it is added to stageOf.
//
//  4. Test data: testdata/fuse_<family>/<case>.txt, a txtar file whose
//     comment holds directives (expect=Rule, expect=Rule*N for an exact
//     count, expect-not=Rule) and whose "input" section is a graph in ir's
//     text form; write the "output" sections with
//
//     go test ./passes -run TestRuleData -update
//
//     and read the diff: the expected graph is the review. Add a negative
//     case for every side condition.
//
// # Multi-root patterns
//
// A fused op with several results (the GDN recurrence's output and new
// state, sibling matmuls reading one activation, add + rms_norm's sum and
// normed value) replaces several roots. Rule.Extra lists further root
// patterns; each is matched at another op of the same region and shares
// Pattern's variable and op bindings (a Var("x") in two roots must bind the
// same value). Build returns one replacement per result of every root, in
// order: Pattern's root first, then each Extra root. The new ops go just
// before the last root in program order, so a result of an earlier root
// may not be read outside the match before that point (the engine rejects
// such matches). Persistent state is updated in place: when a replaced
// root result is the value recorded in g.StateUpdates, the engine rewires
// the state update to the fused op's result, which must stay the state's
// new value (same shape and dtype).
//
// # Testing
//
// Besides the rule's own test data, every rule is checked without writing
// any test code:
//
//   - TestRuleData runs all rules on every testdata/*/*.txt case: the
//     directives, the expected output, verification, round-tripping
//     through ir.Parse, and each fused op against its decomposition in
//     exact math.
//   - TestEveryRuleEquivalent runs the default pipeline on tiny-mlp, the
//     small Qwen config (models/qwen27b/testdata/small.json; decode on
//     meshes 1x1 and 1x2, prefill on 1x2) and every test data input,
//     evaluates unfused and fused graphs with sim/ref at storage formats
//     on the same data, and checks every fused op a rule created (nested
//     ones included) against its decomposition (rewrite.EquivalencePair)
//     on the operand values the model actually produced there: PCC >=
//     0.9999 per result, maximum relative error logged. A rule that emits
//     no fused op is run alone and checked on the whole graph. A
//     registered rule that fires nowhere fails the test: give it a test
//     data case.
//   - TestDisableEachRule leaves each rule out in turn (on the small Qwen
//     config at 1x2 and tiny-mlp): the graph must verify and give the
//     unfused logits (PCC >= 0.999) and greedy tokens.
//   - TestFusedMatchesUnfused runs a prefill and 16 decode steps of the
//     small config at 1x2, states carried across steps, fused vs unfused.
//   - FuzzPipeline builds random graphs of eltwise, matmul and decomposed
//     norm ops and checks that the pipeline never fails and keeps the
//     outputs (go test -fuzz FuzzPipeline ./passes to explore).
//
// Per-rule figures: go test ./passes -run 'TestEveryRuleEquivalent/<family>' -v.
//
// # Seeing a rule's effect
//
//	tcc passes                                    # passes, constraints, rules by family
//	tcc report ops MODEL --stage fused            # ops per layer and rules fired per layer
//	tcc ir MODEL --print-after fuse-blocks --layer N
//	                                              # one layer after a pass (fuse-layout, fuse, ...)
//	tcc report ops MODEL --stage fused --disable RULE
//	                                              # the same without one rule (or pass)
//
// For the Qwen model add --config models/qwen27b/testdata/small.json for
// the small config and --mesh 1x2 for tensor parallelism.
//
// # Rules outside tcc
//
// A rule package kept outside this package (even in another module) is
// linked in at the command line with --rules DIR: it declares
// func Rules() []*rewrite.Rule and optionally const Family; tcc builds and
// caches a driver binary with the rules registered through
// RegisterExternal, after which they behave like built-in ones (listed by
// tcc passes, counted in reports, run in the fuse pass, subject to
// --disable). Such rules can only emit op kinds tcc's op table already has.
// See package passes/external and the worked example passes/external/example.
//
// # A rule that reads like its comment
//
// A rule that emits one op can be written from its pattern alone: the
// "before" half of the summary comes from the pattern (rewrite.Describe),
// rewrite.Emit builds the replacement from bound variables (rewrite.AttrsOf
// and rewrite.RootShape copy attributes), and every replacement keeps the
// tensor-parallel split of the value it replaces unless the rule sets
// NewDist:
//
//	func ruleMatmulAdd() *rw.Rule {
//		return &rw.Rule{Name: "FuseMatmulAdd", After: "matmul_add(a, w, r)",
//			Pattern: rw.Op(ir.OpAdd, rw.Var("r"), rw.Op(ir.OpMatmul, rw.Var("a"), rw.Var("w")).As("mm")),
//			Where: func(m *rw.Match) bool {
//				return sameTensorType(m.Value("r"), m.Op("mm").Result(), m.Root.Result()) && !readByNormInRegion(m.Root.Result(), m.Root.Region)
//			},
//			Build: rw.Emit(ir.OpMatmulAdd, nil, "a", "w", "r")}
//	}
//
// tcc passes prints it as "add(r, matmul(a, w)) => matmul_add(a, w, r)".
// FuseMatmulAdd, FuseRMSNormMatmul, FuseEmbeddingReshape and DropToMemory
// are written this way. Where the fused form is an op models also write,
// the rule emits that op instead of a twin kind, so that the rules
// downstream match one kind: FuseRMSNorm folds tiny-mlp's written-out norm
// into rms_norm, the op qwen27b writes (not a fused op: it carries no
// decomposition, and the whole-graph check of each case covers the rule).
//
// The rule data of every rule, built-in and linked in, also runs from the
// command line:
//
//	tcc check './passes/testdata/*/*.txt'        # tcc's own cases (98)
//	tcc check --rules ./passes/external/example './passes/external/example/testdata/*.txt'
//
// Out-of-tree rule packages get the same runner in their tests:
// rulestest.Run(t, "testdata/*.txt", Rules(), rulestest.Options{})
// (package passes/rulestest; the example package's rules_test.go uses it).
//
// Trust boundary: a rule package is Go code that tcc compiles and runs with
// your privileges (its side conditions and builders run inside tcc's rule
// driver); load only packages you trust. The driver is supervised: it is
// killed after --rules-timeout (default 10m, 0 = none), it stops when tcc is
// interrupted, terminated or killed, a panic in a rule is one error line
// naming the rule, the op and its layer, and a driver that exits before
// finishing the command (a rule calling os.Exit) is an error.
//
// # Adding a pass
//
// Add a Pass (name, one-line doc, Run function) to the pipeline table in
// default.go with any ordering constraints and their reasons. The graph is
// verified after every pass in tests; tcc ir MODEL --print-after NAME dumps
// it.
//
// # What the pipeline does to qwen27b
//
// tcc report ops qwen27b --mesh 1x2 --stage fused (decode, batch 1, per
// device): every GDN decoder layer is 8 programs (4-way in-projection, conv
// + gates, recurrence + norm + gate, out-projection, all-reduce + residual
// + post norm, gate/up + SwiGLU, down, all-reduce + residual + the next
// layer's input norm), every attention layer 8; layer 0 also opens with its
// input norm, the last layer ends in all-reduce + residual, the head is 3
// (norm, lm_head, the sharded argmax: each card's argmax of its logits,
// (key, index) swapped over ethernet), and the step is 517 programs,
// from 4,454 unfused. The layer boundary is joined by the fuse-boundaries
// pass (after fuse: the rewrite engine never matches across regions), which
// charges the next layer's input norm to the closing layer
// (FuseLayerBoundaryNorm in the reports). At B > 1 the pack-rows pass
// retypes every row-wise program to [1, B, X], the B users as rows of one
// tile row, so each matmul streams its weights once for all users (584
// programs at B = 8).
//
// qwen27b's unfused graph mirrors the composed TTNN decode path, one op per
// device program; per device at mesh 1x2 (decode, batch 1):
//
//	part                          tcc unfused   measured composed path
//	GDN mixer                     63            71
//	attention mixer               41            44
//	MLP                           7             7
//	norms + residual adds/layer   5             a few, not in the 4,560
//	whole step                    4,454         4,560 for mixers + MLPs
//
// Where the counts differ: the in-projection is one matmul per checkpoint
// tensor instead of one concatenated matmul plus five slices (-2); the conv
// state is one [B, 3, C] tensor, so the shift register is a concat and a
// strided slice and the four taps one broadcast multiply and one sum (-4);
// the gates compute -exp(A_log) on device because the checkpoint stores
// A_log (+2, weight-only); six reshapes that only ttnn.matmul's rank rules
// need are absent (-6); attention splits heads from the checkpoint layout
// (+4) and applies each q/k norm as one rms_norm with the (1 + w) offset
// (-2). The group-by-group table is in models/qwen27b/doc.go. At mesh 1x1
// the collectives disappear (4,261 ops); 1x4 and 1x8 count like 1x2.
package passes
