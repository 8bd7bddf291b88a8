package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/tcc-dev/tcc/codegen"
	"github.com/tcc-dev/tcc/codegen/cpp"
	"github.com/tcc-dev/tcc/codegen/schema"
	"github.com/tcc-dev/tcc/ir/longtest"
)

// TestPersistentFlags: tcc run --persistent runs tiny-mlp as one program
// per step and passes --check saying programs are not checked one by one;
// with --device-loop it runs all steps in one launch and checks each
// step's tokens;
// tcc perf --persistent predicts it as one launch; tcc build --persistent
// prints it (TestBuildPersistent).
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

// TestBuildPersistent: tcc build tiny-mlp --persistent writes the merged
// kernels and a programs.json holding one program per device with its
// persistent section (every phase, the control block and tables layout),
// valid against the committed schema, every kernel source present; with
// TCC_LONG=1 a second build is byte-identical (codegen/cpp's
// TestPersistentDeterministic checks the printing in every run).
func TestBuildPersistent(t *testing.T) {
	dirs := []string{filepath.Join(t.TempDir(), "a")}
	if longtest.Enabled() {
		dirs = append(dirs, filepath.Join(t.TempDir(), "b"))
	}
	for _, dir := range dirs {
		out, err := runCLI(t, "build", "tiny-mlp", "--persistent", "-o", dir)
		require.NoError(t, err, out)
		for _, want := range []string{"ONE persistent program per device of 9 phases", "persistent BRISC: largest merged kernel", "distinct bodies", "persistent images: "} {
			if !strings.Contains(out, want) {
				t.Errorf("output lacks %q:\n%s", want, out)
			}
		}
	}
	// The phase machinery every merged kernel includes, written once.
	hdr, err := os.ReadFile(filepath.Join(dirs[0], "kernels", cpp.PersistHeaderName))
	require.NoError(t, err, "the build did not write kernels/%s", cpp.PersistHeaderName)
	if string(hdr) != cpp.PersistHeader() {
		t.Errorf("kernels/%s is not codegen/cpp's PersistHeader", cpp.PersistHeaderName)
	}
	data, err := os.ReadFile(filepath.Join(dirs[0], "programs.json"))
	require.NoError(t, err)
	if err := schema.Validate("programs.json", data); err != nil {
		t.Errorf("programs.json: %v", err)
	}
	var pf codegen.ProgramsFile
	require.NoError(t, json.Unmarshal(data, &pf))
	require.Len(t, pf.Programs, 1)
	pc := pf.Programs[0].ProgramConfig
	require.NotNil(t, pc.Persistent, "programs.json has no persistent section")
	if got := len(pc.Persistent.Phases); got != 9 {
		t.Errorf("%d phases in the persistent section, want 9", got)
	}
	if pc.Persistent.Tables.Buffer != "persist.tables" || pc.Persistent.Control.Buffer != "persist.ctl" {
		t.Errorf("tables %q, control %q", pc.Persistent.Tables.Buffer, pc.Persistent.Control.Buffer)
	}
	for _, k := range pc.Kernels {
		src, err := os.ReadFile(filepath.Join(dirs[0], k.Source))
		require.NoError(t, err, "kernel %s", k.Name)
		if !strings.Contains(string(src), "tcc_phase_begin(") || !strings.Contains(string(src), "kernel:  "+k.Name+" ") {
			t.Errorf("%s (%s) is not kernel %s's merged source", k.Source, k.Name, k.Name)
		}
		// Every header a kernel includes from its own directory is written
		// beside it (tcc's SFPU code: kernels/tcc_sfpu.h).
		for _, line := range strings.Split(string(src), "\n") {
			if inc, ok := strings.CutPrefix(line, "#include \""); ok {
				hdr := filepath.Join(filepath.Dir(filepath.Join(dirs[0], k.Source)), strings.TrimSuffix(inc, "\""))
				if _, err := os.Stat(hdr); err != nil && strings.HasPrefix(inc, "tcc_") {
					t.Errorf("%s includes %s, which the build did not write: %v", k.Source, inc, err)
				}
			}
		}
	}
	read := func(dir string) map[string]string {
		m := map[string]string{}
		require.NoError(t, filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := os.ReadFile(p)
			rel, _ := filepath.Rel(dir, p)
			m[rel] = string(b)
			return err
		}))
		return m
	}
	if len(dirs) < 2 {
		return
	}
	if diff := cmp.Diff(read(dirs[0]), read(dirs[1])); diff != "" {
		t.Errorf("two persistent builds differ (-first +second):\n%.2000s", diff)
	}
}
