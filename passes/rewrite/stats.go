package rewrite

import (
	"fmt"
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
