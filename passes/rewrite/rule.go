package rewrite

import (
	"fmt"
	"strings"

	"github.com/tcc-dev/tcc/ir"
)

// Rule is one named rewrite: a pattern, an optional side condition and a
// replacement builder.
type Rule struct {
	// Name identifies the rule in firing counts, errors and test data
	// (expect=Name); unique within an engine.
	Name string
	// Rewrite is a one-line summary "before => after", for example
	// "mul(mul(x, rsqrt(add_scalar(mean(square(x)), eps))), w) => rms_norm(x, w)".
	// Leave it empty and set After to have the before half written from
	// Pattern (see Describe).
	Rewrite string
	// After is the "after" half of Rewrite when Rewrite is empty.
	After string
	// Pattern is matched at every op of a region as root; its outermost
	// node must be an Op pattern.
	Pattern *Pattern
	// Where is an optional side condition; the match is used only if it
	// returns true. It may read bound values' types and matched ops'
	// attributes and must not modify the graph.
	Where func(m *Match) bool
	// Build creates the replacement ops with b (inserted just before the
	// root) and returns one replacement value per root result, each with
	// the root result's shape and dtype. Every ir.OpInfo.Fused op it emits
	// records the matched ops as its decomposition, unless Build set the
	// op's Decomp itself (a fused op that does not replace the whole
	// match, such as a chain re-emitted with a step moved out of it).
	Build func(b *Builder, m *Match) ([]*ir.Value, error)
	// Extra are further root patterns for multi-output groups (the GDN
	// recurrence's new state and output, sibling matmuls reading one
	// activation): each is matched after Pattern, at some other op of the
	// same region, sharing Pattern's variable and op bindings. The match's
	// Roots are Pattern's root then one op per Extra; Build returns one
	// replacement per result of every root, in that order; the new ops go
	// before the last root in program order, so no result of an earlier
	// root may be read outside the match before that point.
	Extra []*Pattern
	// AllowSharedInterior lets the rule match even when a value produced
	// inside the match (not by the root) is also used outside it; the
	// interior ops then stay alive. By default such a match is rejected,
	// so fusion never duplicates work.
	AllowSharedInterior bool
	// NewDist says Build sets the tensor-parallel split (Type.Dist) of the
	// replacement values itself. By default the engine gives each emitted
	// replacement the split of the root result it replaces.
	NewDist bool
}

// Summary is Rewrite, or "Describe(Pattern) => After" when Rewrite is
// empty and After is set.
func (r *Rule) Summary() string {
	if r.Rewrite == "" && r.After != "" && r.Pattern != nil {
		return Describe(r.Pattern) + " => " + r.After
	}
	return r.Rewrite
}

// Before returns the "before" half of the Rewrite comment.
func (r *Rule) Before() string {
	before, _, _ := strings.Cut(r.Summary(), "=>")
	return strings.TrimSpace(before)
}

// After returns the "after" half of the Rewrite comment.
func (r *Rule) AfterHalf() string {
	_, after, _ := strings.Cut(r.Summary(), "=>")
	return strings.TrimSpace(after)
}

// Validate reports a rule that cannot be run: no name, a Rewrite comment
// that is not one line of the form "before => after", a malformed pattern,
// a pattern whose root is not an Op, or no Build function.
func (r *Rule) Validate() error {
	if r == nil {
		return fmt.Errorf("rewrite: nil rule")
	}
	if r.Name == "" {
		return fmt.Errorf("rewrite: rule with pattern %v has no name", r.Pattern)
	}
	if s := r.Summary(); strings.Count(s, "=>") != 1 || strings.ContainsAny(s, "\n\r") || r.Before() == "" || r.AfterHalf() == "" {
		return fmt.Errorf("rewrite: rule %s: Rewrite comment %q must be one line \"before => after\" (or set After)", r.Name, s)
	}
	if r.Pattern == nil || r.Pattern.kind != patOp {
		return fmt.Errorf("rewrite: rule %s: pattern root must be an Op pattern, got %v", r.Name, r.Pattern)
	}
	if err := r.Pattern.check(); err != nil {
		return fmt.Errorf("rewrite: rule %s: pattern %v: %w", r.Name, r.Pattern, err)
	}
	for i, p := range r.Extra {
		if p == nil || p.kind != patOp {
			return fmt.Errorf("rewrite: rule %s: extra root pattern %d must be an Op pattern, got %v", r.Name, i, p)
		}
		if err := p.check(); err != nil {
			return fmt.Errorf("rewrite: rule %s: extra pattern %v: %w", r.Name, p, err)
		}
	}
	if r.Build == nil {
		return fmt.Errorf("rewrite: rule %s has no Build function", r.Name)
	}
	return nil
}

// RootKind is the op kind the rule's pattern is anchored at.
func (r *Rule) RootKind() ir.OpKind { return r.Pattern.op }
