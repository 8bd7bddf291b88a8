package cli

import (
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/tcc-dev/tcc/models"
)

// nearNames ranks names by edit distance to s (case-insensitive, ties by
// name) and returns the close ones (at most three: the nearest, if within
// max(2, len/3) edits, and any as near; and names s is a prefix of) and
// the three nearest, close or not.
func nearNames(s string, names []string) (near, nearest []string) {
	type scored struct {
		name string
		dist int
	}
	ls := strings.ToLower(s)
	var ss []scored
	for _, n := range names {
		ss = append(ss, scored{n, editDistance(ls, strings.ToLower(n))})
	}
	sort.SliceStable(ss, func(i, j int) bool {
		if ss[i].dist != ss[j].dist {
			return ss[i].dist < ss[j].dist
		}
		return ss[i].name < ss[j].name
	})
	close := max(2, len(s)/3)
	best := -1 // the distance of the first close name: only names as near follow it
	for i, sc := range ss {
		if i < 3 {
			nearest = append(nearest, sc.name)
		}
		prefix := len(ls) >= 3 && strings.HasPrefix(strings.ToLower(sc.name), ls)
		if best < 0 && sc.dist <= close {
			best = sc.dist
		}
		if len(near) < 3 && (sc.dist == best || prefix) {
			near = append(near, sc.name)
		}
	}
	return near, nearest
}

// didYouMean is "; did you mean X?" (or "X or Y?") when a name is close
// to s, else "".
func didYouMean(s string, names []string) string {
	near, _ := nearNames(s, names)
	switch len(near) {
	case 0:
		return ""
	case 1:
		return "; did you mean " + near[0] + "?"
	}
	return "; did you mean " + strings.Join(near[:len(near)-1], ", ") + " or " + near[len(near)-1] + "?"
}

// lookupModel is models.Lookup with a suggestion for a misspelt name.
func lookupModel(name string) (models.Model, error) {
	m, err := models.Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("%w%s", err, didYouMean(name, models.Names()))
	}
	return m, nil
}

// flagError adds a suggestion to pflag's "unknown flag: --NAME": the
// command's flags (its own and inherited) nearest to NAME.
func flagError(c *cobra.Command, err error) error {
	msg := err.Error()
	name, ok := strings.CutPrefix(msg, "unknown flag: --")
	if !ok {
		return err
	}
	name, _, _ = strings.Cut(name, "=")
	var names []string
	visit := func(f *pflag.Flag) {
		if !f.Hidden {
			names = append(names, f.Name)
		}
	}
	c.Flags().VisitAll(visit)
	c.InheritedFlags().VisitAll(visit)
	near, _ := nearNames(name, names)
	for i := range near {
		near[i] = "--" + near[i]
	}
	hint := fmt.Sprintf(" (see tcc %s --help)", strings.TrimPrefix(c.CommandPath(), "tcc "))
	if c == c.Root() {
		hint = " (see tcc --help)"
	}
	switch len(near) {
	case 0:
		return fmt.Errorf("%s%s", msg, hint)
	case 1:
		return fmt.Errorf("%s; did you mean %s?", msg, near[0])
	}
	return fmt.Errorf("%s; did you mean %s or %s?", msg, strings.Join(near[:len(near)-1], ", "), near[len(near)-1])
}
