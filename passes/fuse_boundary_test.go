package passes_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/models/qwen27b"
	"github.com/tcc-dev/tcc/passes"
)

// opKinds lists the kinds of ops, in order.
func opKinds(ops []*ir.Op) []string {
	var out []string
	for _, op := range ops {
		out = append(out, op.Name())
	}
	return out
}

// TestFuseBoundaries checks the pass on the small Qwen config at TP=2:
// every layer but the first loses its input rms_norm, which the previous
// layer's closing collective now computes (one all_reduce_add_rmsnorm
// with the boundary rule's name, h and normed keeping their readers), and
// with the pass disabled the boundary stays two programs. (Numerics: the
// fused ops are checked against their decompositions, and the graph
// against the unfused one, by TestEveryRuleEquivalent.)
func TestFuseBoundaries(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		disable []string
		want    int // boundary ops
	}{
		{"default", nil, 7},
		{"disabled", []string{"fuse-boundaries"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := qwenSource(qwen27b.Decode, 1, 1, 2).build()
			if err != nil {
				t.Fatal(err)
			}
			res, err := passes.Run(g, passes.Options{Disable: tc.disable})
			if err != nil {
				t.Fatal(err)
			}
			layers := g.Layers()
			if len(layers) != 8 {
				t.Fatalf("%d layers, want the small config's 8", len(layers))
			}
			if got := res.Rewrites.Total(passes.BoundaryRule); got != tc.want {
				t.Errorf("%s fired %d times, want %d", passes.BoundaryRule, got, tc.want)
			}
			uses := g.Uses()
			n := 0
			for i, l := range layers {
				first := l.Ops[0].Kind
				if opensWithNorm := first == ir.OpRMSNorm; opensWithNorm != (i == 0 || tc.want == 0) {
					t.Errorf("%s opens with %s; want an input rms_norm only in layer 0 or with the pass disabled: %v", l.Label(), first, opKinds(l.Ops))
				}
				last := l.Ops[len(l.Ops)-1]
				if last.Rule != passes.BoundaryRule {
					continue
				}
				n++
				if i+1 == len(layers) {
					t.Errorf("%s: the last layer's collective has nothing to join", l.Label())
					continue
				}
				if diff := cmp.Diff([]string{"all_reduce_add", "rms_norm"}, opKinds(last.Decomp.Ops)); diff != "" {
					t.Errorf("%s: decomposition (-want +got):\n%s", l.Label(), diff)
				}
				h, normed := last.Results[0], last.Results[1]
				for _, v := range []*ir.Value{h, normed} {
					if v.Def != last {
						t.Errorf("%s: %s is not defined by the joined op", l.Label(), v)
					}
					for _, r := range uses[v] {
						if r.Region != layers[i+1] {
							t.Errorf("%s: %s is read by %s, want readers in the next layer only", l.Label(), v, r.Where())
						}
					}
				}
				if len(uses[normed]) == 0 || len(uses[h]) == 0 {
					t.Errorf("%s: h has %d readers and normed %d; both must keep theirs", l.Label(), len(uses[h]), len(uses[normed]))
				}
			}
			if n != tc.want {
				t.Errorf("%d layers end in the joined op, want %d", n, tc.want)
			}
		})
	}
}
