package jit

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tcc-dev/tcc/codegen/hostcfg"
	"github.com/tcc-dev/tcc/codegen/kir"
)

// TestPersistentRealBuild builds every merged kernel of tiny-mlp's
// persistent program (`tcc build tiny-mlp --persistent --device-loop`: the
// printed kernels with kernels/tcc_persist.h and tcc_sfpu.h) for all five
// processors with a real toolchain, and checks that each core's images,
// back to back as the host writes them (kir.TextBuffer: each rounded up
// to 16 bytes), fit the persist.text page programs.json declares. Env as
// TestRealBuild; TCC_JIT_PERSIST_BUILD names a build directory to use
// instead of running tcc build.
func TestPersistentRealBuild(t *testing.T) {
	env, log := realEnv(t, "the real persistent kernel build")
	bdir := os.Getenv("TCC_JIT_PERSIST_BUILD")
	if bdir == "" {
		bdir = t.TempDir()
		c := exec.Command("go", "run", "./cmd/tcc", "build", "tiny-mlp", "--persistent", "--device-loop", "-o", bdir)
		c.Dir = "../../.."
		out, err := c.CombinedOutput()
		require.NoError(t, err, "tcc build:\n%s", out)
	}
	b, err := os.ReadFile(filepath.Join(bdir, "programs.json"))
	require.NoError(t, err)
	var doc struct {
		Programs []hostcfg.ProgramConfig `json:"programs"`
	}
	require.NoError(t, json.Unmarshal(b, &doc))
	require.Len(t, doc.Programs, 1, "one persistent program per device")
	p := &doc.Programs[0]
	require.NotNil(t, p.Persistent, "program %s has no persistent section", p.Program)
	text := -1
	for _, buf := range p.Buffers {
		if buf.Name == kir.TextBuffer {
			text = buf.PageSize
		}
	}
	require.Positive(t, text, "no %s buffer", kir.TextBuffer)

	// Per core, the images the host writes to persist.text.
	type coreImages struct {
		bytes int
		procs [NumProcessors]int
	}
	perCore := map[hostcfg.CoreRange]*coreImages{}
	built := [NumProcessors]bool{}
	for i := range p.Kernels {
		k := &p.Kernels[i]
		t0 := time.Now()
		imgs, err := BuildKernel(env, bdir, p, k)
		if err != nil {
			t.Errorf("kernel %s (%s): %v\nlog:\n%s", k.Name, k.Processor, err, tail(log.String(), 20))
			continue
		}
		var sizes []int
		for proc, img := range imgs {
			if img == nil {
				continue
			}
			built[proc] = true
			sizes = append(sizes, len(img))
			for _, r := range k.Cores {
				for x := r.X0; x <= r.X1; x++ {
					for y := r.Y0; y <= r.Y1; y++ {
						c := hostcfg.CoreRange{X0: x, Y0: y, X1: x, Y1: y}
						ci := perCore[c]
						if ci == nil {
							ci = &coreImages{}
							perCore[c] = ci
						}
						ci.procs[proc] = len(img)
						ci.bytes += (len(img) + 15) &^ 15
					}
				}
			}
		}
		t.Logf("kernel %s (%s, %s): images %v bytes (%v)", k.Name, k.Processor, k.Source, sizes, time.Since(t0).Round(time.Millisecond))
	}
	for proc, ok := range built {
		if !ok {
			t.Errorf("no merged kernel image was built for %s", ProcessorName(proc))
		}
	}
	most := 0
	for c, ci := range perCore {
		most = max(most, ci.bytes)
		if ci.bytes > text {
			t.Errorf("core (%d,%d): images %v take %d bytes, more than the %d of %s", c.X0, c.Y0, ci.procs, ci.bytes, text, kir.TextBuffer)
		}
	}
	t.Logf("largest core's images: %d bytes of the %d-byte %s page", most, text, kir.TextBuffer)
}
