// Package normfamily reuses the built-in family name "norm".
package normfamily

import "github.com/tcc-dev/tcc/passes/rewrite"

const Family = "norm"

func Rules() []*rewrite.Rule { return nil }
