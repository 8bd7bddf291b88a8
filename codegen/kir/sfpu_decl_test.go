package kir

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tcc-dev/tcc/ir/sfpu"
)

// approxSwitch reports whether p is an approximation switch: a bool
// parameter whose name, in lower case, contains "approx" or "fast"
// (approx, fast_and_approx, FAST_APPROX, APPROXIMATE, fast, ...).
func approxSwitch(p CParam) bool {
	n := strings.ToLower(p.Name)
	return p.Type == "bool" && (strings.Contains(n, "approx") || strings.Contains(n, "fast"))
}

// approxErrors lists how the calls of entry s would run an approximation:
// every approximation switch of its Init's and Call's declarations (from
// decls) must be false, either set so by InitTemplate / CallTemplate or by
// default, because Eval, which the simulator and the reference run, is
// the exact function (no entry models an approximation). A function
// parameter that is a switch must default to false: the printer passes
// only dst, the scalar or second tile, and Consts. It also lists template
// argument lists that do not fit their declaration.
func approxErrors(s sfpu.Spec, decls map[string]CDecl) []string {
	var errs []string
	for _, c := range []struct{ fn, args string }{{s.Init, s.InitTemplate}, {s.Call, s.CallTemplate}} {
		d, ok := decls[c.fn]
		if !ok {
			errs = append(errs, fmt.Sprintf("%s has no declaration in the table", c.fn))
			continue
		}
		args := TemplateArgs(c.args)
		if len(args) > len(d.Template) {
			errs = append(errs, fmt.Sprintf("%s<%s>: %d template arguments, the declaration has %d parameters", c.fn, c.args, len(args), len(d.Template)))
			continue
		}
		for i, p := range d.Template {
			v, set := p.Default, false
			if i < len(args) {
				v, set = args[i], true
			}
			isBool := v == "true" || v == "false"
			if set && (p.Type == "bool") != isBool {
				errs = append(errs, fmt.Sprintf("%s: template argument %s=%s does not fit its type %s", c.fn, p.Name, v, p.Type))
			}
			if approxSwitch(p) && v != "false" {
				how := "defaults to " + v + " and the entry does not set it to false"
				if set {
					how = "is set to " + v
				}
				errs = append(errs, fmt.Sprintf("%s: template parameter %s %s; the simulator models the exact function", c.fn, p.Name, how))
			}
		}
		for _, p := range d.Params {
			if approxSwitch(p) && p.Default != "false" {
				errs = append(errs, fmt.Sprintf("%s: parameter %s defaults to %q; tcc passes no argument for it and the simulator models the exact function", c.fn, p.Name, p.Default))
			}
		}
	}
	return errs
}

// Every SFPU table entry runs its tt-metal calls exactly: no approximation
// switch of their declarations is left on (see approxErrors), and each
// call's declared parameters take exactly what the printer passes.
func TestSFPUApproxSwitchesOff(t *testing.T) {
	decls, err := SFPUDeclared()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range SFPUTable {
		t.Run(s.Name, func(t *testing.T) {
			for _, e := range approxErrors(s, decls) {
				t.Error(e)
			}
			// The call's arguments: dst, the scalar or (binary) src and
			// dst, then Consts by name.
			want := []string{"dst"}
			switch {
			case s.Param:
				want = append(want, "scalar")
			case s.Binary:
				want = append(want, "src", "dst")
			}
			for _, c := range s.Consts {
				want = append(want, c.Name)
			}
			got := []string{}
			for i, p := range decls[s.Call].Params {
				switch {
				case p.Default != "":
					continue // defaulted
				case i == 0 || s.Binary && i == 2:
					got = append(got, "dst")
				case i == 1 && s.Param:
					got = append(got, "scalar")
				case i == 1 && s.Binary:
					got = append(got, "src")
				default:
					got = append(got, p.Name)
				}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s's required parameters do not match what the printer passes (-want +got):\n%s", s.Call, diff)
			}
		})
	}
}

// geluDecl is gelu.h's declarations (tt_metal/hw/inc/api/compute/
// eltwise_unary/gelu.h): fast_and_approx defaults to true.
const geluDecl = "// gelu.h\ntemplate <bool fast_and_approx = true>\nvoid gelu_tile_init();\ntemplate <bool fast_and_approx = true>\nvoid gelu_tile(uint32_t idst);"

// The check refuses an entry that leaves an approximation on: gelu with
// its real declaration and no template arguments (what issue 26 found
// printed silently), an older gelu.h whose switch is a defaulted function
// argument, and an entry setting a switch to true; it accepts gelu with
// fast_and_approx set to false.
func TestSFPUApproxCheckCatchesGelu(t *testing.T) {
	gelu := sfpu.Spec{Name: "gelu", Call: "gelu_tile", Init: "gelu_tile_init", Decl: geluDecl}
	withTemplate := gelu
	withTemplate.InitTemplate, withTemplate.CallTemplate = "false", "false"
	oldGelu := gelu
	oldGelu.Decl = "void gelu_tile_init(bool fast_and_approx=true);\nvoid gelu_tile(uint32_t idst, bool fast_and_approx=true);"
	expOn := SFPUTable[SFPUExp]
	expOn.CallTemplate = "false, true"
	// exp.h after the pinned release dropped fast_and_approx: exp's
	// "false, false" would set the init's uint32_t scale.
	newExp := SFPUTable[SFPUExp]
	newExp.Decl = "template <bool approx = false, uint32_t scale = 0x3F800000, InputClamping input_clamping = InputClamping::ClampToNegative>\nvoid exp_tile_init();\n" +
		"template <bool approx = false, bool scale_en = false, InputClamping input_clamping = InputClamping::ClampToNegative, int iterations = 8>\nvoid exp_tile(uint32_t idst, VectorMode vector_mode = VectorMode::RC, uint16_t scale = p_sfpu::kCONST_1_FP16B);"
	tooMany := withTemplate
	tooMany.CallTemplate = "false, false"
	for _, tc := range []struct {
		name string
		s    sfpu.Spec
		want []string // substrings of the errors, in order
	}{
		{"gelu_default_true", gelu, []string{
			"gelu_tile_init: template parameter fast_and_approx defaults to true",
			"gelu_tile: template parameter fast_and_approx defaults to true"}},
		{"gelu_set_false", withTemplate, nil},
		{"gelu_function_argument", oldGelu, []string{
			"gelu_tile_init: parameter fast_and_approx defaults to \"true\"",
			"gelu_tile: parameter fast_and_approx defaults to \"true\""}},
		{"exp_set_true", expOn, []string{"exp_tile: template parameter fast_and_approx is set to true"}},
		{"too_many_arguments", tooMany, []string{"gelu_tile<false, false>: 2 template arguments, the declaration has 1"}},
		{"bool_for_uint", newExp, []string{"exp_tile_init: template argument scale=false does not fit its type uint32_t"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			decls, err := SFPUDeclared()
			if err != nil {
				t.Fatal(err)
			}
			ds, err := ParseDecls(tc.s.Decl)
			if err != nil {
				t.Fatal(err)
			}
			all := map[string]CDecl{}
			for k, v := range decls {
				all[k] = v
			}
			for _, d := range ds {
				all[d.Name] = d
			}
			got := approxErrors(tc.s, all)
			if len(got) != len(tc.want) {
				t.Fatalf("errors %q, want %d containing %q", got, len(tc.want), tc.want)
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("error %d is %q, want it to contain %q", i, got[i], w)
				}
			}
		})
	}
}

func TestParseDecls(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		want       []CDecl
	}{
		{"plain", "// a comment; with a semicolon\nvoid relu_tile_init();\nvoid relu_tile(uint32_t idst);",
			[]CDecl{{Name: "relu_tile_init"}, {Name: "relu_tile", Params: []CParam{{"uint32_t", "idst", ""}}}}},
		{"template_defaults", SFPUTable[SFPUExp].Decl, []CDecl{
			{Name: "exp_tile_init", Template: []CParam{{"bool", "approx", "false"}, {"bool", "fast_and_approx", "true"}, {"uint32_t", "scale", "0x3F800000"}}},
			{Name: "exp_tile",
				Template: []CParam{{"bool", "approx", "false"}, {"bool", "fast_and_approx", "true"}, {"bool", "scale_en", "false"}, {"bool", "skip_positive_check", "false"}, {"int", "iterations", "8"}},
				Params:   []CParam{{"uint32_t", "idst", ""}, {"int", "vector_mode", "(int)VectorMode::RC"}, {"uint16_t", "scale", "0x3F80"}}}}},
		{"const_and_call_defaults", "void f(const uint32_t n, uint32_t line = __builtin_LINE());",
			[]CDecl{{Name: "f", Params: []CParam{{"const uint32_t", "n", ""}, {"uint32_t", "line", "__builtin_LINE()"}}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseDecls(tc.text)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ParseDecls (-want +got):\n%s", diff)
			}
		})
	}
	for _, bad := range []string{"void f(", "template <bool a void f();", "f();"} {
		if _, err := ParseDecls(bad); err == nil {
			t.Errorf("ParseDecls(%q): no error", bad)
		}
	}
}
