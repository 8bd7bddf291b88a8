package codegen_test

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"sort"
	"testing"

	"github.com/tcc-dev/tcc/codegen"
	"github.com/tcc-dev/tcc/codegen/hostcfg"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir/longtest"
)

// TestLowerMemoChangesNoFile: the lowering memo (Compile lowers each
// distinct op once and renames copies for the others) gives, file for
// file, byte for byte, the build of lowering every op: qwen27b at 1x2 in
// decode, at batch 8, in a 256-token prefill step, and the small config
// (decode and prefill). A key that missed something a lowering reads
// would give some layer another layer's program.
func TestLowerMemoChangesNoFile(t *testing.T) {
	small := filepath.Join("..", "models", "qwen27b", "testdata", "small.json")
	tests := []struct {
		name  string
		flags map[string]string
		long  bool
	}{
		{"small decode", map[string]string{"config": small}, false},
		{"small prefill", map[string]string{"config": small, "mode": "prefill", "seq": "64"}, false},
		{"decode", nil, true},
		{"batch 8", map[string]string{"batch": "8"}, true},
		{"prefill 256", map[string]string{"mode": "prefill", "seq": "256", "max-seq": "16384"}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.long {
				longtest.Skip(t, "two full 27B builds (~10 CPU-s)")
			}
			files := func(memo bool) map[string][]byte {
				defer codegen.SetLowerMemo(memo)()
				g := qwenGraph(t, tc.flags, mesh1x2)
				b, err := codegen.Compile(g, target.Blackhole())
				if err != nil {
					t.Fatal(err)
				}
				fs, err := b.Files()
				if err != nil {
					t.Fatal(err)
				}
				return fs
			}
			want, got := files(false), files(true)
			diffFiles(t, want, got)
		})
	}
}

// diffFiles reports every file of want missing from got or different in
// it, and every file of got that want lacks.
func diffFiles(t *testing.T, want, got map[string][]byte) {
	t.Helper()
	names := make([]string, 0, len(want))
	for n := range want {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		g, ok := got[n]
		switch {
		case !ok:
			t.Errorf("file %s: missing with the memo", n)
		case !bytes.Equal(want[n], g):
			i := 0
			for i < len(g) && i < len(want[n]) && g[i] == want[n][i] {
				i++
			}
			lo := max(0, i-200)
			t.Errorf("file %s differs at byte %d:\nwant ...%s\ngot  ...%s", n, i, want[n][lo:min(len(want[n]), i+200)], g[lo:min(len(g), i+200)])
		}
	}
	for n := range got {
		if _, ok := want[n]; !ok {
			t.Errorf("file %s: only with the memo", n)
		}
	}
}

// TestProgramsJSONIsMarshal: every program config Files writes into
// programs.json (hostcfg.AppendJSON) is json.Marshal's encoding of it, for
// the small qwen27b config at 1x2 (ethernet collectives, sharded and
// blocked buffers) in decode and prefill.
func TestProgramsJSONIsMarshal(t *testing.T) {
	small := filepath.Join("..", "models", "qwen27b", "testdata", "small.json")
	for _, flags := range []map[string]string{{"config": small}, {"config": small, "mode": "prefill", "seq": "64"}} {
		name := flags["mode"]
		if name == "" {
			name = "decode"
		}
		t.Run(name, func(t *testing.T) {
			b, err := codegen.Compile(qwenGraph(t, flags, mesh1x2), target.Blackhole())
			if err != nil {
				t.Fatal(err)
			}
			cfgs, err := b.Configs()
			if err != nil {
				t.Fatal(err)
			}
			for _, cfg := range cfgs {
				want, err := json.Marshal(cfg)
				if err != nil {
					t.Fatal(err)
				}
				got, err := hostcfg.AppendJSON(nil, cfg)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(want, got) {
					t.Errorf("program %s: AppendJSON differs from json.Marshal:\nwant %s\ngot  %s", cfg.Program, want, got)
				}
			}
		})
	}
}
