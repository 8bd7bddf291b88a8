package rewrite

import (
	"fmt"
	"slices"
	"strings"

	"github.com/tcc-dev/tcc/ir"
)

// Stats counts rule firings and erased ops per region of one Engine.Run.
type Stats struct {
	regions []*ir.Region
	rules   []string
	counts  map[*ir.Region]map[string]int
	erased  map[*ir.Region]int
}

func newStats(g *ir.Graph, rules []*Rule) *Stats {
	s := &Stats{regions: append([]*ir.Region(nil), g.Regions...), counts: map[*ir.Region]map[string]int{}, erased: map[*ir.Region]int{}}
	for _, r := range rules {
		s.rules = append(s.rules, r.Name)
	}
	for _, r := range g.Regions {
		s.counts[r] = map[string]int{}
	}
	return s
}

// Firing is how often one rule fired in one region.
type Firing struct {
	Rule   string
	Region *ir.Region
	Count  int
}

// Count returns how often rule fired in region r.
func (s *Stats) Count(rule string, r *ir.Region) int { return s.counts[r][rule] }

// Total returns how often rule fired in the whole graph.
func (s *Stats) Total(rule string) int {
	n := 0
	for _, c := range s.counts {
		n += c[rule]
	}
	return n
}

// ByLayer returns rule's firing count for every decoder layer (by layer
// index), including zero counts.
func (s *Stats) ByLayer(rule string) map[int]int {
	m := map[int]int{}
	for _, r := range s.regions {
		if r.IsLayer() {
			m[r.Index] += s.counts[r][rule]
		}
	}
	return m
}

// Erased returns how many dead ops were removed from region r.
func (s *Stats) Erased(r *ir.Region) int { return s.erased[r] }

// Firings lists the non-zero counts, regions in graph order, rules in engine order.
func (s *Stats) Firings() []Firing {
	var out []Firing
	for _, r := range s.regions {
		for _, name := range s.rules {
			if n := s.counts[r][name]; n > 0 {
				out = append(out, Firing{Rule: name, Region: r, Count: n})
			}
		}
	}
	return out
}

// String prints one line per region with firings or erased ops, for
// example "layer 0 (mlp): FuseRMSNorm=2, erased 7".
func (s *Stats) String() string {
	var sb strings.Builder
	for _, r := range s.regions {
		var parts []string
		for _, name := range s.rules {
			if n := s.counts[r][name]; n > 0 {
				parts = append(parts, fmt.Sprintf("%s=%d", name, n))
			}
		}
		if e := s.erased[r]; e > 0 {
			parts = append(parts, fmt.Sprintf("erased %d", e))
		}
		if len(parts) > 0 {
			fmt.Fprintf(&sb, "%s: %s\n", r.Label(), strings.Join(parts, ", "))
		}
	}
	return sb.String()
}

// Merge adds o's firing and erase counts into s (regions and rules that s
// does not know yet are appended), so the stats of several engine runs over
// one graph read as one. A nil o is a no-op.
func (s *Stats) Merge(o *Stats) {
	if o == nil {
		return
	}
	for _, r := range o.regions {
		c := s.region(r)
		for rule, n := range o.counts[r] {
			c[rule] += n
		}
		s.erased[r] += o.erased[r]
	}
	for _, name := range o.rules {
		s.rule(name)
	}
}

// region is r's counts, with r appended to the known regions if new.
func (s *Stats) region(r *ir.Region) map[string]int {
	if _, ok := s.counts[r]; !ok {
		s.regions = append(s.regions, r)
		s.counts[r] = map[string]int{}
	}
	return s.counts[r]
}

// rule appends name to the known rules if new.
func (s *Stats) rule(name string) {
	if !slices.Contains(s.rules, name) {
		s.rules = append(s.rules, name)
	}
}

// Add counts one firing of rule in region r, for passes outside the
// engine that rewrite like a rule (region and rule are appended if new).
func (s *Stats) Add(rule string, r *ir.Region) {
	s.rule(rule)
	s.region(r)[rule]++
}

// NewStats returns empty stats, to Merge engine runs into.
func NewStats() *Stats {
	return &Stats{counts: map[*ir.Region]map[string]int{}, erased: map[*ir.Region]int{}}
}
