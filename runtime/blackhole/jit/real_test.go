package jit

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/tcc-dev/tcc/codegen/hostcfg"
)

// TestRealBuild builds firmware and a data-movement kernel of a real tcc
// build with a real toolchain. Env: TT_METAL_HOME, optional
// TCC_JIT_BUILD (a `tcc build tiny-mlp` output; built with go run when
// unset), TCC_JIT_SFPI_INCLUDE, TCC_JIT_PROTO_IMAGE (the prototype's image
// for embedding_12's reader, compared byte for byte).
func TestRealBuild(t *testing.T) {
	env, log := realEnv(t, "the real firmware/kernel build")
	tc := env.Toolchain
	t0 := time.Now()
	fw, err := Firmware(env)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("firmware %s (%s, %v)", fw, tc.Kind, time.Since(t0))
	bdir := os.Getenv("TCC_JIT_BUILD")
	if bdir == "" {
		bdir = t.TempDir()
		c := exec.Command("go", "run", "./cmd/tcc", "build", "tiny-mlp", "-o", bdir)
		c.Dir = "../../.."
		if out, err := c.CombinedOutput(); err != nil {
			t.Fatalf("tcc build: %v\n%s", err, out)
		}
	}
	b, err := os.ReadFile(filepath.Join(bdir, "programs.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Programs []hostcfg.ProgramConfig `json:"programs"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	var p *hostcfg.ProgramConfig
	for i := range doc.Programs {
		if doc.Programs[i].Program == "embedding_12" {
			p = &doc.Programs[i]
		}
	}
	if p == nil {
		t.Fatal("no program embedding_12 in tiny-mlp")
	}
	k := &p.Kernels[0]
	t0 = time.Now()
	imgs, err := BuildKernel(env, bdir, p, k)
	if err != nil {
		t.Fatalf("%v\nlog:\n%s", err, tail(log.String(), 5))
	}
	t.Logf("kernel %s/%s on %s built in %v", p.Program, k.Name, k.Processor, time.Since(t0))
	img := imgs[NCRISC]
	if len(img) == 0 {
		t.Fatalf("empty NCRISC image: %v", imgs)
	}
	elfs, _ := filepath.Glob(filepath.Join(env.CacheDir, "kernels", "*", "ncrisc.elf"))
	for _, ep := range elfs {
		eb, _ := os.ReadFile(ep)
		e, err := parseELF(eb)
		if err != nil {
			t.Fatal(err)
		}
		if text := eb[e.loads[0].Off : e.loads[0].Off+e.loads[0].Filesz]; hasCompressed(text) {
			t.Errorf("%s: compressed instruction in text", ep)
		}
	}
	if proto := os.Getenv("TCC_JIT_PROTO_IMAGE"); proto != "" {
		want, err := os.ReadFile(proto)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(img, want) {
			t.Errorf("image (%d bytes) differs from the prototype's %s (%d bytes)", len(img), proto, len(want))
		} else {
			t.Logf("image equals the prototype's (%d bytes)", len(img))
		}
	}
	// second build comes from the cache
	t0 = time.Now()
	again, err := BuildKernel(env, bdir, p, k)
	if err != nil || !bytes.Equal(again[NCRISC], img) {
		t.Fatalf("cached rebuild: %v", err)
	}
	t.Logf("cached rebuild %v", time.Since(t0))

	// Compute kernels: with stock GCC (GCC 12 included, through the
	// include shim) an FPU-only kernel (matmul_add: matmul and add_tiles)
	// and one running tcc's own SFPU code (rms_norm: square, rsqrt, the
	// scalar and binary ops, raw Tensix instructions; tiny-mlp's build
	// default, --sfpu tcc) must both build from the unmodified tree.
	for _, program := range []string{"rms_norm_14", "matmul_add_18"} {
		for i := range doc.Programs {
			p := &doc.Programs[i]
			for j := range p.Kernels {
				if k := &p.Kernels[j]; k.Compute != nil && p.Program == program {
					imgs, err := BuildKernel(env, bdir, p, k)
					if err != nil {
						t.Errorf("compute %s/%s: %v\nlog:\n%s", p.Program, k.Name, err, tail(log.String(), 5))
						continue
					}
					t.Logf("compute %s/%s: images %d/%d/%d bytes", p.Program, k.Name, len(imgs[TRISC0]), len(imgs[TRISC1]), len(imgs[TRISC2]))
				}
			}
		}
	}
}

// realEnv is the JIT environment of the tests that build with a real
// toolchain: TT_METAL_HOME (the test is skipped, naming what, when it is
// unset or the stock GCC is not on PATH), TCC_JIT_SFPI_INCLUDE and
// TCC_JIT_CACHE (a temporary directory when unset); the build log is
// written to the returned buffer.
func realEnv(t *testing.T, what string) (*Env, *bytes.Buffer) {
	t.Helper()
	tt := os.Getenv("TT_METAL_HOME")
	if tt == "" {
		t.Skipf("TT_METAL_HOME not set: skipping %s", what)
	}
	if _, err := exec.LookPath(DefaultStockGCC); err != nil {
		t.Skipf("%s not on PATH: skipping %s", DefaultStockGCC, what)
	}
	tc, err := FindToolchain(ToolchainOptions{TTMetalHome: tt})
	if err != nil {
		t.Fatal(err)
	}
	cache := os.Getenv("TCC_JIT_CACHE")
	if cache == "" {
		cache = t.TempDir()
	}
	log := &bytes.Buffer{}
	return &Env{Toolchain: tc, TTMetalHome: tt, SFPIInclude: os.Getenv("TCC_JIT_SFPI_INCLUDE"), CacheDir: cache, Log: log}, log
}
