package cli

import (
	"os"
	"os/exec"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTTSimTinyMLP runs tiny-mlp on Tenstorrent's chip model when a
// developer has one: TCC_TTSIM names libttsim.so (built from
// github.com/tenstorrent/ttsim) and TT_METAL_HOME a tt-metal source tree
// (TCC_JIT_SFPI_INCLUDE and TCC_RISCV_GCC as for tcc run). Every program,
// those running tcc's own SFPU code included (the default --sfpu tcc,
// which stock GCC builds), must match the simulator bit for bit on every
// launch, none skipped or failed: the rms_norm programs also need the
// JIT's ttsim.h (ttsim refuses the DBG_FEATURE_DISABLE write of their
// unpack to DEST) and sum their rows by matmul against a ones column,
// which keeps the sums in the fp32 DEST (reduce_tile would keep 16 bits
// of them per tile, which the simulator models but the norms avoid).
func TestTTSimTinyMLP(t *testing.T) {
	lib, home := os.Getenv("TCC_TTSIM"), os.Getenv("TT_METAL_HOME")
	if lib == "" || home == "" {
		t.Skip("set TCC_TTSIM=/path/to/libttsim_bh.so and TT_METAL_HOME=/path/to/tt-metal to run tiny-mlp on ttsim")
	}
	// Two seeds: before the norms summed by matmul their reduce_tile sums
	// differed from the simulator's in different programs. ttsim
	// initialises once per process: each seed runs in a process of its own (this test binary
	// again, TCC_TTSIM_SEED naming the seed).
	if seed := os.Getenv("TCC_TTSIM_SEED"); seed != "" {
		ttsimTinyMLP(t, lib, seed)
		return
	}
	for _, seed := range []string{"1", "2"} {
		t.Run("seed "+seed, func(t *testing.T) {
			c := exec.Command(os.Args[0], "-test.run", "^TestTTSimTinyMLP$", "-test.count=1")
			c.Env = append(os.Environ(), "TCC_TTSIM_SEED="+seed)
			out, err := c.CombinedOutput()
			require.NoError(t, err, "seed %s:\n%s", seed, out)
		})
	}
}

// ttsimTinyMLP runs tiny-mlp at seed on ttsim (library lib) and wants
// every launch matched.
func ttsimTinyMLP(t *testing.T, lib, seed string) {
	out, err := runCLI(t, "run", "tiny-mlp", "--backend", "ttsim", "--ttsim", lib, "--check", "--seed", seed)
	require.NoError(t, err, "tcc run --backend ttsim:\n%s", out)
	status := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^chip: program \d+ (\S+): (\w+)`).FindAllStringSubmatch(out, -1) {
		status[m[1]] = m[2]
	}
	require.Len(t, status, 9, "programs reported:\n%s", out)
	for p, s := range status {
		if s != "matched" {
			t.Errorf("program %s: %s, want matched", p, s)
		}
	}
	counts := regexp.MustCompile(`(?m)^chip: \d+ launches.*$`).FindString(out)
	require.Equal(t, "chip: 9 launches: 9 matched the simulator bit for bit on the elements they define, 0 differed, 0 failed, 0 skipped", counts, "output:\n%s", out)
}
