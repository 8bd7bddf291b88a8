// Package badsig returns rules by value: not a rule package.
package badsig

import "github.com/tcc-dev/tcc/passes/rewrite"

func Rules() []rewrite.Rule { return nil }
