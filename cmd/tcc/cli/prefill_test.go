package cli

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/tcc-dev/tcc/ir/longtest"
)

// TestPrefillSegments: a prompt runs as whole chunks, then the rest; the
// builds it needs are at most two, whatever its length.
func TestPrefillSegments(t *testing.T) {
	for _, tc := range []struct {
		n, chunk int
		want     []int
	}{
		{0, 64, nil},
		{1, 64, []int{1}},
		{64, 64, []int{64}},
		{70, 32, []int{32, 32, 6}},
		{96, 32, []int{32, 32, 32}},
		{10000, 4096, []int{4096, 4096, 1808}},
	} {
		t.Run(fmt.Sprintf("%d_by_%d", tc.n, tc.chunk), func(t *testing.T) {
			if diff := cmp.Diff(tc.want, prefillSegments(tc.n, tc.chunk)); diff != "" {
				t.Errorf("prefillSegments(%d, %d) (-want +got):\n%s", tc.n, tc.chunk, diff)
			}
		})
	}
	if _, err := runCLI(t, "run", "tiny-mlp", "--prefill-chunk", "0"); err == nil || !strings.Contains(err.Error(), "--prefill-chunk 0") {
		t.Errorf("--prefill-chunk 0: %v", err)
	}
}

// TestPrefillSteps: each step of a prompt starts where the one before
// ended.
func TestPrefillSteps(t *testing.T) {
	for _, tc := range []struct {
		n, chunk int
		want     []prefillStep
	}{
		{0, 64, []prefillStep{}},
		{5, 64, []prefillStep{{0, 5}}},
		{70, 32, []prefillStep{{0, 32}, {32, 32}, {64, 6}}},
		{192, 64, []prefillStep{{0, 64}, {64, 64}, {128, 64}}},
	} {
		t.Run(fmt.Sprintf("%d_by_%d", tc.n, tc.chunk), func(t *testing.T) {
			if diff := cmp.Diff(tc.want, prefillSteps(tc.n, tc.chunk)); diff != "" {
				t.Errorf("prefillSteps(%d, %d) (-want +got):\n%s", tc.n, tc.chunk, diff)
			}
		})
	}
}

// TestPredictPositions: the positions predicted are the first, the last
// and some spread between (all of them when k is 0 or covers them); the
// others are interpolated linearly in position, per device, so a time
// linear in position comes out exactly.
func TestPredictPositions(t *testing.T) {
	linear := func(p int) []float64 { return []float64{100 + 0.5*float64(p), 200 - 0.25*float64(p)} }
	pos := make([]int, 10)
	for i := range pos {
		pos[i] = 64 * i
	}
	for _, tc := range []struct {
		name string
		k    int
		want []int // indices predicted
	}{
		{"all", 0, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}},
		{"more than positions", 12, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}},
		{"two", 2, []int{0, 9}},
		{"four", 4, []int{0, 3, 6, 9}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var asked []int
			times, sim, err := predictPositions(pos, tc.k, func(p int) ([]float64, error) {
				asked = append(asked, p/64)
				return linear(p), nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, asked); diff != "" {
				t.Errorf("positions predicted (-want +got):\n%s", diff)
			}
			var simulated []int
			for i, s := range sim {
				if s {
					simulated = append(simulated, i)
				}
			}
			if diff := cmp.Diff(tc.want, simulated); diff != "" {
				t.Errorf("positions marked simulated (-want +got):\n%s", diff)
			}
			for i, p := range pos {
				if diff := cmp.Diff(linear(p), times[i], cmpopts.EquateApprox(0, 1e-9)); diff != "" {
					t.Errorf("position %d (-want +got):\n%s", p, diff)
				}
			}
		})
	}
	if _, _, err := predictPositions(pos, 3, func(int) ([]float64, error) { return nil, fmt.Errorf("no") }); err == nil {
		t.Error("an error predicting a position is not returned")
	}
}

const smallConfig = "../../../models/qwen27b/testdata/small.json"

// perfJSON runs tcc perf with args and --format json and decodes the
// output into v.
func perfJSON(t *testing.T, v any, args ...string) {
	t.Helper()
	out, err := runCLI(t, append(append([]string{"perf", "qwen27b", "--config", smallConfig, "--mesh", "1x2"}, args...), "--format", "json")...)
	if err != nil {
		t.Fatalf("tcc perf %v: %v\n%s", args, err, out)
	}
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("tcc perf %v: %v\n%s", args, err, out)
	}
}

// TestPerfPromptIsTheSumOfItsSteps: a 100-token prompt in steps of 32 on
// the small config predicts the steps tcc run runs (32 tokens at 0, 32,
// 64; 4 at 96) through two builds, every one simulated, and its total is
// the sum of tcc perf's single-step predictions at those positions.
func TestPerfPromptIsTheSumOfItsSteps(t *testing.T) {
	longtest.Skip(t, "a 100-token prompt's four simulated steps (~2 CPU-s; TestPerfSeqIsTheWholePrompt predicts whole prompts by default)")
	var pp promptPerf
	perfJSON(t, &pp, "--mode", "prefill", "--max-seq", "128", "--prompt-tokens", "100", "--prefill-chunk", "32")
	type seg struct{ Pos, Last, Tokens int }
	var got []seg
	sum := 0.0
	for _, s := range pp.Segments {
		got = append(got, seg{s.Position, s.LastPosition, s.Tokens})
		if !s.Simulated || len(s.DeviceStepUS) != 2 {
			t.Errorf("step %d: simulated %v, %d device times", s.Index, s.Simulated, len(s.DeviceStepUS))
		}
		var one struct {
			StepUS   float64 `json:"step_us"`
			Position int     `json:"position"`
		}
		perfJSON(t, &one, "--mode", "prefill", "--max-seq", "128", "--seq", strconv.Itoa(s.Tokens), "--position", strconv.Itoa(s.Position))
		if one.Position != s.Position || one.StepUS != s.StepUS {
			t.Errorf("step %d: %.3f us at position %d; tcc perf --seq %d --position %d predicts %.3f us", s.Index, s.StepUS, s.Position, s.Tokens, s.Position, one.StepUS)
		}
		sum += one.StepUS
	}
	if diff := cmp.Diff([]seg{{0, 31, 32}, {32, 63, 32}, {64, 95, 32}, {96, 99, 4}}, got); diff != "" {
		t.Errorf("steps (-want +got):\n%s", diff)
	}
	if math.Abs(pp.TotalUS-sum) > 1e-6*sum || sum == 0 {
		t.Errorf("total %.3f us, the single steps sum to %.3f", pp.TotalUS, sum)
	}
	if want := 100 / (sum / 1e6); math.Abs(pp.TokensPerSecond-want) > 0.01 {
		t.Errorf("tokens_per_second %.3f, want %.3f", pp.TokensPerSecond, want)
	}
	type build struct {
		Seq, Steps int
		Simulated  []int
	}
	var builds []build
	for _, b := range pp.Builds {
		builds = append(builds, build{b.Seq, b.Steps, b.SimulatedPositions})
		if b.ProgramsPerDevice == 0 || b.Memory == nil || b.Memory.KV == 0 {
			t.Errorf("build %d: %d programs, memory %+v", b.Seq, b.ProgramsPerDevice, b.Memory)
		}
	}
	if diff := cmp.Diff([]build{{32, 3, []int{0, 32, 64}}, {4, 1, []int{96}}}, builds); diff != "" {
		t.Errorf("builds (-want +got):\n%s", diff)
	}
	if pp.Model != "qwen27b" || pp.Mesh != "1x2" || pp.Mode != "prefill" || pp.Batch != 1 || pp.MaxSeq != 128 || pp.PromptTokens != 100 ||
		pp.PrefillChunk != 32 || pp.SimulatedSteps != 4 || pp.InterpolatedSteps != 0 {
		t.Errorf("header fields %+v", pp)
	}
}

// TestPerfPromptJSONFields: --format json of --prompt-tokens carries the
// fields tcc perf --help documents, by those names.
func TestPerfPromptJSONFields(t *testing.T) {
	var doc map[string]any
	perfJSON(t, &doc, "--mode", "prefill", "--max-seq", "64", "--prompt-tokens", "40", "--prefill-chunk", "32")
	help, err := runCLI(t, "perf", "--help")
	if err != nil {
		t.Fatal(err)
	}
	help = strings.Join(strings.Fields(help), " ")
	fields := map[string][]string{
		"": {"model", "mesh", "stage", "batch", "mode", "max_seq", "prompt_tokens", "prefill_chunk", "total_us", "tokens_per_second",
			"time_to_first_token_us", "compute_floor_us", "compute_ratio", "floor_us", "floor_ratio", "fast_forwarded", "simulated_steps", "interpolated_steps", "builds", "segments"},
		"builds":   {"seq", "steps", "programs_per_device", "simulated_positions", "memory"},
		"segments": {"index", "position", "last_position", "tokens", "step_us", "device_step_us", "simulated", "compute_floor_us", "floor_us"},
	}
	for list, names := range fields {
		obj := doc
		if list != "" {
			obj = doc[list].([]any)[0].(map[string]any)
		}
		var missing []string
		for _, n := range names {
			if _, ok := obj[n]; !ok {
				missing = append(missing, n)
			}
			if !strings.Contains(help, n) {
				t.Errorf("tcc perf --help does not name %q", n)
			}
		}
		if len(missing) > 0 || len(obj) != len(names) {
			t.Errorf("%q: %d fields, missing %v; want exactly %v", list, len(obj), missing, names)
		}
	}
}

// TestPerfPromptInterpolation: a prompt of 4096 tokens in steps of 32 on
// the small config, simulated at 5 positions (0, 1024, 2048, 3040, 4064),
// predicts the step at 1536 (interpolated) within 3% of what the
// attention adds between position 0 and there, as tcc perf at --position
// 1536 simulates it; taking the step at 0 for it would be 100% off. (The
// flash prefill attention's cost is linear in the position past its
// first few cache chunks; below them the step is flatter, so the test
// position sits between simulated ones past 1024.)
func TestPerfPromptInterpolation(t *testing.T) {
	longtest.Skip(t, "a 4,096-token prompt's interpolation on the small config (~1.5 CPU-s)")
	var pp promptPerf
	perfJSON(t, &pp, "--mode", "prefill", "--max-seq", "4096", "--prompt-tokens", "4096", "--prefill-chunk", "32", "--simulate-positions", "5")
	if diff := cmp.Diff([]int{0, 1024, 2048, 3040, 4064}, pp.Builds[0].SimulatedPositions); diff != "" {
		t.Fatalf("simulated positions (-want +got):\n%s", diff)
	}
	at := pp.Segments[48]
	if at.Position != 1536 || at.Simulated {
		t.Fatalf("step 48: position %d, simulated %v", at.Position, at.Simulated)
	}
	var direct struct {
		StepUS float64 `json:"step_us"`
	}
	perfJSON(t, &direct, "--mode", "prefill", "--max-seq", "4096", "--seq", "32", "--position", "1536")
	grow := direct.StepUS - pp.Segments[0].StepUS
	t.Logf("step at 0: %.3f us; at 1536 interpolated %.3f, simulated %.3f; last %.3f", pp.Segments[0].StepUS, at.StepUS, direct.StepUS, pp.Segments[127].StepUS)
	if grow <= 0 || math.Abs(at.StepUS-direct.StepUS) > 0.03*grow {
		t.Errorf("step at 1536 interpolated %.3f us, simulated %.3f (%.3f us above the step at 0): off by more than 3%% of that", at.StepUS, direct.StepUS, grow)
	}
	if pp.InterpolatedSteps != 123 || pp.SimulatedSteps != 5 {
		t.Errorf("%d steps interpolated, %d simulated; want 123 and 5", pp.InterpolatedSteps, pp.SimulatedSteps)
	}
	out, err := runCLI(t, "perf", "qwen27b", "--config", smallConfig, "--mesh", "1x2", "--mode", "prefill", "--max-seq", "4096", "--prompt-tokens", "4096",
		"--prefill-chunk", "32", "--simulate-positions", "3")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "interpolated between 3 simulated positions") {
		t.Errorf("the table does not say the steps are interpolated:\n%s", out)
	}
}

// TestPerfPromptFlags: flags that do not go with --prompt-tokens, and a
// prompt longer than the KV cache, are refused with errors naming the
// flags.
func TestPerfPromptFlags(t *testing.T) {
	base := []string{"perf", "qwen27b", "--config", smallConfig, "--mesh", "1x2", "--mode", "prefill", "--max-seq", "128"}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"past max-seq", []string{"--prompt-tokens", "129"}, "--prompt-tokens 129 needs positions 0..128, but the KV cache holds positions 0..127 (--max-seq 128); give --max-seq 160"},
		{"zero tokens", []string{"--prompt-tokens", "0"}, "--prompt-tokens 0"},
		{"zero chunk", []string{"--prompt-tokens", "64", "--prefill-chunk", "0"}, "--prefill-chunk 0"},
		{"one position", []string{"--prompt-tokens", "64", "--simulate-positions", "1"}, "--simulate-positions 1"},
		{"seq", []string{"--prompt-tokens", "64", "--seq", "32"}, "drop --seq"},
		{"position", []string{"--prompt-tokens", "64", "--position", "3"}, "drop --position"},
		{"csv", []string{"--prompt-tokens", "64", "--format", "csv"}, "--format csv"},
		{"threads", []string{"--prompt-tokens", "64", "--threads", "matmul"}, "--threads"},
		{"decode", []string{"--prompt-tokens", "64", "--mode", "decode"}, "--mode prefill (not decode)"},
		{"chunk with position", []string{"--prefill-chunk", "32", "--position", "0"}, "--prefill-chunk goes with a whole prompt"},
		{"seq zero", []string{"--seq", "0"}, "--seq 0: a prompt has at least one token"},
		{"seq past max-seq", []string{"--seq", "200"}, "--seq 200 must be in 1..--max-seq 128"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := runCLI(t, append(append([]string{}, base...), tc.args...)...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want one containing %q\n%s", err, tc.want, out)
			}
		})
	}
	if _, err := runCLI(t, "perf", "tiny-mlp", "--prompt-tokens", "8"); err == nil || !strings.Contains(err.Error(), "no prefill step") {
		t.Errorf("tiny-mlp --prompt-tokens 8: %v", err)
	}
}

// TestChunkCandidates: --prefill-chunk auto tries the powers of two from a
// tile up to the first that takes the prompt in one step, at most 4096.
func TestChunkCandidates(t *testing.T) {
	tests := []struct {
		n    int
		want []int
	}{
		{1, []int{32}},
		{32, []int{32}},
		{100, []int{32, 64, 128}},
		{128, []int{32, 64, 128}},
		{100000, []int{32, 64, 128, 256, 512, 1024, 2048, 4096}},
	}
	for _, tc := range tests {
		t.Run(strconv.Itoa(tc.n), func(t *testing.T) {
			if diff := cmp.Diff(tc.want, chunkCandidates(tc.n)); diff != "" {
				t.Errorf("chunkCandidates(%d) (-want +got):\n%s", tc.n, diff)
			}
		})
	}
}

// TestPerfPromptAutoChunk: --prefill-chunk auto predicts the prompt at
// each candidate chunk and reports the fastest, whose prediction is the
// one --prefill-chunk C gives for it; every candidate's total is the
// prediction at its chunk.
func TestPerfPromptAutoChunk(t *testing.T) {
	longtest.Skip(t, "every candidate chunk predicted (~3 CPU-s)")
	var auto promptPerf
	perfJSON(t, &auto, "--mode", "prefill", "--max-seq", "128", "--prompt-tokens", "100", "--prefill-chunk", "auto", "--simulate-positions", "2")
	var got []int
	best := 0
	for i, c := range auto.ChunkCandidates {
		got = append(got, c.Chunk)
		if !c.Fits || c.TotalUS <= 0 {
			t.Errorf("candidate %d: %+v", c.Chunk, c)
		}
		if c.TotalUS < auto.ChunkCandidates[best].TotalUS {
			best = i
		}
	}
	if diff := cmp.Diff([]int{32, 64, 128}, got); diff != "" {
		t.Fatalf("candidates (-want +got):\n%s", diff)
	}
	if auto.PrefillChunk != auto.ChunkCandidates[best].Chunk || auto.TotalUS != auto.ChunkCandidates[best].TotalUS {
		t.Errorf("chose chunk %d (%.3f us), the fastest candidate is %+v", auto.PrefillChunk, auto.TotalUS, auto.ChunkCandidates[best])
	}
	for _, c := range auto.ChunkCandidates {
		var one promptPerf
		perfJSON(t, &one, "--mode", "prefill", "--max-seq", "128", "--prompt-tokens", "100", "--prefill-chunk", strconv.Itoa(c.Chunk), "--simulate-positions", "2")
		if one.TotalUS != c.TotalUS || len(one.ChunkCandidates) != 0 {
			t.Errorf("chunk %d: auto listed %.3f us, --prefill-chunk %d predicts %.3f us", c.Chunk, c.TotalUS, c.Chunk, one.TotalUS)
		}
	}
	if _, err := runCLI(t, "perf", "qwen27b", "--config", smallConfig, "--mesh", "1x2", "--prompt-tokens", "10", "--prefill-chunk", "big"); err == nil || !strings.Contains(err.Error(), "token count or auto") {
		t.Errorf("--prefill-chunk big: %v", err)
	}
}

// TestPerfSeqIsTheWholePrompt: tcc perf --mode prefill --seq N predicts
// the whole prompt of N tokens (issue 31, item 7): with --prefill-chunk
// 32 it is --prompt-tokens 100 --prefill-chunk 32 at --max-seq 128 (the
// default --max-seq: 100 rounded up to whole tiles); without
// --prefill-chunk the steps take up to 2,048 tokens (here one step of 100);
// with --position it is the single step at that position. Each step's
// DRAM floor is the single-step report's at its position.
func TestPerfSeqIsTheWholePrompt(t *testing.T) {
	var seq, prompt promptPerf
	perfJSON(t, &seq, "--mode", "prefill", "--seq", "100", "--prefill-chunk", "32", "--simulate-positions", "2")
	perfJSON(t, &prompt, "--mode", "prefill", "--max-seq", "128", "--prompt-tokens", "100", "--prefill-chunk", "32", "--simulate-positions", "2")
	if diff := cmp.Diff(prompt, seq); diff != "" {
		t.Errorf("--seq 100 --prefill-chunk 32 is not --prompt-tokens 100 --prefill-chunk 32 --max-seq 128 (-want +got):\n%s", diff)
	}
	if seq.MaxSeq != 128 || seq.PromptTokens != 100 || len(seq.Segments) != 4 || seq.FloorUS <= 0 || seq.FloorRatio <= 1 {
		t.Errorf("max_seq %d, prompt_tokens %d, %d steps, floor %.3f us (ratio %.3f); want 128, 100, 4 and a floor below the time",
			seq.MaxSeq, seq.PromptTokens, len(seq.Segments), seq.FloorUS, seq.FloorRatio)
	}
	// The single steps at the full steps' positions (0, 32, 64); the last
	// is also the single step --position 64 checked below.
	type single struct {
		FloorUS      float64 `json:"floor_us"`
		StepUS       float64 `json:"step_us"`
		Position     int     `json:"position"`
		PromptTokens *int    `json:"prompt_tokens"`
	}
	var one single
	for _, s := range seq.Segments[:3] {
		one = single{}
		perfJSON(t, &one, "--mode", "prefill", "--max-seq", "128", "--seq", "32", "--position", strconv.Itoa(s.Position))
		if one.FloorUS != s.FloorUS {
			t.Errorf("step %d at %d: DRAM floor %.3f us; the single step's is %.3f us", s.Index, s.Position, s.FloorUS, one.FloorUS)
		}
	}
	var def promptPerf
	perfJSON(t, &def, "--mode", "prefill", "--seq", "100")
	if def.PrefillChunk != 4096 || len(def.Segments) != 1 || def.Segments[0].Tokens != 100 || def.MaxSeq != 128 {
		t.Errorf("--seq 100: chunk %d, %d steps, max_seq %d; want 4096, one step of 100 tokens, 128", def.PrefillChunk, len(def.Segments), def.MaxSeq)
	}
	if one.PromptTokens != nil || one.Position != 64 || one.StepUS != prompt.Segments[2].StepUS {
		t.Errorf("--seq 32 --position 64: position %d, %.3f us, prompt_tokens %v; want the single step at 64 (%.3f us)", one.Position, one.StepUS, one.PromptTokens, prompt.Segments[2].StepUS)
	}
}
