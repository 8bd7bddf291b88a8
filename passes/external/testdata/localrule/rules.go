// Package localrule returns its own Rule type: not a rule package.
package localrule

// Rule is not rewrite.Rule.
type Rule struct{ Name string }

func Rules() []*Rule { return nil }
