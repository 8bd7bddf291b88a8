package passes

import (
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/passes/rewrite"
)

// Default returns the standard pipeline: verify, fuse, place, verify.
func Default() *Pipeline {
	return &Pipeline{
		Passes: []Pass{VerifyPass, FusePass, PlacePass, VerifyPass},
		Constraints: []Constraint{
			{"verify", "fuse", "rewrite rules read inferred types and assume SSA order; a malformed graph must be reported as such, not as a rule failure"},
			{"fuse", "place", "placement is decided for the ops that exist after fusion; interior values of a fused op are never placed"},
		},
	}
}

// VerifyPass checks the graph with ir.Verify.
var VerifyPass = Pass{
	Name: "verify",
	Doc:  "check graph invariants (SSA order, op table types, placements)",
	Run:  func(_ *Context, g *ir.Graph) error { return ir.Verify(g) },
}

// FusePass runs the rewrite engine with Options.Rules, or every registered
// rule (Rules()) when that is nil, records the firing counts in
// Result.Rewrites, and renumbers the graph so printed IDs are dense.
var FusePass = Pass{
	Name: "fuse",
	Doc:  "apply the fusion rewrite rules to a fixpoint, layer by layer",
	Run: func(ctx *Context, g *ir.Graph) error {
		rules := ctx.Options.Rules
		if rules == nil {
			rules = Rules()
		}
		e, err := rewrite.NewEngine(rules...)
		if err != nil {
			return err
		}
		st, err := e.Run(g)
		ctx.Result.Rewrites = st
		if err != nil {
			return err
		}
		g.Renumber()
		return nil
	},
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
