package cli

import (
	"strings"
	"testing"
)

// TestPersistentFlags: tcc run --persistent runs tiny-mlp as one program
// per step and passes --check saying programs are not checked one by one;
// with --device-loop it runs all steps in one launch and checks each
// step's tokens;
// tcc perf --persistent predicts it as one launch; tcc build --persistent
// is refused naming what is missing.
func TestPersistentFlags(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want []string
		err  string
	}{
		{"run", []string{"run", "tiny-mlp", "--steps", "2", "--check", "--persistent"},
			[]string{"one persistent program of", "programs: not checked one by one", "check passed"}, ""},
		{"run device loop", []string{"run", "tiny-mlp", "--steps", "3", "--check", "--persistent", "--device-loop"},
			[]string{"looping over 3 steps, launched once", "launches: 1 (3 steps)", "decode 2  next tokens", "tokens ok (free-running same formats reference)", "check passed: one launch"}, ""},
		{"perf", []string{"perf", "tiny-mlp", "--persistent"},
			[]string{"ONE persistent program per device of", "of which launch gaps 1.6 us"}, ""},
		{"build", []string{"build", "tiny-mlp", "--persistent", "-o", "out-never-written"}, nil, "cannot print persistent programs yet"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := runCLI(t, tc.args...)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("tcc %s: error %v, want one containing %q", strings.Join(tc.args, " "), err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("tcc %s: %v\n%s", strings.Join(tc.args, " "), err, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("tcc %s: output lacks %q:\n%s", strings.Join(tc.args, " "), w, out)
				}
			}
		})
	}
}
