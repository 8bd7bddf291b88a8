package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestPerfPositions: --positions with one user far along costs more, and
// streams more of the KV caches, than every user at the short position;
// the JSON carries each user's position, position the largest (on the
// small config: the full model takes ~8 CPU-s for the same check).
func TestPerfPositions(t *testing.T) {
	type report struct {
		StepUS    float64 `json:"step_us"`
		FloorB    int64   `json:"floor_bytes"`
		Position  int     `json:"position"`
		Positions []int   `json:"positions"`
	}
	perf := func(positions string) report {
		t.Helper()
		out, err := runCLI(t, "perf", "qwen27b", "--config", "../../../models/qwen27b/testdata/small.json", "--mesh", "1x2", "--batch", "3", "--max-seq", "4096", "--positions", positions, "--format", "json")
		if err != nil {
			t.Fatalf("perf --positions %s: %v\n%s", positions, err, out)
		}
		var r report
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	short, long := perf("5,5,5"), perf("5,4000,5")
	if diff := cmp.Diff([]int{5, 4000, 5}, long.Positions); diff != "" || long.Position != 4000 {
		t.Errorf("positions (-want +got):\n%s; position %d, want 4000", diff, long.Position)
	}
	if long.StepUS <= short.StepUS || long.FloorB <= short.FloorB {
		t.Errorf("one user at 4000: %.1f us, %d floor bytes; all at 5: %.1f us, %d bytes; want more", long.StepUS, long.FloorB, short.StepUS, short.FloorB)
	}
	t.Logf("all at 5: %.1f us; one at 4000: %.1f us", short.StepUS, long.StepUS)
}

// TestPerfPositionsErrors: bad --positions are refused, saying why.
func TestPerfPositionsErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"count", []string{"--batch", "3", "--positions", "1,2"}, "2 positions for 3 users"},
		{"past", []string{"--batch", "2", "--positions", "1,128"}, "user 1 at position 128 is past the KV cache"},
		{"negative", []string{"--batch", "2", "--positions", "1,-3"}, "is not a position"},
		{"junk", []string{"--batch", "2", "--positions", "1,x"}, "is not a position"},
		{"both", []string{"--batch", "2", "--positions", "1,2", "--position", "3"}, "give one"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"perf", "qwen27b", "--mesh", "1x2", "--max-seq", "128"}, tc.args...)
			out, err := runCLI(t, args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err %v, want one containing %q\n%s", err, tc.want, out)
			}
		})
	}
}
