package cli

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"

	"github.com/tcc-dev/tcc/codegen"
	"github.com/tcc-dev/tcc/codegen/cpp"
	"github.com/tcc-dev/tcc/codegen/persist"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir/longtest"
)

// TestPersistentKernelsCompile runs the g++ syntax check on every merged
// kernel of the persistent programs of tiny-mlp and the qwen27b small
// config at 1x1 and 1x2 (with their early begins, persist.Build), as
// codegen/cpp prints them. All three build whole (tcc build --persistent):
// at 1x2 the ring all-reduce's bf16 adders, which run without fp32 DEST in
// their programs, run with it in the persistent program (persist's
// destmode.go), so every merged compute binary has one DEST mode and
// persist.MergeComputeConfigs accepts it.
func TestPersistentKernelsCompile(t *testing.T) {
	longtest.Skip(t, "the g++ syntax check of the persistent kernels of tiny-mlp and the qwen27b small config (~15 CPU-s)")
	small := "../../../models/qwen27b/testdata/small.json"
	cases := []struct {
		name, model string
		flags       []string
		computeErr  string
	}{
		{"tiny-mlp", "tiny-mlp", nil, ""},
		{"small 1x1", "qwen27b", []string{"--config", small}, ""},
		{"small 1x2", "qwen27b", []string{"--config", small, "--mesh", "1x2"}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cmd := &cobra.Command{Use: "test"}
			mf := addModelFlags(cmd, "fused")
			require.NoError(t, cmd.Flags().Parse(tc.flags))
			_, g, _, err := mf.graphFor(tc.model)
			require.NoError(t, err)
			b, err := codegen.Compile(g, target.Blackhole())
			require.NoError(t, err)
			p, _, err := persist.Build(b)
			require.NoError(t, err)
			require.NoError(t, persist.Prepare(p, b))
			err = persist.MergeComputeConfigs(p)
			switch {
			case tc.computeErr == "" && err != nil:
				t.Fatalf("MergeComputeConfigs: %v", err)
			case tc.computeErr != "" && (err == nil || !strings.Contains(err.Error(), tc.computeErr)):
				t.Errorf("MergeComputeConfigs: %v, want an error naming %s", err, tc.computeErr)
			}
			dir := t.TempDir()
			sources := map[string]cpp.Source{}
			for _, k := range p.Kernels {
				src, err := cpp.PrintKernel(p, k)
				require.NoError(t, err)
				f := filepath.Join(dir, k.Name+".cpp")
				require.NoError(t, os.WriteFile(f, src, 0o644))
				sources[f] = cpp.Source{Processor: k.Processor, Defines: k.Defines}
			}
			outputs, ok, err := cpp.SyntaxCheck(dir, sources)
			if errors.Is(err, cpp.ErrNoCompiler) {
				t.Skip("!!!!! g++ is not installed: SKIPPING the syntax check of the persistent kernels (CI installs it) !!!!!")
			}
			require.NoError(t, err)
			for d, out := range outputs {
				if !ok[d] || out != "" {
					t.Errorf("g++ %s:\n%.4000s", d, out)
				}
			}
			t.Logf("%d merged kernels (%d early begins) pass g++ -fsyntax-only", len(sources), len(p.Persist.Early))
		})
	}
}
