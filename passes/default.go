package passes

import (
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/passes/rewrite"
)

// Default returns the standard pipeline: verify, the three fusion stages,
// fuse-boundaries, pack-rows, place, verify.
func Default() *Pipeline {
	return &Pipeline{
		Passes: []Pass{VerifyPass, FuseBlocksPass, FuseLayoutPass, FusePass, FuseBoundariesPass, PackRowsPass, PlacePass, VerifyPass},
		Constraints: []Constraint{
			{"verify", "fuse-blocks", "rewrite rules read inferred types and assume SSA order; a malformed graph must be reported as such, not as a rule failure"},
			{"fuse-blocks", "fuse-layout", "block rules (GDN, attention, MLP) match the composed op sequence including its reshapes, typecasts and memory moves; layout elimination first would break those patterns"},
			{"fuse-layout", "fuse", "epilogue rules (residual + norm, collectives, eltwise chains) look through no layout ops; they must see the graph after layout elimination"},
			{"fuse", "place", "placement is decided for the ops that exist after fusion; interior values of a fused op are never placed"},
			{"fuse", "fuse-boundaries", "the boundary join reads the all_reduce_add and rms_norm ops the collective and norm families create"},
			{"fuse-boundaries", "pack-rows", "the joined all_reduce_add_rmsnorm is a row-wise program; packing retypes the ops that exist"},
			{"fuse", "pack-rows", "fusion rules match the model's [B,1,X] per-user shapes; packing decides per fused program which rows it runs on"},
			{"pack-rows", "place", "the reshapes pack-rows inserts need placements like every other result"},
		},
	}
}

// stageOf assigns rule families to fusion passes; families not listed
// (norm, residual, eltwise, external rule packages, ...) run in "fuse".
var stageOf = map[string]string{
	"gdn":       "fuse-blocks",
	"attention": "fuse-blocks",
	"mlp":       "fuse-blocks",
	"layout":    "fuse-layout",
}

// StageOf is the fusion pass that applies family's rules.
func StageOf(family string) string {
	if s, ok := stageOf[family]; ok {
		return s
	}
	return "fuse"
}

// FuseBlocksPass fuses whole blocks: the GDN conv + gates and recurrence,
// the GDN prefill's chunk steps, the attention prologue, the MLP.
var FuseBlocksPass = fusePass("fuse-blocks", "fuse whole blocks (GDN conv + gates, recurrence + norm + gate, prefill chunk steps, attention prologue, MLP) to a fixpoint")

// FuseLayoutPass eliminates layout ops (reshapes, slices, typecasts, copies,
// memory moves) into their producers' or consumers' addressing.
var FuseLayoutPass = fusePass("fuse-layout", "fold remaining reshapes, slices, typecasts, copies and memory moves into neighbouring programs")

// FusePass applies the epilogue families (norms, residual adds,
// collectives, eltwise chains, matmul epilogues) and external rule packages.
var FusePass = fusePass("fuse", "apply norm, residual, collective, eltwise and epilogue rules (and external rule packages) to a fixpoint")

// fusePass runs the rewrite engine with the rules of the families assigned
// to stage name — taken from Options.Rules when set, else every registered
// rule — merges the firing counts into Result.Rewrites, and renumbers the
// graph so printed IDs are dense.
func fusePass(name, doc string) Pass {
	return Pass{Name: name, Doc: doc, Run: func(ctx *Context, g *ir.Graph) error {
		rules := ctx.Options.Rules
		if rules == nil {
			rules = Rules()
		}
		family := map[string]string{}
		for _, f := range Families() {
			for _, r := range FamilyRules(f) {
				family[r.Name] = f
			}
		}
		var mine []*rewrite.Rule
		for _, r := range rules {
			if StageOf(family[r.Name]) == name {
				mine = append(mine, r)
			}
		}
		if ctx.Result.Rewrites == nil {
			ctx.Result.Rewrites = rewrite.NewStats()
		}
		if len(mine) == 0 {
			return nil
		}
		e, err := rewrite.NewEngine(mine...)
		if err != nil {
			return err
		}
		st, err := e.Run(g)
		ctx.Result.Rewrites.Merge(st)
		if err != nil {
			return err
		}
		g.Renumber()
		return nil
	}}
}

// VerifyPass checks the graph with ir.Verify.
var VerifyPass = Pass{
	Name: "verify",
	Doc:  "check graph invariants (SSA order, op table types, placements)",
	Run:  func(_ *Context, g *ir.Graph) error { return ir.Verify(g) },
}

// PlacePass is the minimal placement; see Place. Values recorded with
// Context.MarkPlaced by earlier passes keep their placement.
var PlacePass = Pass{
	Name: "place",
	Doc:  "give every op result a placement: DRAM interleaved, tile layout for floats",
	Run: func(ctx *Context, g *ir.Graph) error {
		ctx.Result.Place = Place(g, ctx.Placed)
		return nil
	},
}
