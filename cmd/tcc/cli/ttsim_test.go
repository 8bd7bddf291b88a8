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
// which stock GCC builds), must run on every launch, none skipped or
// failed (the rms_norm programs need the JIT's ttsim.h: ttsim refuses the
// DBG_FEATURE_DISABLE write of their unpack to DEST), and match the
// simulator bit for bit, except the programs whose row reduction the
// simulator does not model yet (knownRowReduceDiffs).
func TestTTSimTinyMLP(t *testing.T) {
	lib, home := os.Getenv("TCC_TTSIM"), os.Getenv("TT_METAL_HOME")
	if lib == "" || home == "" {
		t.Skip("set TCC_TTSIM=/path/to/libttsim_bh.so and TT_METAL_HOME=/path/to/tt-metal to run tiny-mlp on ttsim")
	}
	// Two seeds: their row sums differ from ttsim's in different programs.
	// ttsim initialises once per process: each seed runs in a process of
	// its own (this test binary again, TCC_TTSIM_SEED naming the seed).
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
	if err != nil { // exit 2 when a launch differed; the counts below say which
		require.ErrorContains(t, err, "chip launches differed", "tcc run --backend ttsim:\n%s", out)
	}
	status := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^chip: program \d+ (\S+): (\w+)`).FindAllStringSubmatch(out, -1) {
		status[m[1]] = m[2]
	}
	require.Len(t, status, 9, "programs reported:\n%s", out)
	differed := 0
	for p, s := range status {
		switch {
		case s == "matched":
		case s == "differs" && knownRowReduceDiffs.MatchString(p):
			differed++
		default:
			t.Errorf("program %s: %s, want matched", p, s)
		}
	}
	counts := regexp.MustCompile(`(?m)^chip: \d+ launches.*$`).FindString(out)
	require.Regexp(t, `^chip: 9 launches: \d matched the simulator bit for bit on the elements they define, \d differed, 0 failed, 0 skipped$`, counts, "output:\n%s", out)
	t.Logf("seed %s: %d programs differ in their row reductions (known)", seed, differed)
}

// knownRowReduceDiffs names the programs that differ from ttsim today:
// their row reduction (reduce_tile<SUM, REDUCE_ROW>) keeps the running
// sum's upper 16 bits after every tile on the chip (tt-llk moves the row
// through SrcB, which holds the bf16 scaler's format) and pools each
// face as GAPOOL does; the simulator adds in float32. Modelling it
// (branch h-T1) needs the norms to add their squares in fp32 before one
// reduction first, or the fused and unfused graphs disagree (issue 33).
var knownRowReduceDiffs = regexp.MustCompile(`norm`)
