package blackhole

import (
	"fmt"
	"sort"

	"github.com/tcc-dev/tcc/codegen/hostcfg"
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/runtime/blackhole/chip"
	"github.com/tcc-dev/tcc/runtime/blackhole/jit"
	"github.com/tcc-dev/tcc/runtime/blackhole/launch"
)

// Ethernet programs.
//
// StartEth launches the ethernet kernels of a program on the chip's active
// ethernet cores the way ttsim's two-chip library runs them
// (launch.TTSimEthLayout: no active-erisc firmware is loaded; ttsim jumps
// into the kernel). A kernel's logical ethernet core kir.EthCore(ch) runs
// on the physical channel phys(ch) of this chip (a build planned on a
// topology maps its logical ring channels to each chip's physical ones:
// runtime.PhysicalChannel). The program's kernels that talk to each other
// over ethernet run on different chips, so StartEth does not wait: start
// the program on every chip, then Wait on each.

// StartEth builds p's ethernet kernels (Builder.Kernel: ERISC0 images, at
// jit.EthImage) and starts them on the chip. Every kernel of p must be an
// ethernet kernel on RISCV_0, and none may use semaphores (ttsim's launch
// sets no sem_l1_base); it fails naming the program and kernel otherwise.
func (d *Device) StartEth(buildDir string, p *hostcfg.ProgramConfig, ref Reference, phys func(ch int) (int, error)) (*launch.Launched, error) {
	if len(p.Semaphores) > 0 {
		return nil, &SkipError{Reason: fmt.Sprintf("program %s: ethernet kernels with semaphores need the active-erisc firmware's sem_l1_base, which ttsim's launch does not set", p.Program)}
	}
	lp := &launch.Program{Name: p.Program}
	cores := map[kir.Core]bool{}
	for i := range p.Kernels {
		k := &p.Kernels[i]
		if k.Ethernet == nil {
			return nil, fmt.Errorf("program %s kernel %s: not an ethernet kernel (StartEth runs ethernet kernels only)", p.Program, k.Name)
		}
		imgs, err := d.builder.Kernel(buildDir, p, k)
		if err != nil {
			return nil, err
		}
		img := imgs[jit.EthImage]
		if len(img) == 0 || len(imgs) != 1 {
			return nil, fmt.Errorf("program %s kernel %s: the builder returned images for processors %v, want ERISC0 (%d) only", p.Program, k.Name, sortedKeys(imgs), jit.EthImage)
		}
		kc := &launch.Kernel{Name: k.Name, RTA: map[kir.Core][]uint32{}, Image: img}
		for _, ca := range k.RuntimeArgs {
			v, err := d.resolve(ca.Values, ref)
			if err != nil {
				return nil, fmt.Errorf("program %s kernel %s core %s: %w", p.Program, k.Name, kir.Core(ca.Core), err)
			}
			kc.RTA[kir.Core(ca.Core)] = v
		}
		var crta []hostcfg.ArgValue
		for _, a := range k.CommonRuntimeArgs {
			crta = append(crta, a.Value)
		}
		if kc.CRTA, err = d.resolve(crta, ref); err != nil {
			return nil, fmt.Errorf("program %s kernel %s: common args: %w", p.Program, k.Name, err)
		}
		for _, c := range coresOf(k.Cores) {
			if !c.IsEth() {
				return nil, fmt.Errorf("program %s kernel %s: core %s is not an ethernet core", p.Program, k.Name, c)
			}
			cores[c] = true
			if _, ok := kc.RTA[c]; !ok {
				kc.RTA[c] = nil
			}
		}
		lp.Kernels[jit.EthImage] = append(lp.Kernels[jit.EthImage], kc)
	}
	for c := range cores {
		lp.Cores = append(lp.Cores, c)
	}
	sort.Slice(lp.Cores, func(i, j int) bool { return lp.Cores[i].X < lp.Cores[j].X })
	l := launch.TTSimEthLayout(d.Chip.Layout)
	pl, err := launch.MakePlan(lp, l)
	if err != nil {
		return nil, err
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
	return launch.StartOn(d.Chip, lp, pl, l, at)
}

func sortedKeys(m map[int][]byte) []int {
	var ks []int
	for k := range m {
		ks = append(ks, k)
	}
	sort.Ints(ks)
	return ks
}
