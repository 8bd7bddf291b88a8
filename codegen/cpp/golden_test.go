package cpp

import (
	"flag"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tcc-dev/tcc/codegen/cpp/samples"
	"github.com/tcc-dev/tcc/codegen/hostcfg"
	"github.com/tcc-dev/tcc/codegen/target"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

const goldenDir = "testdata/golden"

// generated prints every sample: "<program>.<kernel>.cpp" for each kernel
// and "<program>.json" for the host config.
func generated(t *testing.T, ss []samples.Sample) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, s := range ss {
		for _, k := range s.Program.Kernels {
			src, err := PrintKernel(s.Program, k)
			if err != nil {
				t.Fatalf("sample %s: %v", s.Name, err)
			}
			out[s.Program.Name+"."+k.Name+".cpp"] = string(src)
		}
		js, err := hostcfg.Marshal(s.Program, target.Blackhole())
		if err != nil {
			t.Fatalf("sample %s: host config: %v", s.Name, err)
		}
		out[s.Program.Name+".json"] = string(js)
	}
	return out
}

func sortedKeys(m map[string]string) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func TestGolden(t *testing.T) {
	got := generated(t, samples.All())
	if *update {
		old, _ := filepath.Glob(filepath.Join(goldenDir, "*"))
		for _, f := range old {
			if err := os.Remove(f); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.MkdirAll(goldenDir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, name := range sortedKeys(got) {
			if err := os.WriteFile(filepath.Join(goldenDir, name), []byte(got[name]), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		t.Logf("rewrote %d golden files in %s", len(got), goldenDir)
		return
	}
	for _, name := range sortedKeys(got) {
		t.Run(name, func(t *testing.T) {
			want, err := os.ReadFile(filepath.Join(goldenDir, name))
			if err != nil {
				t.Fatalf("missing golden file (run go test ./codegen/cpp -update): %v", err)
			}
			if diff := cmp.Diff(string(want), got[name]); diff != "" {
				t.Errorf("%s differs from the golden file (-want +got); run go test ./codegen/cpp -update if the change is intended:\n%s", name, diff)
			}
		})
	}
	files, _ := filepath.Glob(filepath.Join(goldenDir, "*"))
	for _, f := range files {
		if _, ok := got[filepath.Base(f)]; !ok {
			t.Errorf("stale golden file %s is not produced by any sample (run go test ./codegen/cpp -update)", f)
		}
	}
}

// TestDeterministic rebuilds the samples and prints them again: the output
// must be byte-identical.
func TestDeterministic(t *testing.T) {
	a := generated(t, samples.All())
	b := generated(t, samples.All())
	if diff := cmp.Diff(a, b); diff != "" {
		t.Errorf("two prints of the same programs differ (-first +second):\n%s", diff)
	}
	for name, src := range a {
		if strings.HasSuffix(name, ".cpp") && !strings.HasPrefix(src, GeneratedHeader+"\n") {
			t.Errorf("%s does not start with %q", name, GeneratedHeader)
		}
	}
}
