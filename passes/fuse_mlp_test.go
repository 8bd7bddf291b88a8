package passes

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/models"
	"github.com/tcc-dev/tcc/models/qwen27b"
	"github.com/tcc-dev/tcc/passes/rewrite"
)

// commonModel builds the qwen27b decode graph (the small test config or
// the embedded 27B one) on a 1xdevices mesh and runs the default pipeline
// with rules (nil: every registered rule).
func commonModel(t *testing.T, small bool, devices int, rules []*rewrite.Rule) (*ir.Graph, *Result) {
	t.Helper()
	o := qwen27b.DefaultOptions()
	if small {
		var err error
		o, err = qwen27b.OptionsFrom(models.Args{"config": "../models/qwen27b/testdata/small.json", "batch": "1", "max-seq": "128", "mode": "decode", "seq": "1"})
		if err != nil {
			t.Fatal(err)
		}
	}
	g, _, err := qwen27b.BuildGraph(o, ir.Mesh{Rows: 1, Cols: devices})
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(g, Options{Rules: rules})
	if err != nil {
		t.Fatal(err)
	}
	return g, res
}

// commonRulesWithout returns every registered rule except those of the
// named families and the named rules.
func commonRulesWithout(names ...string) []*rewrite.Rule {
	drop := map[string]bool{}
	for _, n := range names {
		drop[n] = true
		for _, r := range FamilyRules(n) {
			drop[r.Name] = true
		}
	}
	var rules []*rewrite.Rule
	for _, r := range Rules() {
		if !drop[r.Name] {
			rules = append(rules, r)
		}
	}
	return rules
}

func commonOpNames(ops []*ir.Op) []string {
	var n []string
	for _, op := range ops {
		n = append(n, op.Name())
	}
	return n
}

// commonLayerShape is what the common families make of a decoder layer
// outside its mixer: the first ops (input norm, sibling in-projection)
// and the tail from the mixer's out-projection on, with the rules that
// must fire once in the layer. At TP > 1 a layer that is not the first
// has no input norm and one that is not the last ends in the boundary
// join with the next layer's norm (fuse-boundaries).
func commonLayerShape(kind ir.RegionKind, devices int, first, last bool) (head, tail, rules []string) {
	proj, projRule := "matmul4", "FuseSiblingMatmul4"
	if kind == "attention" {
		proj, projRule = "matmul3", "FuseSiblingMatmul3"
	}
	head = []string{"rms_norm", proj}
	if devices == 1 {
		tail = []string{"matmul", "add_rmsnorm", "matmul_swiglu", "matmul_add"}
		rules = []string{projRule, "FuseAddRMSNorm", "FuseMLPSwiGLU", "FuseMatmulAdd"}
		return head, tail, rules
	}
	tail = []string{"matmul", "all_reduce_add_rmsnorm", "matmul_swiglu", "matmul", "all_reduce_add"}
	rules = []string{projRule, "FuseAllReduceAddRMSNorm", "FuseMLPSwiGLU", "FuseReduceScatterAllGather", "FuseAllReduceAdd"}
	if !first {
		head = head[1:]
	}
	if !last {
		tail[len(tail)-1] = "all_reduce_add_rmsnorm"
		rules = append(rules, BoundaryRule)
	}
	return head, tail, rules
}

// checkCommonLayers checks every region of a fused qwen27b decode graph:
// embed is one embedding_reshape; the head is rmsnorm_matmul, or for a
// wide hidden size rms_norm + matmul, (+ the logits all_gather) + argmax; each layer opens with its input norm and
// one multi-output in-projection and ends with out-projection, the
// collective (or add) + residual + post norm, matmul_swiglu, down
// projection and the collective + residual (commonLayerShape), each
// listed rule firing once. It returns the op count per layer kind.
func checkCommonLayers(t *testing.T, g *ir.Graph, res *Result, devices int) map[ir.RegionKind][]int {
	t.Helper()
	perKind := map[ir.RegionKind][]int{}
	layers := g.Layers()
	for _, r := range g.Regions {
		names := commonOpNames(r.Ops)
		switch {
		case r.Kind == "embed":
			if diff := cmp.Diff([]string{"embedding_reshape"}, names); diff != "" {
				t.Errorf("embed (-want +got):\n%s", diff)
			}
			perKind[r.Kind] = append(perKind[r.Kind], len(r.Ops))
		case r.Kind == "head":
			// The final norm is the lm_head's prologue only while it is
			// short (maxPrologueNormTiles): the 27B's H = 5120 keeps it a
			// program of its own.
			want := []string{"rmsnorm_matmul"}
			if hidden := r.Ops[0].Operands[0].Type.Shape.Cols2D(); hidden > maxPrologueNormTiles*ir.TileSize {
				want = []string{"rms_norm", "matmul"}
			}
			// Over devices the argmax of the gathered logits is one
			// sharded argmax (FuseArgmaxSharded: no logits all_gather).
			if devices > 1 {
				want = append(want, "argmax_sharded")
			} else {
				want = append(want, "argmax")
			}
			if diff := cmp.Diff(want, names); diff != "" {
				t.Errorf("head (-want +got):\n%s", diff)
			}
			perKind[r.Kind] = append(perKind[r.Kind], len(r.Ops))
		case r.IsLayer():
			head, tail, rules := commonLayerShape(r.Kind, devices, r == layers[0], r == layers[len(layers)-1])
			if len(names) < len(head)+len(tail) {
				t.Errorf("%s: only %d ops: %v", r.Label(), len(names), names)
				continue
			}
			if diff := cmp.Diff(head, names[:len(head)]); diff != "" {
				t.Errorf("%s: first ops (-want +got):\n%s", r.Label(), diff)
			}
			if diff := cmp.Diff(tail, names[len(names)-len(tail):]); diff != "" {
				t.Errorf("%s: last ops (-want +got):\n%s", r.Label(), diff)
			}
			for _, rule := range rules {
				if n := res.Rewrites.Count(rule, r); n != 1 {
					t.Errorf("%s: %s fired %d times, want 1", r.Label(), rule, n)
				}
			}
			perKind[r.Kind] = append(perKind[r.Kind], len(r.Ops))
		}
	}
	return perKind
}

// TestCommonRulesPerLayer runs the default pipeline on the decode graph
// (small config on 1x1 and 1x2, the 27B config on 1x2) and checks every
// region's shape after fusion (checkCommonLayers) and the targets: a GDN
// layer at most 10 programs, an attention layer at most 12, the MLP 3
// (matmul_swiglu, down, collective + residual), embed 1, and at TP=2 at
// most 700 programs per step for the 27B model.
func TestCommonRulesPerLayer(t *testing.T) {
	for _, tc := range []struct {
		small   bool
		devices int
	}{{true, 1}, {true, 2}, {false, 2}} {
		name := fmt.Sprintf("27b/1x%d", tc.devices)
		if tc.small {
			name = fmt.Sprintf("small/1x%d", tc.devices)
		}
		t.Run(name, func(t *testing.T) {
			g, res := commonModel(t, tc.small, tc.devices, nil)
			perKind := checkCommonLayers(t, g, res, tc.devices)
			limit := map[ir.RegionKind]int{"gdn": 10, "attention": 12, "embed": 1}
			var kinds []string
			for k := range perKind {
				kinds = append(kinds, string(k))
			}
			sort.Strings(kinds)
			var summary []string
			for _, k := range kinds {
				counts := perKind[ir.RegionKind(k)]
				if l, ok := limit[ir.RegionKind(k)]; ok && slices.Max(counts) > l {
					t.Errorf("%s: up to %d programs, target <= %d", k, slices.Max(counts), l)
				}
				summary = append(summary, fmt.Sprintf("%s %d-%d", k, slices.Min(counts), slices.Max(counts)))
			}
			if !tc.small && g.NumOps() > 700 {
				t.Errorf("%d programs per step, target <= 700", g.NumOps())
			}
			t.Logf("programs per region: %s; total %d", strings.Join(summary, ", "), g.NumOps())
		})
	}
}

// TestCommonRulesWithoutMixerRules: with the gdn and attention families
// off, the common families still shape every layer the same way outside
// the mixer (they do not depend on the block rules' output).
func TestCommonRulesWithoutMixerRules(t *testing.T) {
	for _, devices := range []int{1, 2} {
		t.Run(fmt.Sprintf("small/1x%d", devices), func(t *testing.T) {
			g, res := commonModel(t, true, devices, commonRulesWithout("gdn", "attention"))
			checkCommonLayers(t, g, res, devices)
		})
	}
}

// TestCommonCollectiveWithoutPairRule: with FuseReduceScatterAllGather
// off, the layer-end reduce_scatter + all_gather + residual add still
// becomes one all_reduce_add (the collective rules match the pair too).
func TestCommonCollectiveWithoutPairRule(t *testing.T) {
	g, res := commonModel(t, true, 2, commonRulesWithout("FuseReduceScatterAllGather"))
	for _, r := range g.Layers() {
		names := commonOpNames(r.Ops)
		want := "all_reduce_add_rmsnorm" // joined with the next layer's input norm
		if r == g.Layers()[len(g.Layers())-1] {
			want = "all_reduce_add"
		}
		if names[len(names)-1] != want || slices.Contains(names, "reduce_scatter") || slices.Contains(names, "all_gather") {
			t.Errorf("%s ends %v; want %s and no reduce_scatter/all_gather", r.Label(), names[max(0, len(names)-3):], want)
		}
		if n := res.Rewrites.Count("FuseAllReduceAdd", r); n != 1 {
			t.Errorf("%s: FuseAllReduceAdd fired %d times, want 1", r.Label(), n)
		}
	}
}
