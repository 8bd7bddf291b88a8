package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// runCLI executes the command tree with args and returns stdout and the error.
func runCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := NewRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

func TestRunCheckPasses(t *testing.T) {
	out, err := runCLI(t, "run", "tiny-mlp", "--backend", "sim", "--check", "--steps", "3")
	if err != nil {
		t.Fatalf("run --check failed: %v\n%s", err, out)
	}
	for _, m := range regexp.MustCompile(`(same formats|fp32) PCC ([0-9.]+)`).FindAllStringSubmatch(out, -1) {
		if pcc, err := strconv.ParseFloat(m[2], 64); err != nil || pcc < 0.999 {
			t.Errorf("%s PCC %s < 0.999", m[1], m[2])
		}
	}
	for _, want := range []string{"decode 0", "decode 2", "same formats PCC", "fp32 PCC", "check passed"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// TestRunCheckFailsBelowThreshold proves the failure path: a threshold no
// PCC can reach makes `run --check` fail with exit status 2.
func TestRunCheckFailsBelowThreshold(t *testing.T) {
	out, err := runCLI(t, "run", "tiny-mlp", "--check", "--threshold", "1.5", "--layers", "1")
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != 2 {
		t.Fatalf("want exit code 2, got %v\n%s", err, out)
	}
	if !strings.Contains(out, "FAIL") || !strings.Contains(err.Error(), "below threshold") {
		t.Errorf("failure not reported:\n%s\n%v", out, err)
	}
}

func TestReportOpsJSON(t *testing.T) {
	out, err := runCLI(t, "report", "ops", "tiny-mlp", "--stage", "fused", "--format", "json", "--layers", "3")
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Model    string `json:"model"`
		Mesh     string `json:"mesh"`
		Stage    string `json:"stage"`
		TotalOps int    `json:"total_ops"`
		Layers   []struct {
			Index int            `json:"index"`
			Kind  string         `json:"kind"`
			Ops   int            `json:"ops"`
			ByOp  map[string]int `json:"by_op"`
		} `json:"layers"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	// 3 layers x (rmsnorm, matmul_swiglu, matmul_add) + embedding + (rmsnorm_matmul, argmax).
	if r.Model != "tiny-mlp" || r.Mesh != "1x1" || r.Stage != "fused" || r.TotalOps != 3*3+1+2 || len(r.Layers) != 3 {
		t.Errorf("report = %+v", r)
	}
	if r.Layers[2].ByOp["rmsnorm"] != 1 || r.Layers[2].ByOp["matmul_swiglu"] != 1 || r.Layers[2].ByOp["matmul_add"] != 1 || r.Layers[2].Ops != 3 {
		t.Errorf("layer 2 = %+v", r.Layers[2])
	}
}

func TestCLIErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"run", "no-such-model"}, `unknown model "no-such-model" (known: `},
		{[]string{"report", "ops", "tiny-mlp", "--mesh", "1x2"}, "tiny-mlp runs on one device"},
		{[]string{"report", "ops", "tiny-mlp", "--mesh", "two"}, "bad mesh"},
		{[]string{"report", "ops", "tiny-mlp", "--stage", "half"}, "unknown --stage"},
		{[]string{"report", "ops", "tiny-mlp", "--format", "xml"}, "unknown report format"},
		{[]string{"report", "ops", "tiny-mlp", "--hidden", "33"}, "multiples of 32"},
		{[]string{"ir", "tiny-mlp", "--layer", "9"}, "--layer 9"},
		{[]string{"ir", "tiny-mlp", "--print-after", "nope"}, "unknown pass"},
		{[]string{"run", "tiny-mlp", "--backend", "blackhole"}, "no Blackhole cards"},
		{[]string{"report", "ops", "tiny-mlp", "--stage", "fused", "--disable", "NoSuchRule"}, "neither a pass"},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			_, err := runCLI(t, tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want error containing %q", err, tc.want)
			}
		})
	}
}

func TestDisableRuleKeepsGraphCorrect(t *testing.T) {
	out, err := runCLI(t, "report", "ops", "tiny-mlp", "--stage", "fused", "--disable", "FuseRMSNormOffset", "--format", "json")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, `"rmsnorm"`) {
		t.Errorf("rule disabled but rmsnorm present:\n%s", out)
	}
}

func TestPassesAndIR(t *testing.T) {
	out, err := runCLI(t, "passes")
	if err != nil || !strings.Contains(out, "FuseRMSNormOffset") || !strings.Contains(out, "=>") || !strings.Contains(out, "fuse before place") {
		t.Errorf("passes: %v\n%s", err, out)
	}
	out, err = runCLI(t, "ir", "tiny-mlp", "--print-after", "fuse", "--layer", "1")
	if err != nil || !strings.Contains(out, "// after fuse (#4)") || !strings.Contains(out, "rmsnorm(") || !strings.Contains(out, "region mlp 1") {
		t.Errorf("ir --print-after: %v\n%s", err, out)
	}
}

func TestReportQwen27B(t *testing.T) {
	out, err := runCLI(t, "report", "ops", "qwen27b", "--mesh", "1x2", "--stage", "unfused", "--format", "json")
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		TotalOps int `json:"total_ops"`
		Layers   []struct {
			Index int    `json:"index"`
			Kind  string `json:"kind"`
			Ops   int    `json:"ops"`
		} `json:"layers"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Layers) != 64 {
		t.Fatalf("%d layers, want 64", len(r.Layers))
	}
	for i, l := range r.Layers {
		want := "gdn"
		if i%4 == 3 {
			want = "attention"
		}
		if l.Index != i || l.Kind != want {
			t.Errorf("layer %d: index %d kind %s, want %s", i, l.Index, l.Kind, want)
		}
	}
	if r.TotalOps < 4000 || r.TotalOps > 5000 {
		t.Errorf("total_ops %d, want near 4,560", r.TotalOps)
	}
	for _, mesh := range []string{"1x1", "1x4", "1x8"} {
		if _, err := runCLI(t, "report", "ops", "qwen27b", "--mesh", mesh, "--format", "json"); err != nil {
			t.Errorf("mesh %s: %v", mesh, err)
		}
	}
	if _, err := runCLI(t, "report", "ops", "qwen27b", "--mesh", "1x5"); err == nil || !strings.Contains(err.Error(), "num_attention_heads 24 is not divisible by 5 devices") {
		t.Errorf("mesh 1x5: %v", err)
	}
}

// TestRunQwenSmallEndToEnd is issue 5's acceptance run: the small config on
// both cards of mesh 1x2, a prefill then 16 decode steps entirely through
// the generated programs on the simulator, every step checked.
func TestRunQwenSmallEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the qwen27b small end-to-end run takes about a minute")
	}
	out, err := runCLI(t, "run", "qwen27b", "--config", "../../../models/qwen27b/testdata/small.json", "--mesh", "1x2",
		"--check", "--prefill", "8", "--steps", "16")
	t.Log(out)
	if err != nil {
		t.Fatalf("run --check failed: %v", err)
	}
	for _, want := range []string{"prefill: ", "decode: 76 programs per device", "decode 15", "check passed"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
}
