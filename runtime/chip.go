package runtime

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/tcc-dev/tcc/codegen"
	"github.com/tcc-dev/tcc/codegen/hostcfg"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/runtime/blackhole"
	"github.com/tcc-dev/tcc/sim/kexec"
)

// ChipOptions configure the ttsim and blackhole backends.
type ChipOptions struct {
	// TTSim is the libttsim.so of the ttsim backend.
	TTSim string
	// Builder compiles kernels and firmware (runtime/blackhole/jit).
	Builder blackhole.Builder
	// Fake, for tests, is the chip the "fake" backend opens.
	Fake blackhole.Options
	// Timeout, when not zero, bounds firmware init, each program and each
	// step of a persistent launch (the watchdog; blackhole.Options).
	Timeout time.Duration
	// BeforeLaunch, when set, is called before each launch on the chip
	// with what the launch's ProgramResult will say (Status empty): a
	// chip model that ends the process on a fatal error (ttsim) leaves it
	// as the last word about which program it was running.
	BeforeLaunch func(ProgramResult)
	// Compared, when set, is called after each launch for every buffer the
	// check compared, in the program's buffer order: the launch (Status
	// empty), the buffer's tensor and its page bytes on the chip and in
	// the simulator. A dump of both sides (tcc run --chip-dump); tests
	// read what the chip computed through it.
	Compared func(r ProgramResult, t Tensor, chip, sim []byte)
}

// ProgramResult is what happened to one program on the chip.
type ProgramResult struct {
	Index   int
	Program string
	// Launch counts the program's launches on its build, from 1.
	Launch int
	// Status is "matched", "differs", "skipped" or "failed".
	Status string
	// Detail is the skip reason, the first difference or the error.
	Detail string
}

// OpenChip opens mesh on backend "ttsim", "blackhole" or "fake": every
// program runs on the simulator, which holds the results, and also on the
// chip from the same inputs; ChipResults says per launch whether the chip
// matched the simulator bit for bit on the elements the program defines
// (definedDiff), or why it did not run.
func OpenChip(backend string, mesh ir.Mesh, o ChipOptions) (*Mesh, error) {
	if mesh.Devices() != 1 {
		return nil, fmt.Errorf("runtime: backend %s drives one chip; mesh %s has %d devices (use --mesh 1x1)", backend, mesh, mesh.Devices())
	}
	if o.Builder == nil {
		return nil, fmt.Errorf("runtime: backend %s needs a kernel builder (the JIT)", backend)
	}
	opts := o.Fake
	opts.Backend, opts.TTSim = backend, o.TTSim
	if o.Timeout != 0 {
		opts.Timeout = o.Timeout
	}
	removeStale("", processAlive)
	dev, err := blackhole.Open(opts, o.Builder)
	if err != nil {
		return nil, err
	}
	m, err := Open("sim", mesh)
	if err != nil {
		dev.Close()
		return nil, err
	}
	m.Backend, m.chip, m.beforeLaunch, m.compared, m.builder = backend, dev, o.BeforeLaunch, o.Compared, o.Builder
	return m, nil
}

// ChipResults lists what happened to every program launched on the chip.
func (m *Mesh) ChipResults() []ProgramResult { return m.chipResults }

// Close releases the chip of a ttsim or blackhole mesh and removes the
// temporary directories its builds' sources were written to.
func (m *Mesh) Close() error {
	var err error
	if m.chip != nil {
		err = m.chip.Close()
	}
	for _, d := range m.tmpDirs {
		if rerr := os.RemoveAll(d); err == nil {
			err = rerr
		}
	}
	m.tmpDirs = nil
	return err
}

// runOnChip runs program i of e on the chip from the simulator's state
// before it; after is called to run it on the simulator.
func (e *Executable) runOnChip(i int, simRun func() error) error {
	p := e.Build.Programs[i]
	if e.launches == nil {
		e.launches = make([]int, len(e.Build.Programs))
	}
	e.launches[i]++
	res := ProgramResult{Index: i, Program: p.Kernel.Name, Launch: e.launches[i]}
	record := func(status, detail string) {
		res.Status, res.Detail = status, detail
		e.Mesh.chipResults = append(e.Mesh.chipResults, res)
	}
	if IsCollective(p.Kernel) {
		record("skipped", "collective: ethernet kernels need a multi-chip configuration")
		return simRun()
	}
	dir, err := e.buildDir()
	if err != nil {
		return err
	}
	cfg := e.configs[i]
	sim := e.Mesh.devices[0]
	ref := blackhole.Reference{Mem: simMemory{sim}, Binding: e.binding}
	if err := e.Mesh.chip.Upload(cfg, ref); err != nil {
		return err
	}
	if err := simRun(); err != nil {
		return err
	}
	if e.Mesh.beforeLaunch != nil {
		e.Mesh.beforeLaunch(res)
	}
	err = e.Mesh.chip.RunProgram(dir, cfg, ref)
	var skip *blackhole.SkipError
	switch {
	case errors.As(err, &skip):
		record("skipped", skip.Reason)
		return nil
	case err != nil:
		record("failed", err.Error())
		return nil
	}
	// Every buffer is compared (and passed to Compared) as the value of
	// the program's op it holds (definedViews); the launch's detail names
	// the first that differs and counts the others.
	views, err := e.definedViews(p)
	if err != nil {
		return err
	}
	padded, differing := 0, 0
	first := ""
	for _, bc := range cfg.Buffers {
		_, dn, err := ref.Buffer(bc.Name)
		if err != nil {
			return err
		}
		b, _ := sim.Buffer(dn)
		want, err := sim.ReadPages(dn, 0, b.Pages)
		if err != nil {
			return err
		}
		got, err := e.Mesh.chip.Download(bc.Name, ref)
		if err != nil {
			record("failed", err.Error())
			return nil
		}
		t, ok := views[dn]
		if !ok {
			if t, ok = e.Mesh.tensors[dn]; !ok {
				return fmt.Errorf("runtime: chip check of program %d %s: no tensor %q", i, p.Kernel.Name, dn)
			}
		}
		if n := t.Pages * t.PageSize; n < len(got) && n < len(want) {
			got, want = got[:n], want[:n] // a shared buffer's pages past the value's
		}
		if e.Mesh.compared != nil {
			e.Mesh.compared(res, t, got, want)
		}
		diff, padding := definedDiff(t, got, want)
		switch {
		case diff != "":
			if differing == 0 {
				first = fmt.Sprintf("buffer %s: %s", bc.Name, diff)
			}
			differing++
		case padding:
			padded++
		}
	}
	if differing > 0 {
		if differing > 1 {
			first += fmt.Sprintf(" (and %d more buffers differ)", differing-1)
		}
		record("differs", first)
		return nil
	}
	detail := fmt.Sprintf("%d buffers bit-exact", len(cfg.Buffers))
	if padded > 0 {
		detail = fmt.Sprintf("%d buffers bit-exact on their defined elements; tile padding differs in %d", len(cfg.Buffers), padded)
	}
	record("matched", detail)
	return nil
}

// definedViews maps the device buffer of each result and operand of p's op
// to the tensor that value is in it (Executable.tensor), results first: a
// shared buffer (codegen.BufferSpec.Values) is sized for its largest
// value, and the program defines only its own value's rows and pages (the
// rest holds what an earlier value left, which the chip and the simulator
// need not agree on: a prefill matmul's 8 rows in a buffer of 11).
func (e *Executable) definedViews(p *codegen.Program) (map[string]Tensor, error) {
	views := map[string]Tensor{}
	for _, vs := range [][]*ir.Value{p.Op.Results, p.Op.Operands} {
		for _, v := range vs {
			if e.Build.BufferOf(v) == nil {
				continue // no buffer of its own (a constant folded into the program)
			}
			dn, err := e.name(v)
			if err != nil {
				return nil, err
			}
			if _, ok := views[dn]; ok {
				continue
			}
			t, err := e.tensor(v)
			if err != nil {
				return nil, err
			}
			views[dn] = t
		}
	}
	return views, nil
}

// buildDir writes the build's sources once, for the JIT.
func (e *Executable) buildDir() (string, error) {
	if e.dir != "" {
		return e.dir, nil
	}
	files, err := e.Build.Files()
	if err != nil {
		return "", err
	}
	dir, err := e.Mesh.makeTmpDir("tcc-build-")
	if err != nil {
		return "", err
	}
	if err := codegen.WriteDir(dir+"/b", files); err != nil {
		return "", err
	}
	var pf codegen.ProgramsFile
	if err := json.Unmarshal(files["programs.json"], &pf); err != nil {
		return "", fmt.Errorf("runtime: reading the build's programs.json: %w", err)
	}
	e.configs = map[int]*hostcfg.ProgramConfig{}
	for _, pe := range pf.Programs {
		if pe.Device == 0 {
			e.configs[pe.Index] = pe.ProgramConfig
		}
	}
	if len(e.configs) != len(e.Build.Programs) {
		return "", fmt.Errorf("runtime: programs.json lists %d programs for device 0, the build has %d", len(e.configs), len(e.Build.Programs))
	}
	e.dir = dir + "/b"
	return e.dir, nil
}

// simMemory is the simulator's device as the chip runtime's reference
// memory: the chip's buffers sit where the simulator placed them.
type simMemory struct{ *kexec.Device }

func (m simMemory) Placement(name string) (blackhole.Placement, bool) {
	b, ok := m.Buffer(name)
	if !ok {
		return blackhole.Placement{}, false
	}
	return placement(b), true
}

// placement is where the pages of simulator buffer b live.
func placement(b *kexec.DeviceBuffer) blackhole.Placement {
	return blackhole.Placement{Kind: b.Mem.Kind, Pages: b.Pages, PageSize: b.PageSize, Addr: b.Addr, Stride: b.Stride, Cores: b.Cores, PerCore: b.PerCore, Blocks: b.Blocks}
}
