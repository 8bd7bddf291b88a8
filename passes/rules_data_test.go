package passes

import (
	"flag"
	"testing"

	"github.com/tcc-dev/tcc/passes/rulestest"
)

var update = flag.Bool("update", false, "rewrite the output sections of testdata/*/*.txt")

// TestRuleData runs every registered rule on each testdata/<family>/*.txt
// case (passes/rulestest: firings, printed result, decompositions and
// their equivalence, fused collectives on a whole mesh row). Run with -update to rewrite the output sections
// (review the diff!).
func TestRuleData(t *testing.T) {
	rulestest.Run(t, "testdata/*/*.txt", Rules(), rulestest.Options{Update: *update, Families: FamilyRules})
}
