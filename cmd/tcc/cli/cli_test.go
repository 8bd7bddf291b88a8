package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tcc-dev/tcc/codegen"
	"github.com/tcc-dev/tcc/ir/longtest"
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
	for _, want := range []string{"decode 0", "decode 2", "same formats PCC", "unfused same formats PCC", "fp32 PCC", "check passed"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// TestRunCheckFailsBelowThreshold proves the failure path: threshold 1
// (the unfused reference rounds in other places, so its PCC is below 1)
// makes `run --check` fail with exit status 2; a threshold outside (0, 1]
// is an error.
func TestRunCheckFailsBelowThreshold(t *testing.T) {
	for _, bad := range []string{"1.5", "0", "NaN", "-1"} {
		if _, err := runCLI(t, "run", "tiny-mlp", "--check", "--threshold", bad); err == nil || !strings.Contains(err.Error(), "must be in (0, 1]") {
			t.Errorf("--threshold %s: err = %v", bad, err)
		}
	}
	out, err := runCLI(t, "run", "tiny-mlp", "--check", "--threshold", "1", "--layers", "1")
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
	// 3 layers x (rms_norm, matmul_swiglu, matmul_add) + embedding + (rmsnorm_matmul, argmax).
	if r.Model != "tiny-mlp" || r.Mesh != "1x1" || r.Stage != "fused" || r.TotalOps != 3*3+1+2 || len(r.Layers) != 3 {
		t.Errorf("report = %+v", r)
	}
	if r.Layers[2].ByOp["rms_norm"] != 1 || r.Layers[2].ByOp["matmul_swiglu"] != 1 || r.Layers[2].ByOp["matmul_add"] != 1 || r.Layers[2].Ops != 3 {
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
		{[]string{"run", "tiny-mlp", "--backend", "blackhole"}, "no /dev/tenstorrent device exists: install the tt-kmd driver"},
		{[]string{"report", "ops", "tiny-mlp", "--stage", "fused", "--disable", "NoSuchRule"}, `--disable "NoSuchRule": no pass or fusion rule has this name; no name is close`},
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
	if strings.Contains(out, `"rms_norm"`) {
		t.Errorf("rule disabled but rms_norm present:\n%s", out)
	}
}

func TestPassesAndIR(t *testing.T) {
	out, err := runCLI(t, "passes")
	if err != nil || !strings.Contains(out, "FuseRMSNormOffset") || !strings.Contains(out, "=>") || !strings.Contains(out, "fuse before place") {
		t.Errorf("passes: %v\n%s", err, out)
	}
	out, err = runCLI(t, "ir", "tiny-mlp", "--print-after", "fuse", "--layer", "1")
	if err != nil || !strings.Contains(out, "// after fuse (#4)") || !strings.Contains(out, "rms_norm(") || !strings.Contains(out, "region mlp 1") {
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

// TestRunQwenChunkedPrefill: a 70-token prompt on the small config at 1x2
// in prefill steps of 32, 32 and 6 tokens (two prefill builds), each step's
// state carried to the next and checked, then a decode step.
func TestRunQwenChunkedPrefill(t *testing.T) {
	longtest.Skip(t, "a chunked 70-token prefill of the qwen27b small config on two cards (~3 CPU-min)")
	out, err := runCLI(t, "run", "qwen27b", "--config", "../../../models/qwen27b/testdata/small.json", "--mesh", "1x2",
		"--check", "--prefill", "70", "--prefill-chunk", "32", "--steps", "1")
	t.Log(out)
	if err != nil {
		t.Fatalf("run --check failed: %v", err)
	}
	for _, want := range []string{"prefill 32: ", "prefill 6: ", "prefill 0..31 ", "prefill 32..63 ", "prefill 64..69 ", "decode 0 ", "check passed"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
}

// TestRunQwenSmallEndToEnd is issue 5's acceptance run: the small config on
// both cards of mesh 1x2, a prefill then 16 decode steps entirely through
// the generated programs on the simulator, every step checked.
func TestRunQwenSmallEndToEnd(t *testing.T) {
	longtest.Skip(t, "the qwen27b small-config end-to-end run, three users (~4 CPU-min)")
	out, err := runCLI(t, "run", "qwen27b", "--config", "../../../models/qwen27b/testdata/small.json", "--mesh", "1x2",
		"--check", "--prefill", "8", "--steps", "16", "--batch", "3")
	t.Log(out)
	if err != nil {
		t.Fatalf("run --check failed: %v", err)
	}
	for _, want := range []string{"prefill: ", "decode: 78 programs per device", "decode 15", "check passed"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	// On the simulator every program reproduces the same-formats
	// reference bit for bit but the decode attention (flash decoding
	// rounds in its own order: within rounding, PCC >=
	// --program-threshold); so the logits are within that rounding. The
	// prefill's flash attention is bit for bit (the reference follows its
	// chunked order).
	lines := regexp.MustCompile(`programs: (\d+) of (\d+) checked on their own inputs, (\d+) bit for bit(, (\d+) differ \(([^\n]*)\))? ok`).FindAllStringSubmatch(out, -1)
	if len(lines) != 17 {
		t.Errorf("%d programs lines, want 17 (prefill and 16 decode steps)", len(lines))
	}
	for _, m := range lines {
		if m[1] != m[2] {
			t.Errorf("not every program checked: %s", m[0])
		}
		for _, d := range strings.Split(m[6], "; ") {
			if d != "" && !strings.HasPrefix(d, "op sdpa_decode_gated ") && !regexp.MustCompile(`^\d+ more$`).MatchString(d) {
				t.Errorf("a program other than the attentions is not bit for bit: %s", d)
			}
		}
	}
}

func TestPerfJSON(t *testing.T) {
	out, err := runCLI(t, "perf", "qwen27b", "--mesh", "1x2", "--stage", "fused", "--format", "json")
	if err != nil {
		t.Fatalf("perf failed: %v\n%s", err, out)
	}
	var r struct {
		Model        string  `json:"model"`
		Mesh         string  `json:"mesh"`
		Stage        string  `json:"stage"`
		Batch        int     `json:"batch"`
		Mode         string  `json:"mode"`
		Devices      int     `json:"devices"`
		StepUS       float64 `json:"step_us"`
		FloorUS      float64 `json:"floor_us"`
		FloorBytes   int64   `json:"floor_bytes"`
		Position     int     `json:"position"`
		LastPosition int     `json:"last_position"`
		MaxSeq       int     `json:"max_seq"`
		Memory       struct {
			Weights, KV, State, Other, Total, Capacity, Free int64
		} `json:"memory"`
		LaunchUSTotal float64 `json:"launch_us_total"`
		Kinds         []struct {
			Op      string  `json:"op"`
			Count   int     `json:"count"`
			Cores   int     `json:"cores"`
			Bytes   int64   `json:"bytes"`
			USEach  float64 `json:"us_each"`
			USTotal float64 `json:"us_total"`
		} `json:"kinds"`
		Programs []struct {
			Device         int     `json:"device"`
			Index          int     `json:"index"`
			Op             string  `json:"op"`
			Layer          int     `json:"layer"`
			Cores          int     `json:"cores"`
			BytesRead      int64   `json:"bytes_read"`
			BytesWritten   int64   `json:"bytes_written"`
			US             float64 `json:"us"`
			CriticalThread string  `json:"critical_thread"`
		} `json:"programs"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("not JSON: %v\n%.500s", err, out)
	}
	if r.Model != "qwen27b" || r.Mesh != "1x2" || r.Stage != "fused" || r.Batch != 1 || r.Mode != "decode" || r.Devices != 2 {
		t.Errorf("header %+v", r)
	}
	if len(r.Programs) != 2*517 {
		t.Fatalf("%d program rows, want 1034 (517 per device: the head's norm is its own program, its argmax one sharded program)", len(r.Programs))
	}
	// step_us is the slowest device's sum of program times plus launch gaps.
	sum := map[int]float64{}
	count := 0
	for _, p := range r.Programs {
		if p.US <= 0 || p.Cores <= 0 || p.CriticalThread == "" {
			t.Fatalf("program row %+v", p)
		}
		sum[p.Device] += p.US
	}
	for _, k := range r.Kinds {
		count += k.Count
	}
	if count != 517 {
		t.Errorf("kinds count %d programs, want 517", count)
	}
	slow := max(sum[0], sum[1]) + r.LaunchUSTotal
	if d := slow - r.StepUS; d > 1 || d < -1 {
		t.Errorf("step_us %.1f, but programs plus launch gaps sum to %.1f", r.StepUS, slow)
	}
	if r.FloorUS <= 0 || r.StepUS <= r.FloorUS {
		t.Errorf("floor %.1f us, step %.1f us", r.FloorUS, r.StepUS)
	}
	// The default position: the last of --max-seq 128.
	if r.Position != 127 || r.LastPosition != 127 || r.MaxSeq != 128 {
		t.Errorf("position %d..%d of max_seq %d, want 127..127 of 128", r.Position, r.LastPosition, r.MaxSeq)
	}
	// DRAM per device: 16 attention layers x K and V, [1, 2, 128, 256] bf16 each.
	m := r.Memory
	if m.KV != 16*2*2*128*256*2 || m.Weights < 10e9 || m.Total != m.Weights+m.KV+m.State+m.Other || m.Free != m.Capacity-m.Total || m.Capacity != 8*4_278_190_080 {
		t.Errorf("memory %+v", m)
	}
}

func TestPerfTableAndParams(t *testing.T) {
	// The full unfused model (4,454 ops, of which 145 reshapes are views of
	// their operands and no program: 4,309 programs, ~8 s) in the long
	// suite, the small config's otherwise.
	args, programs := []string{"perf", "qwen27b", "--mesh", "1x2", "--stage", "unfused", "--config", "../../../models/qwen27b/testdata/small.json"}, "programs per device"
	if longtest.Enabled() {
		args, programs = args[:6], "4309 programs per device"
	}
	out, err := runCLI(t, args...)
	if err != nil {
		t.Fatalf("perf failed: %v\n%s", err, out)
	}
	for _, want := range []string{programs, "us each", "waits on most", "layer", "step:", "DRAM floor:", "step/floor"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q", want)
		}
	}
	out, err = runCLI(t, "perf", "--params")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"fixed_program", "dram_bank", "unpack_tile", "matmul_unpack_tile", "fitted", "noc_latencies.yaml"} {
		if !strings.Contains(out, want) {
			t.Errorf("--params lacks %q:\n%s", want, out)
		}
	}
}

func TestPerfErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"perf", "qwen27b", "--stage", "half"}, `unknown --stage "half"`},
		{[]string{"perf", "qwen27b", "--mesh", "1x5"}, "not divisible by 5"},
		{[]string{"perf", "qwen27b", "--format", "xml"}, `unknown --format "xml"`},
		{[]string{"perf", "tiny-mlp", "--trace", "/nonexistent-dir/t.json"}, "cannot write /nonexistent-dir/t.json"},
		{[]string{"perf"}, "accepts 1 arg"},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			out, err := runCLI(t, c.args...)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want it to contain %q\n%s", err, c.want, out)
			}
		})
	}
}

func TestPerfTraceParses(t *testing.T) {
	path := t.TempDir() + "/step.json"
	if out, err := runCLI(t, "perf", "tiny-mlp", "--trace", path); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var tr struct {
		TraceEvents []struct {
			Name string   `json:"name"`
			Ph   string   `json:"ph"`
			TS   *float64 `json:"ts"`
			Dur  float64  `json:"dur"`
			PID  *int     `json:"pid"`
			TID  *int     `json:"tid"`
		} `json:"traceEvents"`
	}
	if err := json.Unmarshal(data, &tr); err != nil {
		t.Fatalf("trace is not trace-event JSON: %v", err)
	}
	programs, threads := 0, 0
	for _, e := range tr.TraceEvents {
		if e.Name == "" || e.PID == nil || e.TID == nil || e.TS == nil || (e.Ph != "X" && e.Ph != "M") {
			t.Fatalf("malformed event %+v", e)
		}
		if e.Ph == "X" {
			if e.Dur <= 0 {
				t.Errorf("slice %s has duration %v", e.Name, e.Dur)
			}
			if *e.TID == 0 {
				programs++
			} else {
				threads++
			}
		}
	}
	if programs == 0 || threads < programs {
		t.Errorf("%d program slices, %d thread slices", programs, threads)
	}
}

func TestVersion(t *testing.T) {
	out, err := runCLI(t, "--version")
	if err != nil || !strings.Contains(out, "tcc version "+Version()+"; targets ") || !strings.Contains(out, "tt-metal@") {
		t.Errorf("--version: %v\n%s", err, out)
	}
}

// TestRunPastTheCache: a run that needs more positions than the KV cache
// holds is refused before anything runs (it used to write each head's
// K/V rows into the next head's); a step past the cache is refused by the
// model's inputs too.
func TestRunPastTheCache(t *testing.T) {
	out, err := runCLI(t, "run", "qwen27b", "--config", "../../../models/qwen27b/testdata/small.json", "--max-seq", "32", "--steps", "34")
	if err == nil || !strings.Contains(err.Error(), "need 34 positions, but the KV cache holds 32 (--max-seq 32)") {
		t.Fatalf("err = %v\n%s", err, out)
	}
	if strings.Contains(out, "decode 0") {
		t.Errorf("a step ran before the refusal:\n%s", out)
	}
}

func TestUnknownReportAndBadLayer(t *testing.T) {
	if _, err := runCLI(t, "report", "bogus"); err == nil || !strings.Contains(err.Error(), `unknown report "bogus"`) {
		t.Errorf("tcc report bogus: err = %v", err)
	}
	if _, err := runCLI(t, "ir", "tiny-mlp", "--layer", "-5"); err == nil || !strings.Contains(err.Error(), "--layer -5") {
		t.Errorf("tcc ir --layer -5: err = %v", err)
	}
}

// TestSizeLimits: sizes that used to overflow or build nonsense are errors
// naming the flag.
func TestSizeLimits(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"build", "tiny-mlp", "--vocab", "144115188075855904", "-o", t.TempDir()}, "--vocab 144115188075855904 is more than the limit"},
		{[]string{"build", "tiny-mlp", "--layers", "9223372036854775807", "-o", t.TempDir()}, "--layers 9223372036854775807 is more than the limit"},
		{[]string{"build", "tiny-mlp", "--mesh", "9223372036854775807x9223372036854775807", "-o", t.TempDir()}, "at most 64 devices"},
	} {
		t.Run(c.args[2], func(t *testing.T) {
			if _, err := runCLI(t, c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want %q", err, c.want)
			}
		})
	}
}

// TestRunRefusesHostMemory: a full-size run that would need more host
// memory than allowed is refused before it allocates.
func TestRunRefusesHostMemory(t *testing.T) {
	_, err := runCLI(t, "run", "qwen27b", "--mesh", "1x2", "--host-memory-gb", "24")
	if err == nil || !strings.Contains(err.Error(), "GB of host memory") || !strings.Contains(err.Error(), "--host-memory-gb allows 24.0 GB") ||
		!strings.Contains(err.Error(), "even with no decoder layers the embedding, head and inputs need") {
		t.Fatalf("err = %v", err)
	}
	// What fits: the layer count, from the per-layer estimate.
	_, err = runCLI(t, "run", "tiny-mlp", "--layers", "8", "--hidden", "1024", "--intermediate", "4096", "--vocab", "4096", "--host-memory-gb", "2")
	if err == nil || !strings.Contains(err.Error(), "what fits: --layers 4 (of 8)") {
		t.Errorf("err = %v", err)
	}
	if _, err := runCLI(t, "run", "tiny-mlp", "--layers", "4", "--hidden", "1024", "--intermediate", "4096", "--vocab", "4096", "--host-memory-gb", "2", "--steps", "0"); err == nil || !strings.Contains(err.Error(), "--steps 0") {
		t.Errorf("the run --layers 4 said would fit was refused: %v", err)
	}
	// A smaller mesh is named when it fits.
	_, err = runCLI(t, "run", "qwen27b", "--config", "../../../models/qwen27b/testdata/small.json", "--mesh", "1x2", "--host-memory-gb", "0.54")
	if err == nil || !strings.Contains(err.Error(), "--mesh 1x1 would need 0.53 GB") {
		t.Errorf("err = %v", err)
	}
	if _, err := runCLI(t, "run", "tiny-mlp", "--host-memory-gb", "-1"); err == nil || !strings.Contains(err.Error(), "must be positive") {
		t.Errorf("--host-memory-gb -1: err = %v", err)
	}
}

// TestOutputNotStdout: every -o is a path; "-" is refused with a clear
// error and writes nothing (no directory or file named "-").
func TestOutputNotStdout(t *testing.T) {
	dir := t.TempDir()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chdir(dir); err != nil {
		t.Fatal(err)
	}
	defer os.Chdir(wd)
	for _, args := range [][]string{
		{"build", "tiny-mlp", "-o", "-"},
		{"gen-go", "tiny-mlp", "-o", "-"},
		{"weights", "dequant", dir, "x", "-o", "-"},
		{"weights", "convert", "--from", dir, "-o", "-"},
	} {
		_, err := runCLI(t, args...)
		if err == nil || !strings.Contains(err.Error(), "-o -: this command writes") {
			t.Errorf("tcc %s: err = %v, want the -o - refusal", strings.Join(args, " "), err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "-")); !os.IsNotExist(err) {
		t.Errorf("a file or directory named - was written: %v", err)
	}
}

// TestGenGoHidden: the maintenance command gen-go runs but is not in the
// command list of tcc --help.
func TestGenGoHidden(t *testing.T) {
	out, err := runCLI(t, "--help")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "gen-go") {
		t.Errorf("tcc --help lists gen-go:\n%s", out)
	}
	if !strings.Contains(out, "build") {
		t.Errorf("tcc --help lacks the user commands:\n%s", out)
	}
}

// TestDisableValidated: a --disable name that is neither a pass nor a rule
// is refused by every command that takes it, in both stages, with the
// nearest names and the pass each acts in; a valid name at --stage unfused
// (where no pass runs) is refused too.
func TestDisableValidated(t *testing.T) {
	want := `--disable "FuseRMSNrom": no pass or fusion rule has this name; did you mean FuseRMSNorm (norm rule, run by pass fuse)`
	for _, args := range [][]string{
		{"report", "ops", "tiny-mlp", "--stage", "fused"},
		{"report", "ops", "tiny-mlp", "--stage", "unfused"},
		{"build", "tiny-mlp", "-o", t.TempDir()},
		{"run", "tiny-mlp"},
		{"perf", "tiny-mlp"},
		{"ir", "tiny-mlp"},
		{"ir", "tiny-mlp", "--print-after", "fuse"},
		{"weights", "convert", "--from", t.TempDir(), "-o", t.TempDir()},
	} {
		args = append(args, "--disable", "FuseRMSNrom")
		if _, err := runCLI(t, args...); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("tcc %s: err = %v, want %q", strings.Join(args, " "), err, want)
		}
	}
	if _, err := runCLI(t, "report", "ops", "tiny-mlp", "--disable", "fuse-block", "--stage", "fused"); err == nil || !strings.Contains(err.Error(), "did you mean fuse-blocks (pass 2)? (tcc passes") {
		t.Errorf("fuse-block: err = %v", err)
	}
	if _, err := runCLI(t, "report", "ops", "tiny-mlp", "--disable", "FuseRMSNorm"); err == nil || !strings.Contains(err.Error(), "--stage unfused runs no pass") {
		t.Errorf("valid name at --stage unfused: err = %v", err)
	}
	if _, err := runCLI(t, "ir", "tiny-mlp", "--print-after", "fuse", "--disable", "FuseRMSNorm"); err != nil {
		t.Errorf("ir --print-after with a valid --disable: %v", err)
	}
}

func TestEditDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		d    int
	}{{"", "", 0}, {"abc", "", 3}, {"", "ab", 2}, {"kitten", "sitting", 3}, {"fuse-block", "fuse-blocks", 1}, {"flaw", "lawn", 2}} {
		if got := editDistance(c.a, c.b); got != c.d {
			t.Errorf("editDistance(%q, %q) = %d, want %d", c.a, c.b, got, c.d)
		}
	}
}

// TestRunProgress: a run prints its estimate, and a long step reports the
// layers it reaches, to stderr.
func TestRunProgress(t *testing.T) {
	defer func(d time.Duration) { progressAfter = d }(progressAfter)
	progressAfter = 0
	root := NewRoot()
	var out, errs bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errs)
	root.SetArgs([]string{"run", "tiny-mlp", "--layers", "3"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^tcc: estimate: [0-9.]+ GB of host memory, about \S+ per step on the simulator \(\S+ for 1 step\)$`).MatchString(errs.String()) ||
		!strings.Contains(errs.String(), "tcc: decode 0: layer 1/3 (") {
		t.Errorf("stderr:\n%s", errs.String())
	}
	if strings.Contains(out.String(), "tcc:") {
		t.Errorf("progress on stdout:\n%s", out.String())
	}
}

// TestReportMetadata: the report says what it counts (tcc version, stage,
// mode, batch, config) in JSON and in the table header, prefill included.
func TestReportMetadata(t *testing.T) {
	small := "../../../models/qwen27b/testdata/small.json"
	out, err := runCLI(t, "report", "ops", "qwen27b", "--config", small, "--mode", "prefill", "--seq", "32", "--batch", "2", "--stage", "fused", "--format", "json")
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		TccVersion string `json:"tcc_version"`
		Stage      string `json:"stage"`
		Mode       string `json:"mode"`
		Batch      int    `json:"batch"`
		Config     string `json:"config"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if r.TccVersion != codegen.Version || r.Stage != "fused" || r.Mode != "prefill" || r.Batch != 2 || r.Config != small {
		t.Errorf("report = %+v", r)
	}
	out, err = runCLI(t, "report", "ops", "qwen27b", "--config", small, "--mode", "prefill", "--seq", "32")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out, "model qwen27b  mesh 1x1  stage unfused  mode prefill  batch 1  config "+small+"  (programs per device per prefill step)\n") ||
		!strings.Contains(out, "ops per device per prefill step") || strings.Contains(out, "decode") {
		t.Errorf("prefill table:\n%s", out)
	}
	out, err = runCLI(t, "report", "ops", "qwen27b", "--format", "json")
	if err != nil || !strings.Contains(out, `"config": "embedded"`) || !strings.Contains(out, `"mode": "decode"`) {
		t.Errorf("default config: %v\n%.300s", err, out)
	}
}

// TestModelFlagsTyped: integer model parameters are int flags (shown as
// int in --help, refused when not an integer as they are parsed); the others
// stay strings.
func TestModelFlagsTyped(t *testing.T) {
	out, err := runCLI(t, "build", "--help")
	if err != nil {
		t.Fatal(err)
	}
	for _, re := range []string{`--layers int +number of decoder layers (?s:.*?)default 2\)`, `--batch int `, `--max-seq int `, `--seq int `, `--hidden int `, `--mode string `, `--config string (?s:.*?)\(model qwen27b\)\n`, `--dtype-policy string (?s:.*?)default "fast"`, `--disable names `} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("help lacks %s:\n%s", re, out)
		}
	}
	for _, c := range []struct{ arg, want string }{
		{"abc", `invalid argument "abc" for "--layers" flag: not an integer`},
		{"1.5", `invalid argument "1.5" for "--layers" flag: not an integer`},
		{"99999999999999999999", `invalid argument "99999999999999999999" for "--layers" flag: out of range for an int`},
	} {
		if _, err := runCLI(t, "report", "ops", "tiny-mlp", "--layers", c.arg); err == nil || err.Error() != c.want {
			t.Errorf("--layers %s: err = %v, want %q", c.arg, err, c.want)
		}
	}
	if out, err := runCLI(t, "report", "ops", "tiny-mlp", "--layers", "3", "--format", "json"); err != nil || !strings.Contains(out, `"index": 2`) {
		t.Errorf("--layers 3: %v", err)
	}
}

// TestReportCompare: --compare counts the unfused and the fused graph per
// layer; the totals are the two stages' own reports' totals.
func TestReportCompare(t *testing.T) {
	out, err := runCLI(t, "report", "ops", "qwen27b", "--config", "../../../models/qwen27b/testdata/small.json", "--mesh", "1x2", "--compare", "--format", "json")
	if err != nil {
		t.Fatal(err)
	}
	var c comparison
	if err := json.Unmarshal([]byte(out), &c); err != nil {
		t.Fatal(err)
	}
	total := func(stage string) int {
		out, err := runCLI(t, "report", "ops", "qwen27b", "--config", "../../../models/qwen27b/testdata/small.json", "--mesh", "1x2", "--stage", stage, "--format", "json")
		if err != nil {
			t.Fatal(err)
		}
		var r struct {
			TotalOps int `json:"total_ops"`
		}
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatal(err)
		}
		return r.TotalOps
	}
	if c.TotalUnfused != total("unfused") || c.TotalFused != total("fused") || len(c.Layers) != 8 || c.Mode != "decode" {
		t.Errorf("comparison = %+v", c)
	}
	sum := [2]int{}
	for _, l := range append(c.Layers, c.Other...) {
		sum[0] += l.Unfused
		sum[1] += l.Fused
		if l.Fused >= l.Unfused && l.Kind != "embed" {
			t.Errorf("%s %d: %d fused programs from %d ops", l.Kind, l.Index, l.Fused, l.Unfused)
		}
	}
	if sum != [2]int{c.TotalUnfused, c.TotalFused} {
		t.Errorf("rows sum to %v, totals %d, %d", sum, c.TotalUnfused, c.TotalFused)
	}
	if c.Layers[3].Kind != "attention" || len(c.Layers[3].Rules) == 0 {
		t.Errorf("layer 3 = %+v", c.Layers[3])
	}
	out, err = runCLI(t, "report", "ops", "tiny-mlp", "--compare")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^ +0 +mlp +13 +3 +10 +4\.3x$`).MatchString(out) || !regexp.MustCompile(`(?m)^ +total +36 +9 +27 +4\.0x$`).MatchString(out) {
		t.Errorf("table:\n%s", out)
	}
	// --disable applies to the fused side (without FuseMLPSwiGLU the
	// layer's silu(gate) * up is FuseUnaryMul's unary_mul: 4 programs, not 3).
	out, err = runCLI(t, "report", "ops", "tiny-mlp", "--compare", "--disable", "FuseMLPSwiGLU", "--format", "csv")
	if err != nil || !strings.Contains(out, "tiny-mlp,1x1,decode,layer,0,mlp,13,4\n") {
		t.Errorf("--disable: %v\n%s", err, out)
	}
	if _, err := runCLI(t, "report", "ops", "tiny-mlp", "--compare", "--stage", "unfused"); err == nil || !strings.Contains(err.Error(), "--compare counts both stages") {
		t.Errorf("--compare --stage: err = %v", err)
	}
}

// TestRunCheckNamesFP32OnlyFailures: a step whose logits miss only the
// fp32 threshold (the same-formats reference agrees) exits 2 naming the
// step and both PCCs, so a user can tell a format's rounding from a wrong
// program.
func TestRunCheckNamesFP32OnlyFailures(t *testing.T) {
	_, err := runCLI(t, "run", "tiny-mlp", "--check", "--fp32-threshold", "0.99999999")
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != 2 {
		t.Fatalf("want exit 2, got %v", err)
	}
	for _, want := range []string{"0.99999999 fp32", "decode 0 (fp32 PCC 0.99", "same formats 1.000000) missed only the fp32 threshold"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if _, err := runCLI(t, "run", "tiny-mlp", "--check"); err != nil {
		t.Errorf("default thresholds: %v", err)
	}
}
