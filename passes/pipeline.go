package passes

import (
	"fmt"
	"io"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/passes/rewrite"
)

// Pass is one step of the pipeline. Run transforms or checks the graph in
// place and returns an error naming what is wrong; the pipeline wraps it
// with the pass name.
type Pass struct {
	Name string
	Doc  string // one line: what the pass does
	Run  func(ctx *Context, g *ir.Graph) error
}

// Constraint says that pass Before must run before pass After, and why.
// It holds when the first occurrence of Before precedes the first
// occurrence of After; it is vacuous when either pass is absent or disabled.
type Constraint struct {
	Before, After string
	Reason        string
}

// Pipeline is an ordered table of passes with ordering constraints. A pass
// may appear more than once (verify does).
type Pipeline struct {
	Passes      []Pass
	Constraints []Constraint
}

// Options controls one pipeline run. The zero value verifies the graph after
// every pass, prints nothing and disables nothing.
type Options struct {
	// SkipVerify turns off ir.Verify after each pass.
	SkipVerify bool
	// PrintAfter names passes after which the graph is printed (ir.Print)
	// to PrintTo, preceded by a line "// after NAME (#N)".
	PrintAfter []string
	PrintTo    io.Writer
	// Disable names passes to skip.
	Disable []string
	// Rules replaces the registered fusion rules (Rules()) for the fuse pass.
	Rules []*rewrite.Rule
}

// Context is what a pass sees besides the graph: the run's options and the
// result it may record into.
type Context struct {
	Options Options
	Result  *Result
	placed  map[*ir.Value]bool
}

// MarkPlaced records that a pass chose v's placement deliberately; the
// place pass keeps it.
func (c *Context) MarkPlaced(v *ir.Value) {
	if c.placed == nil {
		c.placed = map[*ir.Value]bool{}
	}
	c.placed[v] = true
}

// Placed reports whether MarkPlaced was called for v.
func (c *Context) Placed(v *ir.Value) bool { return c.placed[v] }

// PassTiming is the wall time of one pass run and of the verification after it.
type PassTiming struct {
	Pass   string
	Index  int // 1-based position in the pipeline
	Run    time.Duration
	Verify time.Duration
}

// Result collects what a pipeline run did.
type Result struct {
	Timings []PassTiming
	// Rewrites holds the fuse pass's firing counts (nil if fuse did not run).
	Rewrites *rewrite.Stats
	// Place holds the place pass's counts.
	Place PlaceStats
	// PackRows holds the pack-rows pass's counts.
	PackRows PackRowsStats
}

// Names returns the distinct pass names in pipeline order.
func (p *Pipeline) Names() []string {
	var names []string
	for _, ps := range p.Passes {
		if !slices.Contains(names, ps.Name) {
			names = append(names, ps.Name)
		}
	}
	return names
}

func first(passes []Pass, name string) int {
	for i, ps := range passes {
		if ps.Name == name {
			return i
		}
	}
	return -1
}

// Validate checks that every pass has a name and a Run function, that every
// constraint names passes of the pipeline and gives a reason, and that the
// order satisfies every constraint.
func (p *Pipeline) Validate() error {
	for i, ps := range p.Passes {
		if ps.Name == "" || ps.Run == nil {
			return fmt.Errorf("pipeline: pass #%d (%q) needs a name and a Run function", i+1, ps.Name)
		}
	}
	for _, c := range p.Constraints {
		if c.Reason == "" {
			return fmt.Errorf("pipeline: constraint %s before %s gives no reason", c.Before, c.After)
		}
		for _, n := range []string{c.Before, c.After} {
			if first(p.Passes, n) < 0 {
				return fmt.Errorf("pipeline: constraint %s before %s names unknown pass %q; passes: %s", c.Before, c.After, n, strings.Join(p.Names(), ", "))
			}
		}
	}
	return checkOrder(p.Passes, p.Constraints)
}

func checkOrder(passes []Pass, cs []Constraint) error {
	for _, c := range cs {
		b, a := first(passes, c.Before), first(passes, c.After)
		if b >= 0 && a >= 0 && a < b {
			return fmt.Errorf("pipeline: %s (#%d) runs before %s (#%d), but %s must run before %s: %s", c.After, a+1, c.Before, b+1, c.Before, c.After, c.Reason)
		}
	}
	return nil
}

// checkNames rejects names in list (from option field) that are not passes.
func (p *Pipeline) checkNames(field string, list []string) error {
	valid := p.Names()
	for _, n := range list {
		if !slices.Contains(valid, n) {
			return fmt.Errorf("pipeline: unknown pass %q in %s; valid passes: %s", n, field, strings.Join(valid, ", "))
		}
	}
	return nil
}

// Run validates the pipeline and options, then runs the enabled passes in
// order on g, verifying the graph after each pass (other than verify
// itself) unless opts.SkipVerify, printing it after the passes named in
// opts.PrintAfter, and timing each pass. It stops at the first error, which
// names the pass and its position; the returned Result covers the passes
// that ran. A panicking pass is reported as an error.
func (p *Pipeline) Run(g *ir.Graph, opts Options) (*Result, error) {
	res := &Result{}
	if err := p.Validate(); err != nil {
		return res, err
	}
	if err := p.checkNames("Disable", opts.Disable); err != nil {
		return res, err
	}
	if err := p.checkNames("PrintAfter", opts.PrintAfter); err != nil {
		return res, err
	}
	if len(opts.PrintAfter) > 0 && opts.PrintTo == nil {
		return res, fmt.Errorf("pipeline: PrintAfter %v is set but PrintTo is nil", opts.PrintAfter)
	}
	if g == nil {
		return res, fmt.Errorf("pipeline: nil graph")
	}
	ctx := &Context{Options: opts, Result: res}
	for i, ps := range p.Passes {
		if slices.Contains(opts.Disable, ps.Name) {
			continue
		}
		t := PassTiming{Pass: ps.Name, Index: i + 1}
		start := time.Now()
		err := runPass(ps, ctx, g)
		t.Run = time.Since(start)
		if err != nil {
			res.Timings = append(res.Timings, t)
			return res, fmt.Errorf("pass %s (#%d): %w", ps.Name, i+1, err)
		}
		if slices.Contains(opts.PrintAfter, ps.Name) {
			if _, err := fmt.Fprintf(opts.PrintTo, "// after %s (#%d)\n%s", ps.Name, i+1, ir.Print(g)); err != nil {
				return res, fmt.Errorf("pipeline: printing after %s (#%d): %w", ps.Name, i+1, err)
			}
		}
		if !opts.SkipVerify && ps.Name != "verify" {
			start = time.Now()
			err = ir.Verify(g)
			t.Verify = time.Since(start)
			if err != nil {
				res.Timings = append(res.Timings, t)
				return res, fmt.Errorf("verification after pass %s (#%d) failed: %w", ps.Name, i+1, err)
			}
		}
		res.Timings = append(res.Timings, t)
	}
	return res, nil
}

func runPass(ps Pass, ctx *Context, g *ir.Graph) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v\n%s", r, debug.Stack())
		}
	}()
	return ps.Run(ctx, g)
}

// Run runs the default pipeline on g.
func Run(g *ir.Graph, opts Options) (*Result, error) { return Default().Run(g, opts) }
