package runtime

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/tcc-dev/tcc/codegen"
	"github.com/tcc-dev/tcc/codegen/hostcfg"
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/runtime/blackhole"
	"github.com/tcc-dev/tcc/sim/kexec"
)

// ChipOptions configure the ttsim and blackhole backends.
type ChipOptions struct {
	// TTSim is the libttsim.so of the ttsim backend.
	TTSim string
	// Chip is the chip, among those the backend opens (ttsim's bh_x2: 0
	// and 1; fake: Fake.Fakes), a one-device mesh runs on.
	Chip int
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
	// Device is the mesh device (and chip) the launch ran on.
	Device int
}

// OpenChip opens mesh on backend "ttsim", "blackhole" or "fake": every
// program runs on the simulator, which holds the results, and also on the
// chip from the same inputs; ChipResults says per launch whether the chip
// matched the simulator bit for bit on the elements the program defines
// (definedDiff), or why it did not run.
func OpenChip(backend string, mesh ir.Mesh, o ChipOptions) (*Mesh, error) {
	if o.Builder == nil {
		return nil, fmt.Errorf("runtime: backend %s needs a kernel builder (the JIT)", backend)
	}
	opts := o.Fake
	opts.Backend, opts.TTSim = backend, o.TTSim
	if o.Timeout != 0 {
		opts.Timeout = o.Timeout
	}
	removeStale("", processAlive)
	devs, err := blackhole.OpenAll(opts, o.Builder)
	if err != nil {
		return nil, err
	}
	closeAll := func(except []*blackhole.Device) {
		for _, d := range devs {
			if !slices.Contains(except, d) {
				d.Close()
			}
		}
	}
	n := mesh.Devices()
	var use []*blackhole.Device
	switch {
	case n == 1 && (o.Chip < 0 || o.Chip >= len(devs)):
		closeAll(nil)
		return nil, fmt.Errorf("runtime: backend %s: chip %d: the backend has %d chip(s) (0..%d)", backend, o.Chip, len(devs), len(devs)-1)
	case n == 1:
		use = devs[o.Chip : o.Chip+1]
		use[0].ID = 0 // the mesh's device 0
	case mesh.Rows != 1:
		closeAll(nil)
		return nil, fmt.Errorf("runtime: backend %s runs 1xN meshes (a ring of chips); mesh %s has %d rows", backend, mesh, mesh.Rows)
	case n > len(devs) || o.Chip != 0:
		closeAll(nil)
		return nil, fmt.Errorf("runtime: backend %s: mesh %s needs %d chips (mesh device d on chip d), the backend has %d (ttsim: build its library for a multi-chip configuration, e.g. bh_x2 for two)", backend, mesh, n, len(devs))
	default:
		use = devs[:n]
	}
	closeAll(use)
	var links []blackhole.EthLink
	if n > 1 {
		if links, err = blackhole.EthLinks(use); err != nil {
			for _, d := range use {
				d.Close()
			}
			return nil, fmt.Errorf("runtime: backend %s: %w", backend, err)
		}
	}
	m, err := Open("sim", mesh)
	if err != nil {
		for _, d := range use {
			d.Close()
		}
		return nil, err
	}
	m.Backend, m.chip, m.chips, m.links, m.beforeLaunch, m.compared, m.builder = backend, use[0], use, links, o.BeforeLaunch, o.Compared, o.Builder
	return m, nil
}

// ChipLinks returns the ethernet links between the mesh's chips (mesh
// device d is chip d), as their base firmware reports them.
func (m *Mesh) ChipLinks() []blackhole.EthLink { return m.links }

// ChipResults lists what happened to every program launched on the chip.
func (m *Mesh) ChipResults() []ProgramResult { return m.chipResults }

// Close releases the chip of a ttsim or blackhole mesh and removes the
// temporary directories its builds' sources were written to.
func (m *Mesh) Close() error {
	var err error
	for _, c := range m.chips {
		if cerr := c.Close(); err == nil {
			err = cerr
		}
	}
	for _, d := range m.tmpDirs {
		if rerr := os.RemoveAll(d); err == nil {
			err = rerr
		}
	}
	m.tmpDirs = nil
	return err
}

// runOnChip runs program i of e on the chips from the simulator's state
// before it (mesh device d's on chip d); simRun runs it on the simulator.
// A collective's ethernet links are checked against the chips' (an error
// naming the program and the link when they differ) and it runs on every
// chip together (runCollectiveOnChips).
func (e *Executable) runOnChip(i int, simRun func() error) error {
	p := e.Build.Programs[i]
	if e.launches == nil {
		e.launches = make([]int, len(e.Build.Programs))
	}
	e.launches[i]++
	chips := e.Mesh.chips
	results := make([]ProgramResult, len(chips))
	for d := range results {
		results[d] = ProgramResult{Index: i, Program: p.Kernel.Name, Launch: e.launches[i], Device: d}
	}
	record := func(d int, status, detail string) {
		results[d].Status, results[d].Detail = status, detail
		e.Mesh.chipResults = append(e.Mesh.chipResults, results[d])
	}
	if IsCollective(p.Kernel) {
		if err := e.checkLinks(p.Kernel); err != nil {
			return err
		}
		if len(chips) < 2 {
			for d := range chips {
				record(d, "skipped", "collective on a one-chip mesh")
			}
			return simRun()
		}
		return e.runCollectiveOnChips(i, results, record, simRun)
	}
	dir, refs, err := e.uploadAndSimulate(i, simRun)
	if err != nil {
		return err
	}
	cfg := e.configs[i]
	for d, c := range chips {
		if e.Mesh.beforeLaunch != nil {
			e.Mesh.beforeLaunch(results[d])
		}
		status, detail, err := e.checkOnChip(i, results[d], cfg, dir, c, refs[d], e.Mesh.devices[d])
		if err != nil {
			return chipErr(len(chips), d, err)
		}
		record(d, status, detail)
	}
	return nil
}

// uploadAndSimulate uploads program i's buffers to every chip from its
// mesh device's simulator state, then runs the program on the simulator
// (simRun). It returns the build directory and each chip's reference (the
// simulator's memory the chip's results are compared with).
func (e *Executable) uploadAndSimulate(i int, simRun func() error) (dir string, refs []blackhole.Reference, err error) {
	chips := e.Mesh.chips
	if dir, err = e.buildDir(); err != nil {
		return "", nil, err
	}
	refs = make([]blackhole.Reference, len(chips))
	for d, c := range chips {
		refs[d] = blackhole.Reference{Mem: simMemory{e.Mesh.devices[d]}, Binding: e.binding}
		if err := c.Upload(e.configs[i], refs[d]); err != nil {
			return "", nil, chipErr(len(chips), d, err)
		}
	}
	if err := simRun(); err != nil {
		return "", nil, err
	}
	return dir, refs, nil
}

// chipErr names the mesh device of err when there is more than one.
func chipErr(n, d int, err error) error {
	if n == 1 {
		return err
	}
	return fmt.Errorf("device %d: %w", d, err)
}

// checkOnChip launches program i (config cfg) on chip c, its buffers
// uploaded from sim, and compares them with sim's after the program.
func (e *Executable) checkOnChip(i int, res ProgramResult, cfg *hostcfg.ProgramConfig, dir string, c *blackhole.Device, ref blackhole.Reference, sim *kexec.Device) (status, detail string, err error) {
	if status, detail, ok := launchStatus(c.RunProgram(dir, cfg, ref)); !ok {
		return status, detail, nil
	}
	return e.compareOnChip(i, res, cfg, c, ref, sim)
}

// launchStatus maps a launch's error to its result: ok when it ran, else
// "skipped" (a *blackhole.SkipError) or "failed" and the detail.
func launchStatus(err error) (status, detail string, ok bool) {
	var skip *blackhole.SkipError
	switch {
	case errors.As(err, &skip):
		return "skipped", skip.Reason, false
	case err != nil:
		return "failed", err.Error(), false
	}
	return "", "", true
}

// compareOnChip compares every buffer of program i on chip c with sim's.
func (e *Executable) compareOnChip(i int, res ProgramResult, cfg *hostcfg.ProgramConfig, c *blackhole.Device, ref blackhole.Reference, sim *kexec.Device) (status, detail string, err error) {
	p := e.Build.Programs[i]
	// Every buffer is compared (and passed to Compared) as the value of
	// the program's op it holds (definedViews); the launch's detail names
	// the first that differs and counts the others.
	views, err := e.definedViews(p)
	if err != nil {
		return "", "", err
	}
	padded, differing := 0, 0
	first := ""
	for _, bc := range cfg.Buffers {
		_, dn, err := ref.Buffer(bc.Name)
		if err != nil {
			return "", "", err
		}
		b, _ := sim.Buffer(dn)
		want, err := sim.ReadPages(dn, 0, b.Pages)
		if err != nil {
			return "", "", err
		}
		got, err := c.Download(bc.Name, ref)
		if err != nil {
			return "failed", err.Error(), nil
		}
		t, ok := views[dn]
		if !ok {
			if t, ok = e.Mesh.tensors[dn]; !ok {
				return "", "", fmt.Errorf("runtime: chip check of program %d %s: no tensor %q", i, p.Kernel.Name, dn)
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
		return "differs", first, nil
	}
	detail = fmt.Sprintf("%d buffers bit-exact", len(cfg.Buffers))
	if padded > 0 {
		detail = fmt.Sprintf("%d buffers bit-exact on their defined elements; tile padding differs in %d", len(cfg.Buffers), padded)
	}
	return "matched", detail, nil
}

// checkLinks checks the ethernet links collective p uses against the
// chips': the physical links of the topology the build was planned on
// (its target's Eth.Links, recorded in programs.json) whose ends, mapped
// to the programs' logical channels (Ethernet.Logical), carry one of p's
// ethernet kernels. A build with no topology applied (no Eth.Ports) uses
// its ring channels on every chip.
func (e *Executable) checkLinks(p *kir.Program) error {
	m := e.Mesh
	if len(m.chips) < 2 {
		return nil
	}
	want, err := buildLinks(e.Build.Target, m.Shape.Cols, ethChannels(p))
	if err != nil {
		return err
	}
	if err := blackhole.CheckLinks(p.Name, want, m.links); err != nil {
		return fmt.Errorf("runtime: %w (mesh device d runs on chip d)", err)
	}
	return nil
}

// ethChannels is the set of logical ethernet channels p has kernels on.
func ethChannels(p *kir.Program) map[int]bool {
	used := map[int]bool{}
	for _, k := range p.Kernels {
		if k == nil || !k.OnEth() {
			continue
		}
		for _, c := range kir.CoresOf(k.Cores) {
			used[c.X] = true
		}
	}
	return used
}

// buildLinks returns the physical links (chip = mesh column) of a row of
// n chips planned on t's topology that touch a logical channel in used,
// sorted as blackhole.EthLinks sorts.
func buildLinks(t *target.Target, n int, used map[int]bool) ([]blackhole.EthLink, error) {
	eth := t.Eth
	if eth == nil {
		return nil, fmt.Errorf("runtime: target %s has no ethernet cores for collectives", t.Name)
	}
	// The physical links: the topology's table, or (no topology applied)
	// the ring, whose physical channels are its logical ones.
	links := eth.Links
	if len(eth.Ports) == 0 {
		var err error
		if links, err = t.MeshLinks(n); err != nil {
			return nil, fmt.Errorf("runtime: %w", err)
		}
	} else if len(eth.Ports) != n {
		return nil, fmt.Errorf("runtime: the build's topology %s is planned for a row of %d chips, the mesh row has %d", eth.Topology, len(eth.Ports), n)
	}
	var want []blackhole.EthLink
	for _, l := range links {
		a, okA := eth.Logical(l.A.Chip, l.A.Channel)
		b, okB := eth.Logical(l.B.Chip, l.B.Channel)
		if okA && used[a] || okB && used[b] {
			want = append(want, blackhole.NewEthLink(blackhole.EthEnd{Chip: l.A.Chip, Channel: l.A.Channel}, blackhole.EthEnd{Chip: l.B.Chip, Channel: l.B.Channel}))
		}
	}
	return want, nil
}

// PhysicalChannel returns the physical ethernet channel of chip d (a mesh
// column) that the build's logical channel ch runs on
// (target.Ethernet.Physical; ch itself without an ethernet description).
func PhysicalChannel(t *target.Target, d, ch int) (int, error) {
	if t.Eth == nil {
		return ch, nil
	}
	p, err := t.Eth.Physical(d, ch)
	if err != nil {
		return 0, fmt.Errorf("runtime: %w", err)
	}
	return p, nil
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
