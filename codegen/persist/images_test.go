package persist_test

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tcc-dev/tcc/codegen"
	"github.com/tcc-dev/tcc/codegen/cpp"
	"github.com/tcc-dev/tcc/codegen/persist"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/ir/longtest"
	"github.com/tcc-dev/tcc/models"
	"github.com/tcc-dev/tcc/models/qwen27b"
	"github.com/tcc-dev/tcc/models/tinymlp"
	"github.com/tcc-dev/tcc/passes"
)

// measuredImages reads testdata/images.tsv: per model and merged kernel,
// the images the JIT built (bytes per binary).
func measuredImages(t *testing.T) map[string]map[string][]int {
	t.Helper()
	f, err := os.Open("testdata/images.tsv")
	require.NoError(t, err)
	defer f.Close()
	out := map[string]map[string][]int{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") || line == "" {
			continue
		}
		cols := strings.Split(line, "\t")
		require.Len(t, cols, 3, "line %q", line)
		var bins []int
		for _, s := range strings.Fields(cols[2]) {
			n, err := strconv.Atoi(s)
			require.NoError(t, err)
			bins = append(bins, n)
		}
		if out[cols[0]] == nil {
			out[cols[0]] = map[string][]int{}
		}
		out[cols[0]][cols[1]] = bins
	}
	require.NoError(t, sc.Err())
	return out
}

// TestCodeEstimateCoversImages: the code estimate of every merged kernel
// of the persistent programs `tcc build MODEL --persistent --device-loop`
// prints (tiny-mlp; the small qwen27b config with TCC_LONG=1) is at least
// each of its images as the JIT built them (testdata/images.tsv), binary
// by binary, so the images buffer (kir.TextBuffer) sized from the
// estimates holds them.
func TestCodeEstimateCoversImages(t *testing.T) {
	measured := measuredImages(t)
	for _, tc := range []struct {
		model string
		m     models.Model
		flags map[string]string
		long  bool
	}{
		{"tiny-mlp", tinymlp.Model{}, map[string]string{"device-loop": "true"}, false},
		{"qwen27b-small", qwen27b.Model{}, map[string]string{"config": "../../models/qwen27b/testdata/small.json", "device-loop": "true"}, true},
	} {
		t.Run(tc.model, func(t *testing.T) {
			if tc.long {
				longtest.Skip(t, "the small qwen27b config's persistent program")
			}
			want := measured[tc.model]
			require.NotEmpty(t, want, "no measured images of %s", tc.model)
			args, err := models.DefaultArgs(tc.m, tc.flags)
			require.NoError(t, err)
			g, err := tc.m.Build(args, ir.Mesh{Rows: 1, Cols: 1})
			require.NoError(t, err)
			_, err = passes.Run(g, passes.Options{})
			require.NoError(t, err)
			b, err := codegen.Compile(g, target.Blackhole())
			require.NoError(t, err)
			p, _, err := persist.Build(b)
			require.NoError(t, err)
			require.NoError(t, persist.WithTables(p, b))
			require.Len(t, p.Kernels, len(want), "the program's merged kernels are not the measured ones")
			for _, k := range p.Kernels {
				real, ok := want[k.Name]
				require.True(t, ok, "kernel %s was not measured", k.Name)
				pc, err := cpp.EstimatePersistentKernel(p, k)
				require.NoError(t, err)
				require.Len(t, pc.Shared.Binaries, len(real), "kernel %s", k.Name)
				for i, n := range real {
					if est := pc.Shared.Binaries[i]; est < n {
						t.Errorf("kernel %s binary %d: estimated %d bytes, the JIT built %d", k.Name, i, est, n)
					}
				}
			}
		})
	}
}
