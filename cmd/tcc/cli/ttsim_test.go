package cli

import (
	"os"
	"os/exec"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tcc-dev/tcc/ir/longtest"
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

// TestTTSimX2Chip1 runs tiny-mlp on chip 1 of ttsim's two-chip library
// (bh_x2, a P300) when a developer has one: TCC_TTSIM_X2 names it (built
// from github.com/tenstorrent/ttsim's src/rules.py configuration bh_x2),
// TT_METAL_HOME as for TestTTSimTinyMLP. Both chips are opened, chip 1's
// BARs sit at 64 GiB, the links read from the ethernet cores are the
// P300's two, and every program must match the simulator on chip 1.
func TestTTSimX2Chip1(t *testing.T) {
	lib, home := os.Getenv("TCC_TTSIM_X2"), os.Getenv("TT_METAL_HOME")
	if lib == "" || home == "" {
		t.Skip("set TCC_TTSIM_X2=/path/to/bh_x2/libttsim.so and TT_METAL_HOME=/path/to/tt-metal to run tiny-mlp on chip 1 of ttsim's two-chip library")
	}
	out, err := runCLI(t, "devices", "--ttsim", lib)
	require.NoError(t, err, "tcc devices:\n%s", out)
	require.Regexp(t, `(?m)^\S+ chip 0\tttsim\tblackhole\t`, out)
	require.Regexp(t, `(?m)^\S+ chip 1\tttsim\tblackhole\t`, out)
	require.Contains(t, out, "ethernet links between the chips: chip 0 channel 2 <-> chip 1 channel 9, chip 0 channel 3 <-> chip 1 channel 8\n")
	c := exec.Command(os.Args[0], "-test.run", "^TestTTSimX2Chip1Run$", "-test.count=1")
	c.Env = append(os.Environ(), "TCC_TTSIM_X2_RUN=1")
	b, err := c.CombinedOutput()
	require.NoError(t, err, "tiny-mlp on chip 1:\n%s", b)
}

// TestTTSimX2Chip1Run is TestTTSimX2Chip1's run in a process of its own
// (ttsim initialises once per process).
func TestTTSimX2Chip1Run(t *testing.T) {
	if os.Getenv("TCC_TTSIM_X2_RUN") == "" {
		t.Skip("run by TestTTSimX2Chip1")
	}
	out, err := runCLI(t, "run", "tiny-mlp", "--backend", "ttsim", "--ttsim", os.Getenv("TCC_TTSIM_X2"), "--chip", "1", "--check")
	require.NoError(t, err, "tcc run --chip 1:\n%s", out)
	counts := regexp.MustCompile(`(?m)^chip: \d+ launches.*$`).FindString(out)
	require.Equal(t, "chip: 9 launches: 9 matched the simulator bit for bit on the elements they define, 0 differed, 0 failed, 0 skipped", counts, "output:\n%s", out)
}

// TestTTSimX2SmallQwen runs the small qwen27b config's decode step at
// 1x2 on ttsim's two-chip library (TCC_TTSIM_X2 as for TestTTSimX2Chip1,
// TT_METAL_HOME, and TCC_LONG=1: about 2.5 minutes with the kernels
// cached), planned on the P300's links: every launch on both chips, the
// 17 collectives per chip included (their worker and ethernet kernels
// run on both chips at once), must match the simulator bit for bit, and
// the run's --check must pass.
func TestTTSimX2SmallQwen(t *testing.T) {
	lib, home := os.Getenv("TCC_TTSIM_X2"), os.Getenv("TT_METAL_HOME")
	if lib == "" || home == "" {
		t.Skip("set TCC_TTSIM_X2=/path/to/bh_x2/libttsim.so and TT_METAL_HOME=/path/to/tt-metal to run the small qwen27b config on ttsim's two chips")
	}
	longtest.Skip(t, "the small qwen27b config at 1x2 on ttsim (minutes)")
	out, err := runCLI(t, "run", "qwen27b", "--config", "../../../models/qwen27b/testdata/small.json", "--mesh", "1x2", "--topology", "p300",
		"--backend", "ttsim", "--ttsim", lib, "--check")
	require.NoError(t, err, "tcc run --mesh 1x2 --backend ttsim:\n%s", out)
	counts := regexp.MustCompile(`(?m)^chip: \d+ launches.*$`).FindString(out)
	require.Equal(t, "chip: 136 launches: 136 matched the simulator bit for bit on the elements they define, 0 differed, 0 failed, 0 skipped", counts, "output:\n%s", out)
}

// TestTTSimSmallQwen runs the small qwen27b config at 1x1 on ttsim
// (TCC_TTSIM and TT_METAL_HOME as for TestTTSimTinyMLP, and TCC_LONG=1:
// each case takes several minutes with the kernels cached): the prefill
// of 8 tokens and 3 decode steps, at B = 1 and at --batch 4. Every launch
// of every step must match the simulator bit for bit on the elements it
// defines, none skipped or failed, and the run's --check must pass.
func TestTTSimSmallQwen(t *testing.T) {
	lib, home := os.Getenv("TCC_TTSIM"), os.Getenv("TT_METAL_HOME")
	if lib == "" || home == "" {
		t.Skip("set TCC_TTSIM=/path/to/libttsim_bh.so and TT_METAL_HOME=/path/to/tt-metal to run the small qwen27b config on ttsim")
	}
	longtest.Skip(t, "the small qwen27b config on ttsim (several minutes per batch size)")
	if batch := os.Getenv("TCC_TTSIM_BATCH"); batch != "" {
		out, err := runCLI(t, "run", "qwen27b", "--config", "../../../models/qwen27b/testdata/small.json", "--mesh", "1x1",
			"--prefill", "8", "--steps", "3", "--batch", batch, "--backend", "ttsim", "--ttsim", lib, "--check")
		require.NoError(t, err, "tcc run --backend ttsim --batch %s:\n%s", batch, out)
		m := regexp.MustCompile(`(?m)^chip: (\d+) launches: (\d+) matched the simulator bit for bit on the elements they define, 0 differed, 0 failed, 0 skipped$`).FindStringSubmatch(out)
		require.NotNil(t, m, "no all-matched chip line in:\n%s", out)
		require.Equal(t, m[1], m[2], "launches and matched launches")
		return
	}
	// ttsim initialises once per process: each batch size runs in a
	// process of its own (this test binary again, TCC_TTSIM_BATCH naming it).
	for _, batch := range []string{"1", "4"} {
		t.Run("batch "+batch, func(t *testing.T) {
			c := exec.Command(os.Args[0], "-test.run", "^TestTTSimSmallQwen$", "-test.count=1", "-test.timeout=60m")
			c.Env = append(os.Environ(), "TCC_TTSIM_BATCH="+batch)
			out, err := c.CombinedOutput()
			require.NoError(t, err, "batch %s:\n%s", batch, out)
		})
	}
}
