package blackhole

import (
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/tcc-dev/tcc/codegen/hostcfg"
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/runtime/blackhole/access"
	"github.com/tcc-dev/tcc/runtime/blackhole/access/kmd"
	"github.com/tcc-dev/tcc/runtime/blackhole/access/ttsim"
	"github.com/tcc-dev/tcc/runtime/blackhole/chip"
	"github.com/tcc-dev/tcc/runtime/blackhole/firmware"
	"github.com/tcc-dev/tcc/runtime/blackhole/launch"
)

// Builder compiles kernels for the chip (package jit).
type Builder interface {
	// Firmware returns the firmware set the kernels link against.
	Firmware() (firmware.Set, error)
	// Kernel returns the execute-in-place images of kernel k of program p
	// by processor (0 BRISC, 1 NCRISC, 2..4 TRISC0..2). buildDir holds the
	// build's C++ sources.
	Kernel(buildDir string, p *hostcfg.ProgramConfig, k *hostcfg.KernelConfig) (map[int][]byte, error)
}

// Options select and configure a chip.
type Options struct {
	// Backend is "ttsim" or "blackhole" (a card through tt-kmd), or
	// "fake" with Fake set (tests).
	Backend string
	// TTSim is the libttsim.so path (ttsim; else TT_METAL_SIMULATOR).
	TTSim string
	// Device is the card's device node (default /dev/tenstorrent/0).
	Device string
	Fake   access.BAR
	// Fakes, when set, are the chips of a multi-chip fake (OpenAll opens
	// them all as chips 0, 1, ...; Fake is then ignored).
	Fakes []access.BAR
	// Timeout bounds firmware init and each program (default 30 s).
	Timeout time.Duration
	// CardEth says the ethernet cores run a card's base firmware, so the
	// runtime loads the active-erisc firmware before ethernet kernels
	// and launches them in the pinned release's layout (eth.go). It is
	// set for backend blackhole; ttsim runs no firmware on them; a fake
	// does as it is told (fake.Chip.CardEth).
	CardEth bool
}

// EthFirmwareBuilder is a Builder that also builds the active-erisc
// firmware a card's ethernet cores need (package jit: JITBuilder).
type EthFirmwareBuilder interface {
	EthFirmware() (firmware.EthSet, error)
}

// Device is an opened chip with the firmware of the pinned release.
type Device struct {
	Chip *chip.Chip
	// ID is the chip's index among the chips opened together (OpenAll);
	// kernels' device-id arguments (kir.ValDeviceID) get it, so a caller
	// running a mesh whose device k is not chip k sets it to k.
	ID      int
	builder Builder
	fw      firmware.Set
	booted  map[kir.Core]bool
	timeout time.Duration
	// cardEth, ethFW and ethBooted: Options.CardEth, the active-erisc
	// firmware and the physical channels it runs on (bootEth).
	cardEth   bool
	ethFW     firmware.EthSet
	ethBooted map[int]bool
}

// Open opens the chip o names (of a multi-chip ttsim library, chip 0).
// Nothing is booted yet.
func Open(o Options, b Builder) (*Device, error) {
	o.Fakes = nil
	ds, err := OpenAll(o, b)
	if err != nil {
		return nil, err
	}
	for _, d := range ds[1:] {
		d.Close()
	}
	return ds[0], nil
}

// OpenAll opens every chip o names: each host-visible chip of a ttsim
// library (bh_x2: two), the one card at o.Device, or the fakes o.Fakes
// (else o.Fake). Device i has ID i. Nothing is booted yet.
func OpenAll(o Options, b Builder) ([]*Device, error) {
	var devs []access.Device
	switch o.Backend {
	case "ttsim":
		sims, err := ttsim.OpenAll(o.TTSim)
		if err != nil {
			return nil, err
		}
		for _, s := range sims {
			devs = append(devs, access.NewBARDevice(s))
		}
	case "blackhole":
		path := o.Device
		if path == "" {
			nodes, err := kmd.Devices()
			if err != nil {
				return nil, err
			}
			path = nodes[0]
		}
		c, err := kmd.Open(path)
		if err != nil {
			return nil, err
		}
		devs = append(devs, c)
	case "fake":
		fakes := o.Fakes
		if len(fakes) == 0 && o.Fake != nil {
			fakes = []access.BAR{o.Fake}
		}
		if len(fakes) == 0 {
			return nil, errors.New("blackhole: backend fake needs Options.Fake or Options.Fakes")
		}
		for _, f := range fakes {
			devs = append(devs, access.NewBARDevice(f))
		}
	default:
		return nil, fmt.Errorf("blackhole: unknown backend %q (want ttsim or blackhole)", o.Backend)
	}
	timeout := o.Timeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	var out []*Device
	for i, dev := range devs {
		c, err := chip.Open(dev, nil)
		if err != nil {
			for _, d := range out {
				d.Close()
			}
			for _, d := range devs[i:] {
				d.Close()
			}
			if len(devs) > 1 {
				err = fmt.Errorf("chip %d of %d: %w", i, len(devs), err)
			}
			return nil, err
		}
		out = append(out, &Device{Chip: c, ID: i, builder: b, booted: map[kir.Core]bool{}, timeout: timeout,
			cardEth: o.CardEth || o.Backend == "blackhole", ethBooted: map[int]bool{}})
	}
	return out, nil
}

// Close closes the chip.
func (d *Device) Close() error { return d.Chip.Close() }

// boot loads firmware on the cores of cs not booted yet.
func (d *Device) boot(cs []kir.Core) error {
	var todo []kir.Core
	for _, c := range cs {
		if !d.booted[c] {
			todo = append(todo, c)
		}
	}
	if len(todo) == 0 {
		return nil
	}
	if d.fw[0] == nil {
		fw, err := d.builder.Firmware()
		if err != nil {
			return err
		}
		d.fw = fw
	}
	if err := firmware.Boot(d.Chip, todo, d.fw, d.timeout); err != nil {
		return err
	}
	for _, c := range todo {
		d.booted[c] = true
	}
	return nil
}

// Upload copies every buffer of p from ref to the chip, at the addresses
// ref gave them.
func (d *Device) Upload(p *hostcfg.ProgramConfig, ref Reference) error {
	names := make([]string, len(p.Buffers))
	for i, bc := range p.Buffers {
		names[i] = bc.Name
	}
	if err := d.UploadBuffers(names, ref); err != nil {
		return fmt.Errorf("program %s: %w", p.Program, err)
	}
	return nil
}

// UploadBuffers copies the named program buffers from ref to the chip, at
// the addresses ref gave them.
func (d *Device) UploadBuffers(names []string, ref Reference) error {
	for _, name := range names {
		b, dn, err := ref.Buffer(name)
		if err != nil {
			return err
		}
		data, err := ref.Mem.ReadPages(dn, 0, b.Pages)
		if err != nil {
			return err
		}
		if err := d.pages(b, data, true); err != nil {
			return fmt.Errorf("uploading %q: %w", name, err)
		}
	}
	return nil
}

// Download reads buffer name of p from the chip, as ref lays it out.
func (d *Device) Download(name string, ref Reference) ([]byte, error) {
	b, _, err := ref.Buffer(name)
	if err != nil {
		return nil, err
	}
	data := make([]byte, b.Pages*b.PageSize)
	if err := d.pages(b, data, false); err != nil {
		return nil, fmt.Errorf("downloading %q: %w", name, err)
	}
	return data, nil
}

// WritePages writes all pages of a buffer placed as b to the chip.
func (d *Device) WritePages(b Placement, data []byte) error { return d.pages(b, data, true) }

// WritePage writes page i of a buffer placed as b (len(page) = its page
// size) to the chip.
func (d *Device) WritePage(b Placement, i int, page []byte) error {
	if i < 0 || i >= b.Pages || len(page) != b.PageSize {
		return fmt.Errorf("page %d of %d (%d B into a page of %d B)", i, b.Pages, len(page), b.PageSize)
	}
	return d.page(b, i, page, true)
}

// pages moves the pages of a buffer placed as b between data and the chip.
func (d *Device) pages(b Placement, data []byte, write bool) error {
	for i := 0; i < b.Pages; i++ {
		if err := d.page(b, i, data[i*b.PageSize:(i+1)*b.PageSize], write); err != nil {
			return err
		}
	}
	return nil
}

// page moves page i of a buffer placed as b.
func (d *Device) page(b Placement, i int, page []byte, write bool) error {
	var at chip.XY
	var addr uint64
	switch {
	case b.Kind == ir.DRAMInterleaved:
		kb := kir.Buffer{Pages: b.Pages, PageSize: b.PageSize, Blocks: b.Blocks}
		bank, off := kb.DRAMPage(i, len(d.Chip.DRAM), b.Stride)
		at, addr = d.Chip.DRAM[bank], uint64(b.Addr)+uint64(off)
	case b.Kind == ir.L1Interleaved:
		c, err := d.Chip.Worker(b.Cores[i%len(b.Cores)])
		if err != nil {
			return err
		}
		at, addr = c, uint64(b.Addr)+uint64((i/len(b.Cores))*b.Stride)
	default:
		c, err := d.Chip.Worker(b.Cores[i/b.PerCore])
		if err != nil {
			return err
		}
		at, addr = c, uint64(b.Addr)+uint64((i%b.PerCore)*b.Stride)
	}
	if write {
		return d.Chip.Write(at, addr, page)
	}
	return d.Chip.Read(at, addr, page)
}

// SkipError says why a program cannot run on the chip (it is not a failure).
type SkipError struct{ Reason string }

func (e *SkipError) Error() string { return "skipped: " + e.Reason }

// RunProgram runs program p of a build in buildDir on the chip, its
// buffers already uploaded (Upload). Each core runs, on each processor,
// the kernel whose core range holds it; kernels of one processor may run
// on disjoint cores, and two on one core are an error naming the program,
// core and processor. Programs with ethernet kernels are
// skipped (they run on every chip together: WriteProgram on each, then
// Go and Wait); a kernel the JIT cannot build for a reason of toolchain
// returns a *SkipError from the builder.
func (d *Device) RunProgram(buildDir string, p *hostcfg.ProgramConfig, ref Reference) error {
	for i := range p.Kernels {
		if k := &p.Kernels[i]; k.Ethernet != nil {
			return &SkipError{Reason: fmt.Sprintf("kernel %s runs on ethernet cores: RunProgram runs one chip's worker kernels; ethernet kernels start on every chip together (WriteProgram, Go, Wait)", k.Name)}
		}
	}
	s, err := d.WriteProgram(buildDir, p, ref, nil)
	if err != nil {
		return err
	}
	if err := s.Go(); err != nil {
		return err
	}
	return s.Wait()
}

// workerProgram builds the worker kernels ks of p into a launch program
// (CBs placed as the simulator places them, p's worker semaphores).
func (d *Device) workerProgram(buildDir string, p *hostcfg.ProgramConfig, ks []*hostcfg.KernelConfig, ref Reference, phys func(int) (int, error)) (*launch.Program, error) {
	lp := &launch.Program{Name: p.Program, CoreType: launch.CoreTensix}
	cores := map[kir.Core]bool{}
	for _, k := range ks {
		imgs, err := d.builder.Kernel(buildDir, p, k)
		if err != nil {
			return nil, err
		}
		kc, err := d.launchKernel(p, k, ref, phys)
		if err != nil {
			return nil, err
		}
		for _, c := range coresOf(k.Cores) {
			cores[c] = true
			if _, ok := kc.RTA[c]; !ok {
				kc.RTA[c] = nil
			}
		}
		if k.NoC != nil && k.Processor == "RISCV_0" {
			kc.NoC = *k.NoC
		}
		procs := make([]int, 0, len(imgs))
		for proc := range imgs {
			procs = append(procs, proc)
		}
		sort.Ints(procs)
		for _, proc := range procs {
			if proc < 0 || proc >= len(lp.Kernels) {
				return nil, fmt.Errorf("program %s kernel %s: image for processor %d (want 0..4)", p.Program, k.Name, proc)
			}
			kk := *kc
			kk.Image = imgs[proc]
			lp.Kernels[proc] = append(lp.Kernels[proc], &kk)
		}
	}
	for c := range cores {
		lp.Cores = append(lp.Cores, c)
	}
	sort.Slice(lp.Cores, func(i, j int) bool {
		a, b := lp.Cores[i], lp.Cores[j]
		return a.Y < b.Y || a.Y == b.Y && a.X < b.X
	})
	if err := d.placeCBs(p, lp, ref); err != nil {
		return nil, err
	}
	for _, s := range p.Semaphores {
		if s.CoreType != hostcfg.CoreTypeEth {
			lp.Semaphores = append(lp.Semaphores, launch.Semaphore{ID: s.ID, Initial: s.Initial, Cores: coresOf(s.Cores)})
		}
	}
	return lp, nil
}

// launchKernel resolves kernel k's runtime and common runtime args
// (ethernet cores' NoC coordinates through phys).
func (d *Device) launchKernel(p *hostcfg.ProgramConfig, k *hostcfg.KernelConfig, ref Reference, phys func(int) (int, error)) (*launch.Kernel, error) {
	kc := &launch.Kernel{Name: k.Name, RTA: map[kir.Core][]uint32{}}
	for _, ca := range k.RuntimeArgs {
		v, err := d.resolve(ca.Values, ref, phys)
		if err != nil {
			return nil, fmt.Errorf("program %s kernel %s core %s: %w", p.Program, k.Name, kir.Core(ca.Core), err)
		}
		kc.RTA[kir.Core(ca.Core)] = v
	}
	var crta []hostcfg.ArgValue
	for _, a := range k.CommonRuntimeArgs {
		crta = append(crta, a.Value)
	}
	var err error
	if kc.CRTA, err = d.resolve(crta, ref, phys); err != nil {
		return nil, fmt.Errorf("program %s kernel %s: common args: %w", p.Program, k.Name, err)
	}
	return kc, nil
}

func coresOf(rs []hostcfg.CoreRange) []kir.Core {
	var out []kir.Core
	for _, r := range rs {
		out = append(out, kir.CoresOf([]ir.CoreRange{ir.CoreRange(r)})...)
	}
	return out
}

// resolve turns symbolic argument values into words for the chip. The
// NoC coordinates of an ethernet core (logical channel ch) are the
// translated ones of the physical channel phys(ch) (EthTranslated).
func (d *Device) resolve(vs []hostcfg.ArgValue, ref Reference, phys func(int) (int, error)) ([]uint32, error) {
	out := make([]uint32, len(vs))
	for i, v := range vs {
		switch v.Kind {
		case kir.ValConst:
			out[i] = v.Const
		case kir.ValBufferAddr:
			b, _, err := ref.Buffer(v.Buffer)
			if err != nil {
				return nil, err
			}
			out[i] = b.Addr + v.Const
		case kir.ValNoCX, kir.ValNoCY:
			var at chip.XY
			var err error
			if v.Core.IsEth() {
				at, err = d.ethTranslated(v.Core, phys)
			} else {
				at, err = d.Chip.Worker(v.Core)
			}
			if err != nil {
				return nil, err
			}
			out[i] = uint32(at.X)
			if v.Kind == kir.ValNoCY {
				out[i] = uint32(at.Y)
			}
		case kir.ValDeviceID:
			out[i] = uint32(d.ID)
		default:
			return nil, fmt.Errorf("argument %d: value kind %d has no chip value", i, v.Kind)
		}
	}
	return out, nil
}

// placeCBs gives every CB of p an address: the backing buffer's for a
// globally allocated CB, else the address the simulator gives it
// (kir.CBPlaceOrder and kir.FirstFit from the unreserved base), so the
// chip and the simulator agree.
func (d *Device) placeCBs(p *hostcfg.ProgramConfig, lp *launch.Program, ref Reference) error {
	indices := make([]int, len(p.CBs))
	for i, cb := range p.CBs {
		indices[i] = cb.Index
	}
	var done []kir.CBSpan
	for _, i := range kir.CBPlaceOrder(indices) {
		cb := p.CBs[i]
		cs := coresOf(cb.Cores)
		size := uint64(cb.TotalSize)
		var addr uint64
		if cb.BackingBuffer != "" {
			b, _, err := ref.Buffer(cb.BackingBuffer)
			if err != nil {
				return err
			}
			addr = uint64(b.Addr)
		} else {
			addr = kir.FirstFit(uint64(d.Chip.Layout.Unreserved), size, cs, done)
			done = append(done, kir.CBSpan{Cores: cs, Lo: addr, Hi: addr + size})
		}
		lp.CBs = append(lp.CBs, launch.CB{Index: cb.Index, PageSize: cb.PageSize, Pages: cb.NumPages, Addr: uint32(addr), Cores: cs})
	}
	return nil
}
