package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tcc-dev/tcc/ir/longtest"
	"github.com/tcc-dev/tcc/models"
	"github.com/tcc-dev/tcc/models/checkpoint"
	"github.com/tcc-dev/tcc/models/qwen27b"
	"github.com/tcc-dev/tcc/models/safetensors"
)

const smallCfg = "../../../models/qwen27b/testdata/small.json"

// synth writes the small qwen27b config's random weights as a 2-shard
// checkpoint of form into a temporary directory, with the synthetic
// tokenizer.
func synth(t *testing.T, form checkpoint.Form) string {
	t.Helper()
	return synthFor(t, smallCfg, form)
}

// synthTokenizer is a small Qwen-style tokenizer (its ids fit the small
// configs' vocab of 2048) and its tokenizer_config.json.
const synthTokenizer = "../../../models/tokenizer/testdata/qwen-synth"

// synthFor writes the random weights of qwen27b with model config cfgPath
// as a 2-shard checkpoint of form, with the synthetic tokenizer's
// tokenizer.json and tokenizer_config.json.
func synthFor(t *testing.T, cfgPath string, form checkpoint.Form) string {
	t.Helper()
	m := qwen27b.Model{}
	args, err := models.DefaultArgs(m, map[string]string{"config": cfgPath})
	if err != nil {
		t.Fatal(err)
	}
	hf, err := checkpoint.RandomHF(m, args, 11)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), string(form))
	if err := checkpoint.WriteSynthetic(dir, cfg, form, hf, 2); err != nil {
		t.Fatal(err)
	}
	if err := copyTokenizer(synthTokenizer, dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

var pccRe = regexp.MustCompile(`same formats PCC ([0-9.]+)`)

// TestWeightsNVFP4EndToEnd: inspect, convert at mesh 1x2, run --check on
// the cache; the NVFP4 cache equals the cache of its dequantised weights
// written as a float32 checkpoint, so the two runs are the same run.
func TestWeightsNVFP4EndToEnd(t *testing.T) {
	longtest.Skip(t, "an NVFP4 checkpoint converted and run end to end (~25 CPU-s)")
	dir := synth(t, checkpoint.FormNVFP4)
	out, err := runCLI(t, "weights", "inspect", dir)
	if err != nil {
		t.Fatalf("inspect: %v\n%s", err, out)
	}
	for _, want := range []string{"quantization: compressed-tensors nvfp4-pack-quantized, group size 16", "mlp.up_proj.weight_packed", "U8", "in 2 files"} {
		if !strings.Contains(out, want) {
			t.Errorf("inspect output lacks %q:\n%.3000s", want, out)
		}
	}
	cache := filepath.Join(t.TempDir(), "cache")
	out, err = runCLI(t, "weights", "convert", "--from", dir, "--mesh", "1x2", "-o", cache)
	if err != nil {
		t.Fatalf("convert: %v\n%s", err, out)
	}
	if !strings.Contains(out, "converted 109/109") || !strings.Contains(out, "B/s") || !strings.Contains(out, "skipping 32 checkpoint tensors") {
		t.Errorf("convert progress lines missing:\n%.2000s", out)
	}
	out, err = runCLI(t, "weights", "convert", "--from", dir, "--mesh", "1x2", "-o", cache)
	if err != nil || !strings.Contains(out, "up to date") {
		t.Errorf("second convert: %v, want up to date:\n%s", err, out)
	}
	for _, f := range []string{"tokenizer.json", "tokenizer_config.json"} {
		a, _ := os.ReadFile(filepath.Join(dir, f))
		if b, err := os.ReadFile(filepath.Join(cache, f)); err != nil || len(a) == 0 || string(a) != string(b) {
			t.Errorf("the cache's %s is not the checkpoint's: %v", f, err)
		}
	}
	out, err = runCLI(t, "run", "qwen27b", "--config", smallCfg, "--mesh", "1x2", "--weights", cache, "--check", "--steps", "2")
	if err != nil {
		t.Fatalf("run --weights --check: %v\n%s", err, out)
	}
	t.Logf("%s", out)
	if !strings.Contains(out, "check passed") {
		t.Errorf("run did not pass its check:\n%s", out)
	}
	// Dequantise every weight to float32 and convert that checkpoint: the
	// cache must be byte-identical.
	src, err := checkpoint.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, n := range src.Ckpt.Names() {
		for _, suf := range []string{".weight_packed", ".weight_scale", ".weight_global_scale", ".input_global_scale"} {
			if b, ok := strings.CutSuffix(n, suf); ok {
				n = b + ".weight"
			}
		}
		names[n] = true
	}
	src.Close()
	deq := filepath.Join(t.TempDir(), "deq")
	os.MkdirAll(deq, 0o755)
	args := []string{"weights", "dequant", dir}
	for n := range names {
		args = append(args, n)
	}
	args = append(args, "-o", filepath.Join(deq, "model.safetensors"))
	if out, err := runCLI(t, args...); err != nil {
		t.Fatalf("dequant: %v\n%s", err, out)
	}
	f, err := safetensors.Open(filepath.Join(deq, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Header.Tensors) != len(names) || f.Header.Tensors[0].DType != safetensors.F32 {
		t.Errorf("dequantised file: %d tensors of %s, want %d F32", len(f.Header.Tensors), f.Header.Tensors[0].DType, len(names))
	}
	f.Close()
	cache2 := filepath.Join(t.TempDir(), "cache2")
	if out, err := runCLI(t, "weights", "convert", "--from", deq, "--config", smallCfg, "--mesh", "1x2", "-o", cache2); err != nil {
		t.Fatalf("convert dequantised: %v\n%s", err, out)
	}
	for _, d := range []string{"device-0.bin", "device-1.bin"} {
		a, _ := os.ReadFile(filepath.Join(cache, d))
		b, _ := os.ReadFile(filepath.Join(cache2, d))
		if len(a) == 0 || string(a) != string(b) {
			t.Errorf("%s: NVFP4 cache (%d bytes) and dequantised-float32 cache (%d bytes) differ", d, len(a), len(b))
		}
	}
	out2, err := runCLI(t, "run", "qwen27b", "--config", smallCfg, "--mesh", "1x2", "--weights", deq, "--check", "--steps", "2")
	if err != nil {
		t.Fatalf("run on the dequantised checkpoint: %v\n%s", err, out2)
	}
	if a, b := pccRe.FindAllString(out, -1), pccRe.FindAllString(out2, -1); len(a) == 0 || strings.Join(a, ",") != strings.Join(b, ",") {
		t.Errorf("NVFP4 run PCCs %v differ from the dequantised run's %v", a, b)
	}
	// A cache made for another build is refused.
	if out, err := runCLI(t, "run", "qwen27b", "--config", smallCfg, "--mesh", "1x2", "--dtype-policy", "accurate", "--weights", cache); err == nil || !strings.Contains(err.Error(), "convert it again") {
		t.Errorf("run with a cache of another policy: %v\n%s", err, out)
	}
}

func TestWeightsFormsRunCheck(t *testing.T) {
	longtest.Skip(t, "bf16 and FP8 checkpoints run end to end (~15 CPU-s)")
	for _, form := range []checkpoint.Form{checkpoint.FormBF16, checkpoint.FormFP8} {
		t.Run(string(form), func(t *testing.T) {
			dir := synth(t, form)
			out, err := runCLI(t, "run", "qwen27b", "--config", smallCfg, "--mesh", "1x2", "--weights", dir, "--check")
			if err != nil || !strings.Contains(out, "check passed") {
				t.Fatalf("run --weights %s --check: %v\n%s", form, err, out)
			}
		})
	}
}

// TestWeightsAccuratePolicy: a cache converted with --dtype-policy
// accurate (bfp8_b MLP gate/up) runs and passes --check with the same
// policy.
func TestWeightsAccuratePolicy(t *testing.T) {
	longtest.Skip(t, "an FP8 checkpoint converted and run at the accurate policy (~6 CPU-s)")
	dir := synth(t, checkpoint.FormFP8)
	cache := filepath.Join(t.TempDir(), "cache")
	if out, err := runCLI(t, "weights", "convert", "--from", dir, "--mesh", "1x2", "--dtype-policy", "accurate", "-o", cache); err != nil {
		t.Fatalf("convert: %v\n%s", err, out)
	}
	c, err := checkpoint.LoadCache(cache)
	if err != nil {
		t.Fatal(err)
	}
	gateUp := 0
	for _, e := range c.Manifest.Tensors {
		if strings.Contains(e.Buffer, "gate_proj") || strings.Contains(e.Buffer, "up_proj") {
			gateUp++
			if e.DType != "bfp8_b" {
				t.Errorf("%s is %s under the accurate policy, want bfp8_b", e.Buffer, e.DType)
			}
		}
	}
	if gateUp == 0 {
		t.Error("no gate/up buffers in the cache")
	}
	out, err := runCLI(t, "run", "qwen27b", "--config", smallCfg, "--mesh", "1x2", "--dtype-policy", "accurate", "--weights", cache, "--check")
	if err != nil || !strings.Contains(out, "check passed") {
		t.Fatalf("run: %v\n%s", err, out)
	}
}

func TestWeightsErrors(t *testing.T) {
	dir := synth(t, checkpoint.FormNVFP4)
	huge := filepath.Join(t.TempDir(), "huge")
	os.MkdirAll(huge, 0o755)
	hdr := make([]byte, 16)
	hdr[0], hdr[1], hdr[2], hdr[3] = 0, 0, 0x40, 0x06 // 100 MiB header length
	os.WriteFile(filepath.Join(huge, "model.safetensors"), hdr, 0o644)
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"missing tensor", []string{"weights", "dequant", dir, "nope.weight", "-o", filepath.Join(t.TempDir(), "x.safetensors")}, `missing tensor "nope.weight"`},
		{"no output", []string{"weights", "dequant", dir, "lm_head.weight"}, "-o FILE.safetensors is required"},
		{"100 MB header", []string{"weights", "inspect", huge}, "exceeds the limit"},
		{"convert 100 MB header", []string{"weights", "convert", "--from", huge, "--config", smallCfg, "-o", filepath.Join(t.TempDir(), "c")}, "exceeds the limit"},
		{"wrong mesh", []string{"weights", "convert", "--from", dir, "--mesh", "1x3", "-o", filepath.Join(t.TempDir(), "c")}, "1x3"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, err := runCLI(t, tt.args...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want an error containing %q\n%s", err, tt.want, out)
			}
		})
	}
}

// TestProgressBarWidth: on a terminal the bar takes what the text leaves
// of the terminal's width (10..60 columns), so the line never wraps; a
// writer that is not a terminal is detected as such.
func TestProgressBarWidth(t *testing.T) {
	for _, cols := range []int{50, 80, 200} {
		var b strings.Builder
		p := &progress{w: &b, tty: true, width: cols, start: time.Now().Add(-time.Second)}
		p.report(checkpoint.Progress{Buffer: "w", TensorsDone: 3, Tensors: 4, BytesDone: 3e6, Bytes: 4e6})
		line := strings.TrimSuffix(strings.TrimPrefix(b.String(), "\r"), "\x1b[K")
		bar := line[1:strings.Index(line, "]")]
		if len(line) > max(cols, 10+len(line)-len(bar)) || len(bar) < 10 || len(bar) > 60 {
			t.Errorf("width %d: line of %d columns, bar of %d: %q", cols, len(line), len(bar), line)
		}
	}
	if tty, _ := terminal(&strings.Builder{}); tty {
		t.Error("a strings.Builder is not a terminal")
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if tty, width := terminal(w); tty || width != 0 {
		t.Errorf("a pipe: terminal %v, width %d", tty, width)
	}
}

func TestProgressRendering(t *testing.T) {
	for _, tt := range []struct {
		name string
		tty  bool
		want []string
	}{
		{"terminal", true, []string{"\r[", "3/4 tensors", "MiB/s", "ETA"}},
		{"plain", false, []string{"converted 3/4 w (", "MiB/s", "ETA", "\n"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var b strings.Builder
			p := &progress{w: &b, tty: tt.tty, start: time.Now().Add(-time.Second)}
			p.report(checkpoint.Progress{Buffer: "w", TensorsDone: 3, Tensors: 4, BytesDone: 3e6, Bytes: 4e6})
			p.done()
			for _, w := range tt.want {
				if !strings.Contains(b.String(), w) {
					t.Errorf("output %q lacks %q", b.String(), w)
				}
			}
			if tt.tty == strings.HasPrefix(b.String(), "converted") {
				t.Errorf("terminal %v rendered %q", tt.tty, b.String())
			}
		})
	}
}
