// Package typeerr does not type-check.
package typeerr

import "github.com/tcc-dev/tcc/passes/rewrite"

func Rules() []*rewrite.Rule {
	return []*rewrite.Rule{undefinedRule()}
}
