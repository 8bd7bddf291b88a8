package cli

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

// TestIRDrawGolden: tcc ir --format dot|mermaid draws one layer,
// deterministically (the same output twice), as in the reviewed goldens
// (go test ./cmd/tcc/cli -run TestIRDrawGolden -update rewrites them).
func TestIRDrawGolden(t *testing.T) {
	small := "../../../models/qwen27b/testdata/small.json"
	for _, c := range []struct {
		golden string
		args   []string
	}{
		{"tiny-mlp-fused-layer1.dot", []string{"ir", "tiny-mlp", "--stage", "fused", "--layer", "1", "--format", "dot"}},
		{"tiny-mlp-unfused-layer0.mmd", []string{"ir", "tiny-mlp", "--layer", "0", "--format", "mermaid"}},
		{"qwen27b-small-1x2-fused-layer3.dot", []string{"ir", "qwen27b", "--config", small, "--mesh", "1x2", "--stage", "fused", "--layer", "3", "--format", "dot"}},
		{"qwen27b-small-1x2-fused-layer0.mmd", []string{"ir", "qwen27b", "--config", small, "--mesh", "1x2", "--stage", "fused", "--layer", "0", "--format", "mermaid"}},
	} {
		t.Run(c.golden, func(t *testing.T) {
			out, err := runCLI(t, c.args...)
			if err != nil {
				t.Fatal(err)
			}
			again, err := runCLI(t, c.args...)
			if err != nil || again != out {
				t.Fatalf("second run differs (err %v)", err)
			}
			path := filepath.Join("testdata", "ir_draw", c.golden)
			if *update {
				if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to write it)", err)
			}
			if out != string(want) {
				t.Errorf("%s differs from the golden (rerun with -update and review the diff):\n%s", c.golden, out)
			}
		})
	}
}

// TestIRDrawLabels: fused ops carry their rule, unfused ones their op
// kind; errors name the flag.
func TestIRDrawLabels(t *testing.T) {
	out, err := runCLI(t, "ir", "tiny-mlp", "--stage", "fused", "--layer", "0", "--format", "dot")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"rms_norm\nrule FuseRMSNormOffset"`, `"matmul_swiglu\nrule FuseMLPSwiGLU\nreplaces 4 ops"`, "from embed", `"%19\nto layer 1 (mlp)"`} {
		if !strings.Contains(out, want) {
			t.Errorf("dot lacks %s:\n%s", want, out)
		}
	}
	out, err = runCLI(t, "ir", "tiny-mlp", "--layer", "0", "--format", "dot")
	if err != nil || strings.Contains(out, "rule ") || !strings.Contains(out, `[label="square", shape=box]`) {
		t.Errorf("unfused: %v\n%s", err, out)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"ir", "tiny-mlp", "--format", "dot"}, "--format dot draws one decoder layer: give --layer N"},
		{[]string{"ir", "tiny-mlp", "--layer", "0", "--format", "svg"}, `unknown --format "svg" (want text, dot, mermaid)`},
		{[]string{"ir", "tiny-mlp", "--layer", "7", "--format", "mermaid"}, "--layer 7: the graph has 2 decoder layers"},
		{[]string{"ir", "tiny-mlp", "--layer", "0", "--format", "dot", "--print-after", "fuse"}, "--print-after prints text only"},
	} {
		if _, err := runCLI(t, c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("tcc %s: err = %v, want %q", strings.Join(c.args, " "), err, c.want)
		}
	}
}
