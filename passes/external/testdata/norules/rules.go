// Package norules forgot to export its rules.
package norules

import "github.com/tcc-dev/tcc/passes/rewrite"

func rules() []*rewrite.Rule { return nil }

var _ = rules
