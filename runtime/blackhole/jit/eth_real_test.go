package jit

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tcc-dev/tcc/codegen/cpp"
	"github.com/tcc-dev/tcc/codegen/cpp/samples"
	"github.com/tcc-dev/tcc/codegen/hostcfg"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/runtime/blackhole/firmware"
)

// TestRealEthFirmware builds the active-erisc firmware of both ERISCs
// with a real toolchain (TT_METAL_HOME) and checks that ERISC0's places
// the runtime-arg globals where ttsim's bh_x2 sets them (CheckEthFirmware,
// run by the build) and that each ERISC's segments fit the places the
// runtime's firmware load writes them (firmware.EthPlacement).
func TestRealEthFirmware(t *testing.T) {
	env, log := realEnv(t, "the real active-erisc firmware build")
	t0 := time.Now()
	dir, err := EthFirmware(env)
	if err != nil {
		t.Fatalf("%v\nlog:\n%s", err, log)
	}
	t.Logf("ethernet firmware %s (%v)", dir, time.Since(t0))
	b, err := os.ReadFile(filepath.Join(dir, ethProc.name, ethProc.name+".elf"))
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckEthFirmware(b); err != nil {
		t.Error(err)
	}
	set, err := firmware.ReadEthSet(dir)
	if err != nil {
		t.Fatal(err)
	}
	for i, im := range set {
		segs, err := firmware.EthPlacement(im, i, target.BlackholeLayout(), target.BlackholeActiveEth())
		if err != nil {
			t.Error(err)
		}
		for _, s := range segs {
			t.Logf("ERISC%d %s: %d B at %#x", i, firmware.EthNames[i], len(s.Data), s.Addr)
		}
	}
}

// TestRealEthKernel builds the ethernet kernels of samples.EthLink (a
// sender using eth_send_bytes + eth_wait_for_receiver_done, a receiver
// using eth_wait_for_bytes + eth_receiver_done) with a real toolchain
// into ERISC0 images.
func TestRealEthKernel(t *testing.T) {
	env, log := realEnv(t, "the real ethernet kernel build")
	p := samples.EthLink()
	cfg, err := hostcfg.Config(p, target.Blackhole())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	built := 0
	for _, k := range p.Kernels {
		if !k.OnEth() {
			continue
		}
		src, err := cpp.PrintKernel(p, k)
		if err != nil {
			t.Fatal(err)
		}
		kc := cfg.Kernel(k.Name)
		if kc == nil || kc.Ethernet == nil {
			t.Fatalf("kernel %s: no ethernet config", k.Name)
		}
		path := filepath.Join(dir, kc.Source)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, src, 0o644); err != nil {
			t.Fatal(err)
		}
		t0 := time.Now()
		imgs, err := BuildKernel(env, dir, cfg, kc)
		if err != nil {
			t.Fatalf("%v\nlog:\n%s", err, tail(log.String(), 3))
		}
		if len(imgs[EthImage]) == 0 {
			t.Fatalf("kernel %s: empty ERISC0 image", k.Name)
		}
		for i, img := range imgs {
			if i != EthImage && img != nil {
				t.Errorf("kernel %s: image for processor %d", k.Name, i)
			}
		}
		t.Logf("kernel %s: %d B ERISC0 image (%v)", k.Name, len(imgs[EthImage]), time.Since(t0))
		built++
	}
	if built != 2 {
		t.Errorf("built %d ethernet kernels, want 2 (sender and receiver)", built)
	}
}
