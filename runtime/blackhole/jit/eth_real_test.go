package jit

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestRealEthFirmware builds the active-erisc firmware with a real
// toolchain (TT_METAL_HOME) and checks that it places the runtime-arg
// globals where ttsim's bh_x2 sets them (CheckEthFirmware, run by the
// build).
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
}
