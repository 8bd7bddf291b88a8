package rewrite

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/tcc-dev/tcc/ir"
)

// Engine applies a fixed, ordered set of rules to graphs.
type Engine struct {
	rules  []*Rule
	byKind map[ir.OpKind][]*Rule
	// MaxFirings bounds the firings per region; 0 means 64 plus 8 per op
	// the region had when the engine reached it.
	MaxFirings int
}

// NewEngine validates the rules (see Rule.Validate; names must be unique)
// and returns an engine that tries them in the given order.
func NewEngine(rules ...*Rule) (*Engine, error) {
	e := &Engine{byKind: map[ir.OpKind][]*Rule{}}
	seen := map[string]bool{}
	for _, r := range rules {
		if err := r.Validate(); err != nil {
			return nil, err
		}
		if seen[r.Name] {
			return nil, fmt.Errorf("rewrite: two rules named %s", r.Name)
		}
		seen[r.Name] = true
		e.rules = append(e.rules, r)
		e.byKind[r.RootKind()] = append(e.byKind[r.RootKind()], r)
	}
	return e, nil
}

// Rules returns the engine's rules in order.
func (e *Engine) Rules() []*Rule { return append([]*Rule(nil), e.rules...) }

// Run rewrites g region by region until no rule matches (a fixpoint), then
// returns the firing counts. Within a region it scans ops in program order,
// trying the rules anchored at each op's kind in rule order; after each
// firing it erases dead ops and rescans from the start. Matched ops other
// than Var/Any bindings must lie in the root's region, so a rewrite never
// moves work between layers.
//
// On return every region is at a fixpoint and holds no dead op (an op none
// of whose results is read, is a graph output or is a state update). Run
// fails, naming the rules, if a region returns to a state it had before
// (rules that undo each other) or exceeds MaxFirings; on any error the
// graph may be partly rewritten.
func (e *Engine) Run(g *ir.Graph) (*Stats, error) {
	st := newStats(g, e.rules)
	rn := &run{e: e, g: g, stats: st, regionIndex: map[*ir.Region]int{}, users: map[*ir.Value][]*ir.Op{}, gone: map[*ir.Op]bool{}}
	for i, r := range g.Regions {
		rn.regionIndex[r] = i
		for _, op := range r.Ops {
			for _, v := range op.Operands {
				rn.users[v] = append(rn.users[v], op)
			}
		}
	}
	rn.uses, rn.pinned = useCounts(g), pinned(g)
	for _, r := range g.Regions {
		if err := rn.region(r); err != nil {
			return st, err
		}
		if checkIndex {
			if err := rn.checkIndex(); err != nil {
				return st, fmt.Errorf("rewrite: internal error after %s: %w", r.Label(), err)
			}
		}
	}
	// Rewrites in later regions can leave earlier producers unused.
	for i := len(g.Regions) - 1; i >= 0; i-- {
		r := g.Regions[i]
		st.erased[r] += rn.erase(r)
	}
	return st, nil
}

// run is one Engine.Run. It keeps a use index up to date incrementally so
// a firing costs time proportional to its region, not to the graph.
type run struct {
	e           *Engine
	g           *ir.Graph
	stats       *Stats
	regionIndex map[*ir.Region]int
	uses        map[*ir.Value]int      // operand slots reading each value
	users       map[*ir.Value][]*ir.Op // ops reading each value; may hold stale entries (check gone and operands)
	pinned      map[*ir.Value]bool     // graph outputs and state updates
	gone        map[*ir.Op]bool        // erased ops
	// panicked is the error of a rule whose side condition panicked; the
	// run stops with it.
	panicked error
	// fp is fingerprint's buffer, reused.
	fp bytes.Buffer
}

// rulePanic turns a panic in a rule's code into one error line naming the
// rule, the phase and the op it was matching.
func rulePanic(rule *Rule, phase string, root *ir.Op, v any) error {
	return fmt.Errorf("rewrite: rule %s panicked in its %s at %s: %v", rule.Name, phase, root.Where(), v)
}

// checkIndex makes Run compare its incremental use index with a recount
// after every region; tests turn it on.
var checkIndex = false

func (rn *run) checkIndex() error {
	want, pin := useCounts(rn.g), pinned(rn.g)
	for v, n := range want {
		if rn.uses[v] != n {
			return fmt.Errorf("use count of %s is %d, recount gives %d", v, rn.uses[v], n)
		}
	}
	for v, n := range rn.uses {
		if n != want[v] {
			return fmt.Errorf("use count of %s is %d, recount gives %d", v, n, want[v])
		}
	}
	for v := range pin {
		if !rn.pinned[v] {
			return fmt.Errorf("%s is an output or state update but not pinned", v)
		}
	}
	for _, op := range rn.g.Ops() {
		for _, v := range op.Operands {
			if !slices.Contains(rn.users[v], op) {
				return fmt.Errorf("%s reads %s but is not among its users", op.Where(), v)
			}
		}
	}
	return nil
}

// erase removes r's dead ops and keeps the index in step.
func (rn *run) erase(r *ir.Region) int {
	dead := eraseDead(r, rn.uses, rn.pinned)
	for _, op := range dead {
		rn.gone[op] = true
	}
	return len(dead)
}

// replace rewires every use of old (operands, outputs, state updates) to new.
func (rn *run) replace(old, new *ir.Value) {
	seen := map[*ir.Op]bool{}
	for _, op := range rn.users[old] {
		if rn.gone[op] || seen[op] {
			continue
		}
		seen[op] = true
		for i, v := range op.Operands {
			if v == old {
				op.Operands[i] = new
				rn.uses[old]--
				rn.uses[new]++
			}
		}
		rn.users[new] = append(rn.users[new], op)
	}
	delete(rn.users, old)
	if !rn.pinned[old] {
		return
	}
	for i, v := range rn.g.Outputs {
		if v == old {
			rn.g.Outputs[i] = new
		}
	}
	for s, v := range rn.g.StateUpdates {
		if v == old {
			rn.g.StateUpdates[s] = new
		}
	}
	delete(rn.pinned, old)
	rn.pinned[new] = true
}

// cycleProbes bounds the ops fingerprinted per firing of a long region:
// one firing in N/cycleProbes of a region of N ops is (region).
const cycleProbes = 64

func (rn *run) region(r *ir.Region) error {
	rn.stats.erased[r] += rn.erase(r)
	limit := rn.e.MaxFirings
	if limit <= 0 {
		limit = 64 + 8*len(r.Ops)
	}
	seen := map[[sha256.Size]byte]int{rn.fingerprint(r): 0}
	var history []string // rule name of each firing
	for {
		rule, m := rn.findMatch(r)
		if rn.panicked != nil {
			return rn.panicked
		}
		if m == nil {
			return nil
		}
		if err := rn.apply(rule, m); err != nil {
			return err
		}
		history = append(history, rule.Name)
		rn.stats.counts[r][rule.Name]++
		rn.stats.erased[r] += rn.erase(r)
		// A fingerprint costs the region's size: a region of N ops
		// takes one every max(1, N/cycleProbes) firings (every firing
		// below 2*cycleProbes ops), so the check costs about
		// cycleProbes ops per firing, not N (a GDN layer of a
		// 2,048-token prefill grows to 1,552 ops while its chunk steps
		// fuse). A cycle of length L is still found: in it the sampled
		// firings recur (those a multiple of L times the stride of one
		// of its states apart).
		if n := len(history); n%max(1, len(r.Ops)/cycleProbes) != 0 {
			if n >= limit {
				return rn.noFixpoint(r, history, limit)
			}
			continue
		}
		fp := rn.fingerprint(r)
		if prev, ok := seen[fp]; ok {
			cyc := history[prev:]
			who := "rules " + strings.Join(uniqueSorted(cyc), " and ") + " undo each other"
			if names := uniqueSorted(cyc); len(names) == 1 {
				who = "rule " + names[0] + " undoes itself"
			}
			return fmt.Errorf("rewrite: cycle in %s: %s (after firing %d the region is back to its state after firing %d; the cycle fires %s)",
				r.Label(), who, len(history), prev, strings.Join(cyc, ", "))
		}
		seen[fp] = len(history)
		if len(history) >= limit {
			return rn.noFixpoint(r, history, limit)
		}
	}
}

// noFixpoint is region's error when r's firings (history) reach limit.
func (rn *run) noFixpoint(r *ir.Region, history []string, limit int) error {
	tail := history[max(0, len(history)-16):]
	return fmt.Errorf("rewrite: no fixpoint in %s after %d firings (bound %d); the last firings were of %s; a rule probably keeps creating new matches",
		r.Label(), len(history), limit, strings.Join(uniqueSorted(tail), ", "))
}

// findMatch returns the first (op in program order, rule in rule order)
// match in r, or nil.
func (rn *run) findMatch(r *ir.Region) (*Rule, *Match) {
	pos := make(map[*ir.Op]int, len(r.Ops))
	for i, op := range r.Ops {
		pos[op] = i
	}
	for _, op := range r.Ops {
		for _, rule := range rn.e.byKind[op.Kind] {
			if m := rn.tryMatch(rule, op, pos); m != nil {
				return rule, m
			}
		}
	}
	return nil, nil
}

// tryMatch matches rule at root; the match must keep interior values
// private (unless the rule allows sharing) and pass the side condition.
func (rn *run) tryMatch(rule *Rule, root *ir.Op, pos map[*ir.Op]int) *Match {
	mr := &matcher{root: root}
	var found *Match
	accept := func() bool {
		m := mr.snapshot(rule, rn.g, pos)
		if !rule.AllowSharedInterior && rn.interiorEscapes(m) {
			return false
		}
		if _, ok := rn.insertionPoint(m, pos); !ok {
			return false
		}
		if rule.Where != nil {
			ok, err := safeWhere(rule, m, root)
			if err != nil {
				rn.panicked = err
				return true // stop searching
			}
			if !ok {
				return false
			}
		}
		found = m
		return true
	}
	mr.matchOp(rule.Pattern, root, func() bool { return rn.matchExtra(mr, rule.Extra, root.Region, accept) })
	return found
}

// safeWhere runs rule's side condition, turning a panic into an error.
func safeWhere(rule *Rule, m *Match, root *ir.Op) (ok bool, err error) {
	defer func() {
		if v := recover(); v != nil {
			ok, err = false, rulePanic(rule, "side condition", root, v)
		}
	}()
	return rule.Where(m), nil
}

// matchExtra matches the remaining extra root patterns, each at some op of
// region r that is not already a root, then calls k.
func (rn *run) matchExtra(mr *matcher, extra []*Pattern, r *ir.Region, k func() bool) bool {
	if len(extra) == 0 {
		return k()
	}
	for _, op := range r.Ops {
		if op.Kind != extra[0].op || rn.gone[op] || op == mr.root || slices.Contains(mr.roots, op) {
			continue
		}
		mr.roots = append(mr.roots, op)
		if mr.matchOp(extra[0], op, func() bool { return rn.matchExtra(mr, extra[1:], r, k) }) {
			return true
		}
		mr.roots = mr.roots[:len(mr.roots)-1]
	}
	return false
}

// lastRoot is the match's root that comes last in program order: the new
// ops are inserted before it.
func lastRoot(m *Match, pos map[*ir.Op]int) *ir.Op {
	last := m.Roots[0]
	for _, r := range m.Roots[1:] {
		if pos[r] > pos[last] {
			last = r
		}
	}
	return last
}

// insertionPoint is where a match's replacement goes: before the last root
// or, for multi-root matches, before the first op outside the match that
// reads a root result earlier than that; ok is false when a bound variable
// is defined at or after that point in the root's region (the replacement
// could not read it there).
func (rn *run) insertionPoint(m *Match, pos map[*ir.Op]int) (at *ir.Op, ok bool) {
	at = lastRoot(m, pos)
	if len(m.Roots) == 1 {
		return at, true
	}
	inMatch := map[*ir.Op]bool{}
	for _, op := range m.Ops {
		inMatch[op] = true
	}
	for _, r := range m.Roots {
		for _, res := range r.Results {
			for _, u := range rn.users[res] {
				if rn.gone[u] || inMatch[u] || !slices.Contains(u.Operands, res) {
					continue
				}
				if u.Region != at.Region {
					continue // later regions run after this one
				}
				if pos[u] < pos[at] {
					at = u
				}
			}
		}
	}
	for _, v := range m.vars {
		if v.Def != nil && v.Def.Region == at.Region && pos[v.Def] >= pos[at] {
			return at, false
		}
	}
	return at, true
}

// interiorEscapes reports whether a value produced by a matched op other
// than the root is read outside the match, is a graph output or a state update.
func (rn *run) interiorEscapes(m *Match) bool {
	inside := map[*ir.Value]int{}
	for _, op := range m.Ops {
		for _, v := range op.Operands {
			inside[v]++
		}
	}
	for _, op := range m.Ops {
		if m.IsRoot(op) {
			continue
		}
		for _, r := range op.Results {
			if rn.pinned[r] || rn.uses[r] > inside[r] {
				return true
			}
		}
	}
	return false
}

// apply runs the rule's builder and splices the new ops in before the root.
func (rn *run) apply(rule *Rule, m *Match) error {
	r := m.Root.Region
	pos := make(map[*ir.Op]int, len(r.Ops))
	for i, op := range r.Ops {
		pos[op] = i
	}
	root, _ := rn.insertionPoint(m, pos)
	olds := m.RootResults()
	rootPos := -1
	for i, op := range r.Ops {
		if op == root {
			rootPos = i
		}
	}
	avail := func(v *ir.Value) bool {
		if v.Def == nil {
			return true
		}
		if v.Def.Region == r {
			for i := 0; i < rootPos; i++ {
				if r.Ops[i] == v.Def {
					return true
				}
			}
			return false
		}
		i, ok := rn.regionIndex[v.Def.Region]
		return ok && i < rn.regionIndex[r]
	}
	b := &Builder{g: rn.g, rule: rule, root: root, available: avail}
	fail := func(format string, a ...any) error {
		return fmt.Errorf("rewrite: rule %s at %s: %s", rule.Name, root.Where(), fmt.Sprintf(format, a...))
	}
	var panicked error
	repl, err := func() (repl []*ir.Value, err error) {
		defer func() {
			if v := recover(); v != nil {
				panicked = rulePanic(rule, "builder", root, v)
			}
		}()
		return rule.Build(b, m)
	}()
	if panicked != nil {
		return panicked
	}
	if err != nil {
		return fail("%v", err)
	}
	if len(repl) != len(olds) {
		return fail("Build returned %d replacement values for %d root results", len(repl), len(olds))
	}
	for i, v := range repl {
		old := olds[i]
		switch {
		case v == nil:
			return fail("replacement %d is nil", i)
		case v == old:
			return fail("replacement %d is the root's own result", i)
		case !v.Type.Shape.Equal(old.Type.Shape) || v.Type.DType != old.Type.DType:
			return fail("replacement %d is %s %s but the result it replaces is %s %s", i, v.Type.Shape, v.Type.DType, old.Type.Shape, old.Type.DType)
		case !avail(v) && !b.emitted(v):
			return fail("replacement %d (%s) is not defined before the root", i, v)
		}
	}
	if !rule.NewDist { // by default a replacement keeps the split of what it replaces
		for i, v := range repl {
			if b.emitted(v) {
				v.Type.Dist = olds[i].Type.Dist
			}
		}
	}
	for _, op := range b.ops {
		if !op.Info().Fused || op.Decomp != nil { // a Decomp the rule set itself is kept (see Rule.Build)
			continue
		}
		d, err := decompose(op, m, repl)
		if err != nil {
			return fail("%v", err)
		}
		op.Decomp = d
	}
	ops := make([]*ir.Op, 0, len(r.Ops)+len(b.ops))
	ops = append(ops, r.Ops[:rootPos]...)
	ops = append(ops, b.ops...)
	ops = append(ops, r.Ops[rootPos:]...)
	r.Ops = ops
	for _, op := range b.ops {
		for _, v := range op.Operands {
			rn.uses[v]++
			rn.users[v] = append(rn.users[v], op)
		}
	}
	for i, v := range repl {
		rn.replace(olds[i], v)
	}
	return nil
}

// fingerprint is the SHA-256 of a description of the region's state
// independent of the IDs of the values it defines: each op's kind,
// attributes and operands (region values by position, others by ID), and
// which region values are read elsewhere.
func (rn *run) fingerprint(r *ir.Region) [sha256.Size]byte {
	type pos struct{ op, res int }
	local := map[*ir.Value]pos{}
	inRegion := map[*ir.Value]int{}
	sb := &rn.fp
	sb.Reset()
	num := make([]byte, 0, 20)
	name := func(p pos) string { return "r" + strconv.Itoa(p.op) + "." + strconv.Itoa(p.res) }
	for i, op := range r.Ops {
		sb.WriteString(op.Name())
		sb.WriteByte('(')
		for _, v := range op.Operands {
			inRegion[v]++
			if p, ok := local[v]; ok {
				sb.WriteByte('r')
				sb.Write(strconv.AppendInt(num[:0], int64(p.op), 10))
				sb.WriteByte('.')
				sb.Write(strconv.AppendInt(num[:0], int64(p.res), 10))
			} else {
				sb.WriteByte('v')
				sb.Write(strconv.AppendInt(num[:0], int64(v.ID), 10))
			}
			sb.WriteByte(',')
		}
		sb.WriteByte(')')
		for _, k := range op.Attrs.Keys() {
			fmt.Fprintf(sb, "%s=%v;", k, op.Attrs[k])
		}
		for j, res := range op.Results {
			local[res] = pos{i, j}
		}
		sb.WriteByte('\n')
	}
	for _, op := range r.Ops {
		for _, res := range op.Results {
			if n := rn.uses[res] - inRegion[res]; n > 0 || rn.pinned[res] {
				fmt.Fprintf(sb, "ext %s x%d pinned=%v\n", name(local[res]), n, rn.pinned[res])
			}
		}
	}
	for i, v := range rn.g.Outputs {
		if p, ok := local[v]; ok {
			fmt.Fprintf(sb, "out %d %s\n", i, name(p))
		}
	}
	var states []string
	for s, v := range rn.g.StateUpdates {
		if p, ok := local[v]; ok {
			states = append(states, fmt.Sprintf("state v%d %s\n", s.ID, name(p)))
		}
	}
	sort.Strings(states)
	for _, s := range states {
		sb.WriteString(s)
	}
	return sha256.Sum256(sb.Bytes())
}

func uniqueSorted(names []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, n := range names {
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// useCounts counts, for every value, the operand slots that read it.
func useCounts(g *ir.Graph) map[*ir.Value]int {
	u := map[*ir.Value]int{}
	for _, r := range g.Regions {
		for _, op := range r.Ops {
			for _, v := range op.Operands {
				u[v]++
			}
		}
	}
	return u
}

// pinned returns the values that are graph outputs or state updates.
func pinned(g *ir.Graph) map[*ir.Value]bool {
	p := map[*ir.Value]bool{}
	for _, v := range g.Outputs {
		p[v] = true
	}
	for _, v := range g.StateUpdates {
		p[v] = true
	}
	return p
}

// eraseDead removes the ops of r none of whose results is used or pinned,
// transitively within r, updating uses; it returns the removed ops. Ops
// without results are kept.
func eraseDead(r *ir.Region, uses map[*ir.Value]int, pin map[*ir.Value]bool) []*ir.Op {
	dead := map[*ir.Op]bool{}
	for i := len(r.Ops) - 1; i >= 0; i-- {
		op := r.Ops[i]
		if len(op.Results) == 0 {
			continue
		}
		live := false
		for _, res := range op.Results {
			if uses[res] > 0 || pin[res] {
				live = true
				break
			}
		}
		if live {
			continue
		}
		dead[op] = true
		for _, v := range op.Operands {
			uses[v]--
		}
	}
	if len(dead) == 0 {
		return nil
	}
	var removed []*ir.Op
	kept := r.Ops[:0]
	for _, op := range r.Ops {
		if dead[op] {
			removed = append(removed, op)
		} else {
			kept = append(kept, op)
		}
	}
	for i := len(kept); i < len(r.Ops); i++ {
		r.Ops[i] = nil
	}
	r.Ops = kept
	return removed
}

// EraseDeadOps removes every op of g none of whose results is read, is a
// graph output or is a state update, transitively, and returns how many it
// removed.
func EraseDeadOps(g *ir.Graph) int {
	uses, pin := useCounts(g), pinned(g)
	n := 0
	for i := len(g.Regions) - 1; i >= 0; i-- {
		n += len(eraseDead(g.Regions[i], uses, pin))
	}
	return n
}
