package cli

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
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
		if rf.chipDump != "" {
			return nil, fmt.Errorf("--chip-dump needs a chip (--backend ttsim); backend %s has none", rf.backend)
		}
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
		line := launchLine(r)
		if mesh.Devices() > 1 {
			line += fmt.Sprintf(", device %d (chip %d)", r.Device, r.Device)
		}
		fmt.Fprintln(os.Stderr, line)
	}
	o := runtime.ChipOptions{TTSim: rf.ttsim, Chip: rf.chip, Builder: blackhole.JITBuilder{Env: env}, BeforeLaunch: before, Timeout: rf.chipTimeout}
	if rf.chipDump != "" {
		if err := os.MkdirAll(rf.chipDump, 0o755); err != nil {
			return nil, fmt.Errorf("--chip-dump: %w", err)
		}
		o.Compared = dumpCompared(rf.chipDump, os.Stderr)
	}
	return runtime.OpenChip(rf.backend, mesh, o)
}

// launchLine is the line printed before each launch on the chip: ttsim
// ends the process on a fatal error, and this line, the last before its
// message, names the program and the launch it was running.
func launchLine(r runtime.ProgramResult) string {
	return fmt.Sprintf("tcc: chip: program %d %s, launch %d", r.Index, r.Program, r.Launch)
}

// dumpCompared returns a ChipOptions.Compared that writes, for a buffer
// that differs from the simulator on the elements it defines, its page
// bytes on the chip and in the simulator (dir/NAME.chip, dir/NAME.sim) and
// the differing elements (dir/NAME.txt, runtime.DefinedDiffs), NAME being
// p<index>-<program>-l<launch>-<buffer>. Write errors are reported on
// errw; the run goes on.
func dumpCompared(dir string, errw io.Writer) func(runtime.ProgramResult, runtime.Tensor, []byte, []byte) {
	return func(r runtime.ProgramResult, t runtime.Tensor, chip, sim []byte) {
		lines := runtime.DefinedDiffs(t, chip, sim)
		if len(lines) == 0 {
			return
		}
		name := fmt.Sprintf("p%d-%s-l%d-%s", r.Index, r.Program, r.Launch, strings.NewReplacer("/", "_", string(os.PathSeparator), "_").Replace(t.Name))
		head := fmt.Sprintf("# program %d %s launch %d: buffer %s %s %s %s, %d defined elements differ (index, chip, simulator)\n", r.Index, r.Program, r.Launch, t.Name, t.DType, t.Layout, t.Shape, len(lines))
		for ext, b := range map[string][]byte{".chip": chip, ".sim": sim, ".txt": []byte(head + strings.Join(lines, "\n") + "\n")} {
			if err := os.WriteFile(filepath.Join(dir, name+ext), b, 0o644); err != nil {
				fmt.Fprintf(errw, "tcc: --chip-dump: %v\n", err)
			}
		}
	}
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
