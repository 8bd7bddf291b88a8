package cli

import (
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/ir/longtest"
	"github.com/tcc-dev/tcc/models/checkpoint"
	"github.com/tcc-dev/tcc/models/qwen27b"
)

var (
	nextTokensRe = regexp.MustCompile(`(?m)^(decode \d+) +next tokens (\[.*\])$`)
	hostWroteRe  = regexp.MustCompile(`(?m)^(decode \d+) +host wrote (\d+) bytes$`)
)

// stepTokens runs tcc run with args and returns each decode step's next
// tokens line and, with --device-loop, the bytes the host wrote per step.
func stepTokens(t *testing.T, args ...string) (toks, wrote []string) {
	t.Helper()
	out, err := runCLI(t, append([]string{"run"}, args...)...)
	if err != nil {
		t.Fatalf("tcc run %v: %v\n%s", args, err, out)
	}
	for _, m := range nextTokensRe.FindAllStringSubmatch(out, -1) {
		toks = append(toks, m[1]+" "+m[2])
	}
	for _, m := range hostWroteRe.FindAllStringSubmatch(out, -1) {
		wrote = append(wrote, m[1]+" "+m[2])
	}
	return toks, wrote
}

// TestDeviceLoopMatchesHostDriven runs the small qwen27b config (1x1,
// after a 4-token prefill) for 8 decode steps with the host writing each
// step's tokens, positions and RoPE rows, and with --device-loop, where
// the host writes the tokens and position once and the device carries
// them: the tokens must be identical, and the host writes nothing after
// the first step. With the position's in-place update removed from the
// compiled graph (every step at the first position) the tokens must
// differ: the comparison sees a position that does not advance.
func TestDeviceLoopMatchesHostDriven(t *testing.T) {
	longtest.Skip(t, "three 8-step runs of the small config (~100 CPU-s)")
	base := []string{"qwen27b", "--config", "../../../models/qwen27b/testdata/small.json", "--max-seq", "32", "--prefill", "4", "--steps", "8"}
	host, none := stepTokens(t, base...)
	if len(host) != 8 || len(none) != 0 {
		t.Fatalf("host-driven run: %d steps of tokens, %d host-wrote lines; want 8 and 0:\n%v", len(host), len(none), host)
	}
	loop, wrote := stepTokens(t, append(base, "--device-loop")...)
	if diff := cmp.Diff(host, loop); diff != "" {
		t.Errorf("device-loop tokens differ from the host-driven run's (-host +device-loop):\n%s", diff)
	}
	wantWrote := []string{"decode 0 8"} // the token and the position, 4 bytes each
	for s := 1; s < 8; s++ {
		wantWrote = append(wantWrote, "decode "+string(rune('0'+s))+" 0")
	}
	if diff := cmp.Diff(wantWrote, wrote); diff != "" {
		t.Errorf("bytes the host wrote per step (-want +got):\n%s", diff)
	}

	afterPipeline = func(g *ir.Graph) {
		for s := range g.StateUpdates {
			if s.Name == qwen27b.LoopPos {
				delete(g.StateUpdates, s)
			}
		}
	}
	defer func() { afterPipeline = nil }()
	stuck, _ := stepTokens(t, append(base, "--device-loop")...)
	if cmp.Equal(host, stuck) {
		t.Errorf("with the position never advancing, the device loop still gives the host-driven tokens %v", stuck)
	}
}

// TestDeviceLoopFlag: --device-loop is a boolean model flag: alone it
// turns the loop on (the head gains the position's add_scalar), =false
// keeps the default graph, another value is refused.
func TestDeviceLoopFlag(t *testing.T) {
	cfg := "../../../models/qwen27b/testdata/small.json"
	tests := []struct {
		name    string
		flag    string
		want    string // in the output, "" for none
		wantErr string
	}{
		{"alone", "--device-loop", "add_scalar=1", ""},
		{"false", "--device-loop=false", "", ""},
		{"bad value", "--device-loop=maybe", "", "not true or false"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := runCLI(t, "report", "ops", "qwen27b", "--config", cfg, tt.flag)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			if has := strings.Contains(out, "add_scalar=1"); has != (tt.want != "") {
				t.Errorf("output has add_scalar=1: %t, want %t:\n%s", has, tt.want != "", out)
			}
		})
	}
}

// TestDeviceLoopWeights: with --weights from a checkpoint, which has no
// RoPE tables, --device-loop uploads the model's computed tables and
// gives the host-driven run's tokens.
func TestDeviceLoopWeights(t *testing.T) {
	longtest.Skip(t, "two 2-step runs of the small config on checkpoint weights (~30 CPU-s)")
	dir := synth(t, checkpoint.FormBF16)
	base := []string{"qwen27b", "--config", smallCfg, "--weights", dir, "--steps", "2"}
	host, _ := stepTokens(t, base...)
	loop, wrote := stepTokens(t, append(base, "--device-loop")...)
	if len(host) != 2 {
		t.Fatalf("host-driven run: %d steps of tokens, want 2", len(host))
	}
	if diff := cmp.Diff(host, loop); diff != "" {
		t.Errorf("device-loop tokens differ from the host-driven run's (-host +device-loop):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"decode 0 8", "decode 1 0"}, wrote); diff != "" {
		t.Errorf("bytes the host wrote per step (-want +got):\n%s", diff)
	}
}
