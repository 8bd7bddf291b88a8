package cli

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/runtime"
	"github.com/tcc-dev/tcc/runtime/blackhole"
	"github.com/tcc-dev/tcc/runtime/blackhole/jit"
)

// openMesh opens the run's backend: the simulator, or chips (ttsim, a
// card) with the JIT of the tt-metal tree TT_METAL_HOME names: one for a
// 1x1 mesh (--chip), mesh device d on chip d for 1xN (ttsim's bh_x2).
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
	env := &jit.Env{Toolchain: tc, TTMetalHome: home, SFPIInclude: os.Getenv("TCC_JIT_SFPI_INCLUDE"), TTSim: true}
	// ttsim ends the process on a fatal error: the line before it names
	// the program it was running.
	before := func(r runtime.ProgramResult) {
		dev := ""
		if mesh.Devices() > 1 {
			dev = fmt.Sprintf(", device %d (chip %d)", r.Device, r.Device)
		}
		fmt.Fprintf(os.Stderr, "tcc: chip: program %d %s, launch %d%s\n", r.Index, r.Program, r.Launch, dev)
	}
	return runtime.OpenChip(rf.backend, mesh, runtime.ChipOptions{TTSim: rf.ttsim, Chip: rf.chip, Builder: blackhole.JITBuilder{Env: env}, BeforeLaunch: before, Timeout: rf.chipTimeout})
}

// useTopology cables the opened mesh as --topology.
func useTopology(m *runtime.Mesh, mf *modelFlags) error {
	tp, err := target.LookupTopology(mf.topology)
	if err != nil {
		return fmt.Errorf("--topology: %w", err)
	}
	return m.UseTopology(tp)
}

// reportChip prints, per program, what the chip did over all its launches
// (every step's), with the first launch of the most severe outcome; it
// returns the number of launches that differed from the simulator or
// failed.
func reportChip(w io.Writer, rs []runtime.ProgramResult) int {
	if len(rs) == 0 {
		return 0
	}
	type key struct {
		index   int
		program string
	}
	var order []key
	byProgram := map[key][]runtime.ProgramResult{}
	counts := map[string]int{}
	for _, r := range rs {
		k := key{r.Index, r.Program}
		if byProgram[k] == nil {
			order = append(order, k)
		}
		byProgram[k] = append(byProgram[k], r)
		counts[r.Status]++
	}
	for _, k := range order {
		fmt.Fprintln(w, programLine(k.index, k.program, byProgram[k]))
	}
	fmt.Fprintf(w, "chip: %d launches: %d matched the simulator bit for bit on the elements they define, %d differed, %d failed, %d skipped\n",
		len(rs), counts["matched"], counts["differs"], counts["failed"], counts["skipped"])
	return counts["differs"] + counts["failed"]
}

// chipStatuses are the launch outcomes, most severe first.
var chipStatuses = []string{"failed", "differs", "matched", "skipped"}

// programLine summarizes one program's launches: the most severe outcome,
// how many launches had each, and the first launch with that outcome.
func programLine(index int, program string, rs []runtime.ProgramResult) string {
	n := map[string]int{}
	for _, r := range rs {
		n[r.Status]++
	}
	var parts []string
	status := ""
	for _, s := range chipStatuses {
		if n[s] == 0 {
			continue
		}
		if status == "" {
			status = s
		}
		parts = append(parts, fmt.Sprintf("%d %s", n[s], s))
	}
	var first runtime.ProgramResult
	for _, r := range rs {
		if r.Status == status {
			first = r
			break
		}
	}
	return fmt.Sprintf("chip: program %d %s: %s (%s of %d launches; launch %d: %s)", index, program, status, strings.Join(parts, ", "), len(rs), first.Launch, first.Detail)
}
