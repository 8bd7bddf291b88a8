package lower_test

import (
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/ir/longtest"
)

// TestExpSoftmaxOnlyInPrefillSoftmax: of the small config's prefill (64
// tokens) and decode graphs on a 1x2 mesh, the programs whose compute
// runs an exp, by op kind and exp: exp_softmax (accurate only on the
// softmax's arguments, ir/sfpu exp_softmax.go) only in the prefill
// attention (sdpa_prefill_gated), and every other exp (GDN's decays and
// gates, decode's attention) the fp32-accurate exp. (Under TCC_LONG;
// TestFlashPrefillOnSim fails by default if the prefill program's exp
// and the reference's differ.)
func TestExpSoftmaxOnlyInPrefillSoftmax(t *testing.T) {
	t.Parallel()
	longtest.Skip(t, "builds and lowers the small config's prefill and decode graphs (~3 CPU-s)")
	tgt := target.Blackhole()
	got := map[string][]string{}
	for _, g := range []*ir.Graph{fusedSmallPrefillGraph(t, 2, 64), fusedSmallGraph(t, 2)} {
		for _, op := range g.Ops() {
			p, err := lower.Lower(op, lower.NewContext(tgt))
			if err != nil {
				continue // not a lowered program (views, host ops)
			}
			for _, k := range p.Kernels {
				kir.Inspect(k.Body, func(s kir.Stmt) bool {
					if u, ok := s.(kir.SFPU); ok && (u.Op == kir.SFPUExp || u.Op == kir.SFPUExpSoftmax) {
						key := op.Kind.String()
						if !contains(got[key], u.Op.String()) {
							got[key] = append(got[key], u.Op.String())
							sort.Strings(got[key])
						}
					}
					return true
				})
			}
		}
	}
	want := map[string][]string{
		"sdpa_prefill_gated": {"exp_softmax"},
	}
	for k := range got {
		if k != "sdpa_prefill_gated" {
			want[k] = []string{"exp"}
		}
	}
	if len(got) < 4 {
		t.Errorf("only %d op kinds run an exp (%v): the test lowers too little", len(got), got)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("exps by op kind (-want +got):\n%s", diff)
	}
	t.Logf("%v", got)
}

func contains(s []string, x string) bool {
	for _, y := range s {
		if y == x {
			return true
		}
	}
	return false
}
