package cli

import (
	"fmt"
	"io"
	"os"

	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/runtime"
	"github.com/tcc-dev/tcc/runtime/blackhole"
	"github.com/tcc-dev/tcc/runtime/blackhole/jit"
)

// openMesh opens the run's backend: the simulator, or a chip (ttsim, a
// card) with the JIT of the tt-metal tree TT_METAL_HOME names.
func openMesh(rf runFlags, mesh ir.Mesh) (*runtime.Mesh, error) {
	if rf.backend != "ttsim" {
		return runtime.Open(rf.backend, mesh)
	}
	home := os.Getenv("TT_METAL_HOME")
	if err := jit.CheckTTMetalHome(home); err != nil {
		return nil, fmt.Errorf("--backend ttsim builds firmware and kernels from tt-metal's sources: %w", err)
	}
	tc, err := jit.FindToolchain(jit.ToolchainOptions{TTMetalHome: home, StockGCC: os.Getenv("TCC_RISCV_GCC")})
	if err != nil {
		return nil, err
	}
	env := &jit.Env{Toolchain: tc, TTMetalHome: home, SFPIInclude: os.Getenv("TCC_JIT_SFPI_INCLUDE")}
	return runtime.OpenChip(rf.backend, mesh, runtime.ChipOptions{TTSim: rf.ttsim, Builder: blackhole.JITBuilder{Env: env}})
}

// reportChip prints, per program, what the chip did; it returns the
// number of programs that differed from the simulator or failed.
func reportChip(w io.Writer, m *runtime.Mesh) int {
	rs := m.ChipResults()
	if len(rs) == 0 {
		return 0
	}
	bad, seen := 0, map[string]bool{}
	counts := map[string]int{}
	for _, r := range rs {
		counts[r.Status]++
		if r.Status == "differs" || r.Status == "failed" {
			bad++
		}
		if seen[r.Program] {
			continue
		}
		seen[r.Program] = true
		fmt.Fprintf(w, "chip: program %d %s: %s (%s)\n", r.Index, r.Program, r.Status, r.Detail)
	}
	fmt.Fprintf(w, "chip: %d launches: %d matched the simulator bit for bit, %d differed, %d failed, %d skipped\n", len(rs), counts["matched"], counts["differs"], counts["failed"], counts["skipped"])
	return bad
}
