package main

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"golang.org/x/tools/go/packages"
)

// layers is the module's layer order, lowest first (README.md, Layout):
// a package may import packages of its own layer and of the layers below
// it, never one above. A package belongs to the layer of its longest
// matching entry; an entry p matches p and every package under p/. Test
// files may import any layer (they build the programs they check).
var layers = []struct {
	name string
	pkgs []string
}{
	// the graph IR and the op table
	{"ir", []string{"ir"}},
	// formats, tiles, FPU and SFPU math; the SFPU op table
	{"numerics", []string{"ir/numerics", "ir/sfpu"}},
	// rewriting graphs (fusion, placement) and evaluating them (reference)
	{"graph", []string{"passes", "sim/ref"}},
	// the target description, the kernel IR, host program configs
	{"kernel IR", []string{"codegen/target", "codegen/kir", "codegen/internal", "codegen/hostcfg"}},
	// running kernel IR programs on a card or on ttsim
	{"chip", []string{"runtime/blackhole"}},
	// running and timing kernel IR programs on the simulator
	{"simulator", []string{"sim"}},
	// the lowerings, the C++ printer, builds; and the adapter that gives
	// the timing model a build's narrow view (timing.Build)
	{"codegen", []string{"codegen", "sim/timing/fromcodegen"}},
	// model builders, checkpoints
	{"models", []string{"models"}},
	// the user-facing API over the simulator and the chip
	{"runtime", []string{"runtime"}},
	// the committed generated kernels
	{"kernels_gen", []string{"kernels_gen"}},
	// the CLI
	{"cmd", []string{"cmd"}},
}

// knownUpward are the imports that break the order today, each with the
// work that removes it. An entry no import needs any more fails the test,
// so that it is deleted with the import.
var knownUpward = map[[2]string]string{}

const module = "github.com/tcc-dev/tcc"

// TestLayers loads every package of the module (go/packages, no tests)
// and fails on each import of a higher layer and each package in no layer.
func TestLayers(t *testing.T) {
	pkgs, err := packages.Load(&packages.Config{Mode: packages.NeedName | packages.NeedImports, Dir: "../.."}, "./...")
	if err != nil {
		t.Fatal(err)
	}
	imports := map[string][]string{}
	for _, p := range pkgs {
		for _, e := range p.Errors {
			t.Errorf("%s: %v", p.PkgPath, e)
		}
		name, ok := strings.CutPrefix(p.PkgPath, module+"/")
		if !ok {
			t.Errorf("package %s is outside the module (the root holds no package)", p.PkgPath)
			continue
		}
		imports[name] = []string{}
		for path := range p.Imports {
			if imp, ok := strings.CutPrefix(path, module+"/"); ok {
				imports[name] = append(imports[name], imp)
			}
		}
	}
	if len(imports) < 50 {
		t.Fatalf("loaded %d packages of the module, want all of them", len(imports))
	}
	for _, v := range layerViolations(imports, knownUpward) {
		t.Error(v)
	}
}

// layerOf is the index in layers of package pkg (a path inside the
// module), or -1 when no entry matches.
func layerOf(pkg string) int {
	best, bestLen := -1, -1
	for i, l := range layers {
		for _, p := range l.pkgs {
			if (pkg == p || strings.HasPrefix(pkg, p+"/")) && len(p) > bestLen {
				best, bestLen = i, len(p)
			}
		}
	}
	return best
}

// layerViolations lists, sorted, every package of imports (package ->
// the module packages it imports) in no layer, every import of a higher
// layer that known does not list, and every entry of known no import
// needs.
func layerViolations(imports map[string][]string, known map[[2]string]string) []string {
	var out []string
	used := map[[2]string]bool{}
	for pkg, imps := range imports {
		li := layerOf(pkg)
		if li < 0 {
			out = append(out, fmt.Sprintf("%s is in no layer: add it to layers (and README.md's Layout)", pkg))
			continue
		}
		for _, imp := range imps {
			lj := layerOf(imp)
			if lj <= li {
				continue
			}
			if _, ok := known[[2]string{pkg, imp}]; ok {
				used[[2]string{pkg, imp}] = true
				continue
			}
			out = append(out, fmt.Sprintf("%s (layer %s) imports %s of the higher layer %s", pkg, layers[li].name, imp, layers[lj].name))
		}
	}
	for e := range known {
		if !used[e] {
			out = append(out, fmt.Sprintf("known upward import %s -> %s is gone: delete its entry", e[0], e[1]))
		}
	}
	sort.Strings(out)
	return out
}

func TestLayerViolations(t *testing.T) {
	for _, c := range []struct {
		name    string
		imports map[string][]string
		known   map[[2]string]string
		want    []string
	}{
		{"downward and same layer", map[string][]string{"sim/ref": {"ir/sfpu", "passes"}, "codegen/lower": {"codegen/kir", "sim/kexec"}}, nil, nil},
		{"upward", map[string][]string{"sim/ref": {"codegen/kir"}}, nil,
			[]string{"sim/ref (layer graph) imports codegen/kir of the higher layer kernel IR"}},
		{"the longest entry decides", map[string][]string{"ir/numerics": {"ir"}, "ir": {"ir/numerics"}}, nil,
			[]string{"ir (layer ir) imports ir/numerics of the higher layer numerics"}},
		{"known upward", map[string][]string{"sim/timing": {"codegen"}}, map[[2]string]string{{"sim/timing", "codegen"}: "why"}, nil},
		{"known upward gone", map[string][]string{"sim/timing": {"codegen/kir"}}, map[[2]string]string{{"sim/timing", "codegen"}: "why"},
			[]string{"known upward import sim/timing -> codegen is gone: delete its entry"}},
		{"no layer", map[string][]string{"tools/x": nil}, nil,
			[]string{"tools/x is in no layer: add it to layers (and README.md's Layout)"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := layerViolations(c.imports, c.known); !slices.Equal(got, c.want) {
				t.Errorf("got %q\nwant %q", got, c.want)
			}
		})
	}
}
