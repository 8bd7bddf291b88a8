package cli

import (
	"os"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTTSimTinyMLP runs tiny-mlp on Tenstorrent's chip model when a
// developer has one: TCC_TTSIM names libttsim.so (built from
// github.com/tenstorrent/ttsim) and TT_METAL_HOME a tt-metal source tree
// (TCC_JIT_SFPI_INCLUDE and TCC_RISCV_GCC as for tcc run). Every program
// the JIT can build must match the simulator bit for bit; with the stock
// compiler that is embedding, both matmul_add programs and argmax, and the
// SFPU programs are skipped with a reason.
func TestTTSimTinyMLP(t *testing.T) {
	lib, home := os.Getenv("TCC_TTSIM"), os.Getenv("TT_METAL_HOME")
	if lib == "" || home == "" {
		t.Skip("set TCC_TTSIM=/path/to/libttsim_bh.so and TT_METAL_HOME=/path/to/tt-metal to run tiny-mlp on ttsim")
	}
	out, err := runCLI(t, "run", "tiny-mlp", "--backend", "ttsim", "--ttsim", lib, "--check")
	require.NoError(t, err, "tcc run --backend ttsim:\n%s", out)
	status := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^chip: program \d+ (\S+): (\w+)`).FindAllStringSubmatch(out, -1) {
		status[m[1]] = m[2]
	}
	require.Len(t, status, 9, "programs reported:\n%s", out)
	for p, s := range status {
		if s != "matched" && s != "skipped" {
			t.Errorf("program %s: %s", p, s)
		}
	}
	for _, p := range []string{"embedding_12", "matmul_add_18", "matmul_add_24", "argmax_28"} {
		if status[p] != "matched" {
			t.Errorf("program %s: %q, want matched (it needs no SFPU)", p, status[p])
		}
	}
	t.Log(regexp.MustCompile(`(?m)^chip: \d+ launches.*$`).FindString(out))
}
