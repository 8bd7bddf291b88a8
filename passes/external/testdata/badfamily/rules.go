// Package badfamily declares Family as a variable.
package badfamily

import "github.com/tcc-dev/tcc/passes/rewrite"

var Family = "mine"

func Rules() []*rewrite.Rule { return nil }
