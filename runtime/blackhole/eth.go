package blackhole

import (
	"fmt"
	"sort"

	"github.com/tcc-dev/tcc/codegen/hostcfg"
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/runtime/blackhole/chip"
	"github.com/tcc-dev/tcc/runtime/blackhole/firmware"
	"github.com/tcc-dev/tcc/runtime/blackhole/jit"
	"github.com/tcc-dev/tcc/runtime/blackhole/launch"
)

// Ethernet programs.
//
// A collective's kernels run on worker cores and on active ethernet
// cores of every chip of the ring, on ERISC0 (RISCV_0) and ERISC1
// (RISCV_1). WriteProgram writes a program's kernels on both kinds of
// core of one chip. On a card (Options.CardEth) it first loads the
// active-erisc firmware of both ERISCs on the ethernet cores that have
// not run it yet (bootEth, firmware.BootEth) and writes the launches in
// the pinned release's layout (launch.CardEthLayout), which that firmware
// reads. On ttsim it writes them the way the two-chip library runs them
// (launch.TTSimEthLayout: no firmware; ttsim jumps ERISC0 into its kernel
// on RUN_MSG_GO); an ERISC1 kernel is an error there (nothing starts it). A
// kernel's logical ethernet core kir.EthCore(ch) runs on the physical
// channel phys(ch) of this chip (a build planned on a topology maps its
// logical ring channels to each chip's physical ones:
// runtime.PhysicalChannel). The program's kernels that talk to each other
// over ethernet run on different chips, so nothing waits: write the
// program on every chip, send every chip's go messages (Go), then Wait on
// each.
//
// Each launch message carries both core types' kernel config bases and
// semaphore offsets (launch.Peer), as tt-metal's dispatch writes them, so
// that a worker's get_semaphore<ACTIVE_ETH>(id) is the ethernet core's
// semaphore and an ethernet kernel's get_semaphore(id) the workers'; on
// ttsim the ethernet kernel sets its sem_l1_base[] from them itself
// (jit ttsimeth.go), since ttsim runs no active-erisc firmware.

// Ethernet cores' translated NoC coordinates (tt-metal's virtual
// coordinates of a Blackhole, the same on both NoCs; ttsim's
// remap_virtual_coordinate): channel ch is (EthTranslatedX0 + ch,
// EthTranslatedY).
const (
	EthTranslatedX0 = 20
	EthTranslatedY  = 25
)

// ethTranslated is the translated NoC coordinate of logical ethernet core
// c on this chip: its physical channel phys(c.X). Without phys (a program
// run on one chip) the logical channel is the physical one.
func (d *Device) ethTranslated(c kir.Core, phys func(int) (int, error)) (chip.XY, error) {
	ch := c.X
	if phys != nil {
		var err error
		if ch, err = phys(c.X); err != nil {
			return chip.XY{}, err
		}
	}
	if _, _, err := d.Chip.Target.EthNoC(ch); err != nil {
		return chip.XY{}, fmt.Errorf("core %s: %w", c, err)
	}
	return chip.XY{X: EthTranslatedX0 + ch, Y: EthTranslatedY}, nil
}

// Written is a program written to one chip's cores (WriteProgram) whose
// go messages are not sent yet.
type Written struct {
	d *Device
	// eth and worker are the program's ethernet and worker parts (nil
	// when it has none).
	eth, worker *launch.Launched
}

// Go sends the go messages: the ethernet cores' first, then the
// workers'.
func (w *Written) Go() error {
	for _, x := range []*launch.Launched{w.eth, w.worker} {
		if x != nil {
			if err := x.Go(); err != nil {
				return err
			}
		}
	}
	return nil
}

// Wait waits, up to the device's timeout (simulated time on ttsim), for
// every core of the program to report done; a core that does not is a
// *launch.StallError.
func (w *Written) Wait() error {
	for _, x := range []*launch.Launched{w.worker, w.eth} {
		if x != nil {
			if err := x.Wait(w.d.timeout); err != nil {
				return err
			}
		}
	}
	return nil
}

// WriteProgram builds program p's kernels (worker and ethernet), boots
// the worker cores it uses, and writes every core's kernel config blob
// and launch message, without sending a go message (Written.Go). Ethernet
// kernels need phys (the physical channel of each logical one on this
// chip); without it a program with ethernet kernels is an error.
func (d *Device) WriteProgram(buildDir string, p *hostcfg.ProgramConfig, ref Reference, phys func(ch int) (int, error)) (*Written, error) {
	var workers, eths []*hostcfg.KernelConfig
	for i := range p.Kernels {
		if k := &p.Kernels[i]; k.Ethernet != nil {
			eths = append(eths, k)
		} else {
			workers = append(workers, k)
		}
	}
	if len(eths) > 0 && phys == nil {
		return nil, fmt.Errorf("program %s: ethernet kernels need the chip's physical channel of each logical one", p.Program)
	}
	var wp, ep *launch.Program
	var wpl, epl *launch.Plan
	el := d.EthLayout()
	var err error
	if len(workers) > 0 {
		if wp, err = d.workerProgram(buildDir, p, workers, ref, phys); err != nil {
			return nil, err
		}
		if wpl, err = launch.MakePlan(wp, d.Chip.Layout); err != nil {
			return nil, err
		}
	}
	if len(eths) > 0 {
		if ep, err = d.ethProgram(buildDir, p, eths, ref, phys); err != nil {
			return nil, err
		}
		if epl, err = launch.MakePlan(ep, el); err != nil {
			return nil, err
		}
	}
	if wp != nil && ep != nil {
		wp.Peers = []launch.Peer{{CoreType: launch.CoreActiveEth, KernelConfigBase: el.KernelConfig.Base, SemOffset: epl.Sem}}
		ep.Peers = []launch.Peer{{CoreType: launch.CoreTensix, KernelConfigBase: d.Chip.Layout.KernelConfig.Base, SemOffset: wpl.Sem}}
	}
	w := &Written{d: d}
	if wp != nil {
		if err := d.boot(wp.Cores); err != nil {
			return nil, err
		}
		if w.worker, err = launch.WriteOn(d.Chip, wp, wpl, d.Chip.Layout, d.Chip.Worker); err != nil {
			return nil, err
		}
	}
	if ep != nil {
		if err := d.bootEth(ep.Cores, phys); err != nil {
			return nil, fmt.Errorf("program %s: %w", p.Program, err)
		}
		at := func(c kir.Core) (chip.XY, error) {
			ch, err := phys(c.X)
			if err != nil {
				return chip.XY{}, err
			}
			x, y, err := d.Chip.Target.EthNoC(ch)
			if err != nil {
				return chip.XY{}, fmt.Errorf("core %s (physical channel %d): %w", c, ch, err)
			}
			return chip.XY{X: x, Y: y}, nil
		}
		if w.eth, err = launch.WriteOn(d.Chip, ep, epl, el, at); err != nil {
			return nil, err
		}
	}
	return w, nil
}

// EthLayout is the layout of this chip's ethernet launches: a card's
// (launch.CardEthLayout, read by the active-erisc firmware bootEth loads)
// or ttsim's (launch.TTSimEthLayout: ttsim runs no firmware on them).
func (d *Device) EthLayout() *target.Layout {
	if d.cardEth {
		return launch.CardEthLayout(d.Chip.Layout)
	}
	return launch.TTSimEthLayout(d.Chip.Layout)
}

// bootEth loads the active-erisc firmware (firmware.BootEth) on the
// physical channels of the logical ethernet cores cs that do not run it
// yet, on a card (Options.CardEth) only: ttsim's bh_x2 runs no firmware
// on ethernet cores (its base firmware is a stub that acks
// RUN_MSG_INIT and jumps into the kernel on RUN_MSG_GO).
func (d *Device) bootEth(cs []kir.Core, phys func(int) (int, error)) error {
	if !d.cardEth {
		return nil
	}
	var todo []firmware.EthCore
	for _, c := range cs {
		ch, err := phys(c.X)
		if err != nil {
			return err
		}
		if d.ethBooted[ch] {
			continue
		}
		x, y, err := d.Chip.Target.EthNoC(ch)
		if err != nil {
			return err
		}
		todo = append(todo, firmware.EthCore{Channel: ch, At: chip.XY{X: x, Y: y}})
	}
	if len(todo) == 0 {
		return nil
	}
	if d.ethFW[0] == nil {
		b, ok := d.builder.(EthFirmwareBuilder)
		if !ok {
			return fmt.Errorf("ethernet kernels on a card need the active-erisc firmware; the builder (%T) builds none", d.builder)
		}
		fw, err := b.EthFirmware()
		if err != nil {
			return err
		}
		d.ethFW = fw
	}
	if err := firmware.BootEth(d.Chip, todo, d.ethFW, d.timeout); err != nil {
		return err
	}
	for _, c := range todo {
		d.ethBooted[c.Channel] = true
	}
	return nil
}

// StartEth writes and starts (WriteProgram, Go) a program of ethernet
// kernels only; it fails naming the program and kernel for a worker
// kernel.
func (d *Device) StartEth(buildDir string, p *hostcfg.ProgramConfig, ref Reference, phys func(ch int) (int, error)) (*Written, error) {
	for i := range p.Kernels {
		if k := &p.Kernels[i]; k.Ethernet == nil {
			return nil, fmt.Errorf("program %s kernel %s: not an ethernet kernel (StartEth runs ethernet kernels only)", p.Program, k.Name)
		}
	}
	w, err := d.WriteProgram(buildDir, p, ref, phys)
	if err != nil {
		return nil, err
	}
	return w, w.Go()
}

// ethProgram builds the ethernet kernels ks of p (Builder.Kernel: an
// ERISC0 image at jit.EthImage for RISCV_0, an ERISC1 one at
// jit.Eth1Image for RISCV_1) into a launch program with p's ethernet
// semaphores. Every kernel must run on ethernet cores.
func (d *Device) ethProgram(buildDir string, p *hostcfg.ProgramConfig, ks []*hostcfg.KernelConfig, ref Reference, phys func(int) (int, error)) (*launch.Program, error) {
	lp := &launch.Program{Name: p.Program, CoreType: launch.CoreActiveEth}
	cores := map[kir.Core]bool{}
	for _, k := range ks {
		imgs, err := d.builder.Kernel(buildDir, p, k)
		if err != nil {
			return nil, err
		}
		proc := jit.EthImage
		if k.Ethernet.Processor == "RISCV_1" {
			if !d.cardEth {
				return nil, fmt.Errorf("program %s kernel %s: an ERISC1 (RISCV_1) kernel does not run on ttsim: bh_x2 runs no active-erisc firmware to start ERISC1 and starts it only from its reset-PC register, which the runtime does not drive yet", p.Program, k.Name)
			}
			proc = jit.Eth1Image
		}
		img := imgs[proc]
		if len(img) == 0 || len(imgs) != 1 {
			return nil, fmt.Errorf("program %s kernel %s: the builder returned images for processors %v, want ERISC%d (%d) only", p.Program, k.Name, sortedKeys(imgs), proc, proc)
		}
		kc, err := d.launchKernel(p, k, ref, phys)
		if err != nil {
			return nil, err
		}
		kc.Image = img
		for _, c := range coresOf(k.Cores) {
			if !c.IsEth() {
				return nil, fmt.Errorf("program %s kernel %s: core %s is not an ethernet core", p.Program, k.Name, c)
			}
			cores[c] = true
			if _, ok := kc.RTA[c]; !ok {
				kc.RTA[c] = nil
			}
		}
		lp.Kernels[proc] = append(lp.Kernels[proc], kc)
	}
	for c := range cores {
		lp.Cores = append(lp.Cores, c)
	}
	sort.Slice(lp.Cores, func(i, j int) bool { return lp.Cores[i].X < lp.Cores[j].X })
	for _, s := range p.Semaphores {
		if s.CoreType == hostcfg.CoreTypeEth {
			lp.Semaphores = append(lp.Semaphores, launch.Semaphore{ID: s.ID, Initial: s.Initial, Cores: coresOf(s.Cores)})
		}
	}
	return lp, nil
}

func sortedKeys(m map[int][]byte) []int {
	var ks []int
	for k := range m {
		ks = append(ks, k)
	}
	sort.Ints(ks)
	return ks
}
