package passes

import (
	"fmt"
	"sort"

	"github.com/tcc-dev/tcc/passes/rewrite"
)

// families maps a fusion family (the suffix of its fuse_<family>.go file)
// to constructors of its rules, in the order the rules are tried.
var families = map[string][]func() *rewrite.Rule{}

// registerRules adds a family's rules; each fuse_<family>.go file calls it
// once from a package-level var. A family registered twice is a programming
// error and panics at init.
func registerRules(family string, rules ...func() *rewrite.Rule) bool {
	if _, dup := families[family]; dup {
		panic(fmt.Sprintf("passes: rule family %q registered twice", family))
	}
	families[family] = rules
	return true
}

// Families returns the registered rule family names, sorted.
func Families() []string {
	names := make([]string, 0, len(families))
	for n := range families {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// FamilyRules returns fresh instances of one family's rules in order, or nil
// if no such family is registered.
func FamilyRules(family string) []*rewrite.Rule {
	var rules []*rewrite.Rule
	for _, mk := range families[family] {
		rules = append(rules, mk())
	}
	return rules
}

// Rules returns fresh instances of every registered rule: external
// families first (a kernel author's rules take precedence over built-in
// ones that match the same ops), then built-in families in name order,
// each family's rules in its own order. This is the fuse passes' default
// rule set.
func Rules() []*rewrite.Rule {
	var rules []*rewrite.Rule
	for _, pass := range []bool{true, false} {
		for _, f := range Families() {
			if external[f] == pass {
				rules = append(rules, FamilyRules(f)...)
			}
		}
	}
	return rules
}
