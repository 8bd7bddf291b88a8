package external

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func abs(t *testing.T, path string) string {
	t.Helper()
	p, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestInspectExample(t *testing.T) {
	got, err := Inspect(".", "./example")
	if err != nil {
		t.Fatal(err)
	}
	root := abs(t, "../..")
	goVer, err := goDirective(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	want := []PkgInfo{{
		Path:      "github.com/tcc-dev/tcc/passes/external/example",
		Name:      "example",
		Dir:       abs(t, "example"),
		Family:    "scalar",
		Module:    "github.com/tcc-dev/tcc",
		ModuleDir: root,
		GoVersion: goVer,
		TCCDir:    root,
		Files:     []string{abs(t, "example/doc.go"), abs(t, "example/rules.go")},
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Inspect(./example) (-want +got):\n%s", diff)
	}
}

func TestInspectErrors(t *testing.T) {
	tests := []struct {
		name     string
		patterns []string
		want     []string // substrings of the error
	}{
		{"value slice", []string{"./testdata/badsig"}, []string{
			"package github.com/tcc-dev/tcc/passes/external/testdata/badsig",
			"testdata/badsig/rules.go:6",
			"Rules has type func() []rewrite.Rule",
			"want func Rules() []*rewrite.Rule (rewrite = github.com/tcc-dev/tcc/passes/rewrite)",
		}},
		{"own Rule type", []string{"./testdata/localrule"}, []string{
			"testdata/localrule/rules.go:7",
			"Rules has type func() []*localrule.Rule",
		}},
		{"Rules is a variable", []string{"./testdata/rulesvar"}, []string{
			"testdata/rulesvar/rules.go:6",
			"Rules is var Rules func() []*rewrite.Rule",
		}},
		{"unexported rules", []string{"./testdata/norules"}, []string{
			"package github.com/tcc-dev/tcc/passes/external/testdata/norules declares no Rules function",
			"found unexported func rules() []*rewrite.Rule at testdata/norules/rules.go:6; export it",
		}},
		{"type error", []string{"./testdata/typeerr"}, []string{
			"1 error(s)",
			"testdata/typeerr/rules.go:7:25: undefined: undefinedRule",
		}},
		{"Family not a constant", []string{"./testdata/badfamily"}, []string{
			"testdata/badfamily/rules.go:6",
			"Family is var Family string; want a string constant",
		}},
		{"built-in family", []string{"./testdata/normfamily"}, []string{
			"package github.com/tcc-dev/tcc/passes/external/testdata/normfamily",
			"rule family norm is built in",
		}},
		{"not a package", []string{"./testdata/nosuchdir"}, []string{
			"testdata/nosuchdir",
		}},
		{"main package", []string{"../../cmd/tcc"}, []string{
			"package github.com/tcc-dev/tcc/cmd/tcc is package main",
		}},
		{"no patterns", nil, []string{"no package patterns"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Inspect(".", tc.patterns...)
			if err == nil {
				t.Fatalf("Inspect(%v) = %+v, want an error", tc.patterns, got)
			}
			if got != nil {
				t.Errorf("Inspect(%v) returned %d packages with its error, want none", tc.patterns, len(got))
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Inspect(%v) error\n\t%v\nlacks %q", tc.patterns, err, w)
				}
			}
		})
	}
}

func TestSplitFlags(t *testing.T) {
	tests := []struct {
		name      string
		args      []string
		rules     []string
		timeout   time.Duration
		rest      []string
		wantError string
	}{
		{"none", []string{"passes"}, nil, DefaultTimeout, []string{"passes"}, ""},
		{"separate value", []string{"build", "--rules", "./a", "tiny-mlp"}, []string{"./a"}, DefaultTimeout, []string{"build", "tiny-mlp"}, ""},
		{"equals and list", []string{"--rules=./a,./b", "report", "ops", "--rules", "./c"}, []string{"./a", "./b", "./c"}, DefaultTimeout, []string{"report", "ops"}, ""},
		{"after --", []string{"run", "--", "--rules", "./a"}, nil, DefaultTimeout, []string{"run", "--", "--rules", "./a"}, ""},
		{"other flags kept", []string{"ir", "--stage=fused", "--rules=./a", "--layer", "0"}, []string{"./a"}, DefaultTimeout, []string{"ir", "--stage=fused", "--layer", "0"}, ""},
		{"timeout", []string{"build", "--rules-timeout", "90s", "--rules=./a"}, []string{"./a"}, 90 * time.Second, []string{"build"}, ""},
		{"no limit", []string{"build", "--rules-timeout=0", "--rules=./a"}, []string{"./a"}, 0, []string{"build"}, ""},
		{"missing value", []string{"passes", "--rules"}, nil, 0, nil, "--rules needs a package pattern"},
		{"empty pattern", []string{"--rules=./a,", "passes"}, nil, 0, nil, "empty package pattern"},
		{"missing timeout", []string{"passes", "--rules-timeout"}, nil, 0, nil, "--rules-timeout needs a duration"},
		{"negative timeout", []string{"passes", "--rules-timeout=-1s"}, nil, 0, nil, `--rules-timeout "-1s"`},
		{"bad timeout", []string{"passes", "--rules-timeout=soon"}, nil, 0, nil, `--rules-timeout "soon"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			flags, rest, err := SplitFlags(tc.args)
			if tc.wantError != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantError) {
					t.Fatalf("SplitFlags(%q) error = %v, want %q", tc.args, err, tc.wantError)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if flags.Timeout != tc.timeout {
				t.Errorf("timeout = %v, want %v", flags.Timeout, tc.timeout)
			}
			rules := flags.Rules
			if diff := cmp.Diff(tc.rules, rules); diff != "" {
				t.Errorf("rules (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.rest, rest); diff != "" {
				t.Errorf("rest (-want +got):\n%s", diff)
			}
		})
	}
}
