// Package rulesvar declares Rules as a variable: not a rule package.
package rulesvar

import "github.com/tcc-dev/tcc/passes/rewrite"

var Rules = func() []*rewrite.Rule { return nil }
