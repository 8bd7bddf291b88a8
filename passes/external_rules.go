package passes

import (
	"fmt"
	"strings"

	"github.com/tcc-dev/tcc/passes/rewrite"
)

// RegisterExternal adds rules written outside this package (a kernel
// author's rule package, linked into a tcc driver built by passes/external)
// as the rule family named family. It must be called before any pipeline
// runs, typically from the driver's main; it is not safe to call
// concurrently with Rules, Families or FamilyRules.
//
// It checks the family name (CheckExternalFamily; nor may an earlier call
// have taken it), that there is at least
// one rule, that every rule passes rewrite.Rule.Validate and that every rule
// name is new: unique within the call and not used by any registered rule.
// On error nothing is registered. On success Families lists family and
// Rules includes the rules in the given order, so the fuse pass, `tcc
// passes` and --disable see them like built-in ones. FamilyRules returns a
// shallow copy of each rule per call, so rules must not keep mutable state.
func RegisterExternal(family string, rules ...*rewrite.Rule) error {
	if err := CheckExternalFamily(family); err != nil {
		return err
	}
	if external[family] {
		return fmt.Errorf("passes: rule family %s is already registered by another rule package", family)
	}
	if len(rules) == 0 {
		return fmt.Errorf("passes: rule family %s has no rules", family)
	}
	owner := map[string]string{} // rule name -> family
	for _, f := range Families() {
		for _, r := range FamilyRules(f) {
			owner[r.Name] = f
		}
	}
	mks := make([]func() *rewrite.Rule, len(rules))
	for i, r := range rules {
		if r == nil {
			return fmt.Errorf("passes: rule family %s: rule #%d is nil", family, i+1)
		}
		if err := r.Validate(); err != nil {
			return fmt.Errorf("passes: rule family %s, rule #%d: %w", family, i+1, err)
		}
		if f, dup := owner[r.Name]; dup {
			return fmt.Errorf("passes: rule family %s: rule name %s is already used by family %s; rule names must be unique", family, r.Name, f)
		}
		owner[r.Name] = family
		proto := *r
		mks[i] = func() *rewrite.Rule { c := proto; return &c }
	}
	registerRules(family, mks...)
	external[family] = true
	return nil
}

// external holds the families added by RegisterExternal.
var external = map[string]bool{}

// CheckExternalFamily reports why family cannot name an external rule
// family: it is empty, has characters other than ASCII letters, digits, '_'
// and '-' (it appears in reports and test data paths), or is the name of a
// built-in family. (RegisterExternal also rejects a family that an earlier
// RegisterExternal call took.)
func CheckExternalFamily(family string) error {
	if family == "" {
		return fmt.Errorf("passes: empty rule family name")
	}
	for _, c := range family {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return fmt.Errorf("passes: rule family name %q: %q is not an ASCII letter, digit, '_' or '-'", family, c)
		}
	}
	if _, dup := families[family]; dup && !external[family] {
		return fmt.Errorf("passes: rule family %s is built in (families: %s)", family, strings.Join(Families(), ", "))
	}
	return nil
}
