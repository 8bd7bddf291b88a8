package runtime

import (
	"errors"
	"fmt"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/runtime/blackhole"
	"github.com/tcc-dev/tcc/sim/kexec"
)

// Collective programs (all_reduce, reduce_scatter, all_gather over a mesh
// row) have kernels on ethernet cores and must run on every card of the
// row at once: each card's senders feed the next card's receivers. The
// runtime launches them as one mesh workload per row on the sim backend's
// kexec.Cluster, cabled as the target's topology (kexec.TargetLinks:
// the topology's links in the programs' logical channels); every other
// program keeps running card by card.

// UseTopology cables every row of m as topology tp (target.WithTopology
// over the mesh's columns): collectives then run over tp's links, and Load
// accepts only builds planned for tp. A mesh opens cabled as
// target.DefaultTopology.
func (m *Mesh) UseTopology(tp *target.Topology) error {
	if tp.Chips > 0 && m.Shape.Devices() > tp.Chips {
		return fmt.Errorf("runtime: topology %s cables %d chips; mesh %s has %d", tp.Name, tp.Chips, m.Shape, m.Shape.Devices())
	}
	t, err := m.Target.WithTopology(tp, m.Shape.Cols)
	if err != nil {
		return fmt.Errorf("runtime: %w", err)
	}
	m.Target = t
	return nil
}

// topologyOf is the name of t's topology ("" without ethernet).
func topologyOf(t *target.Target) string {
	if t == nil || t.Eth == nil {
		return ""
	}
	return t.Eth.Topology
}

// IsCollective reports whether p is a mesh program: it has a kernel on an
// ethernet core, so it must be launched on all cards of a row together
// (LaunchCollective) rather than on one card.
func IsCollective(p *kir.Program) bool {
	if p == nil {
		return false
	}
	for _, k := range p.Kernels {
		if k != nil && k.OnEth() {
			return true
		}
	}
	return false
}

// row returns the cluster of mesh row r: its devices in column order,
// cabled as a ring (no cables for a one-card row).
func (m *Mesh) row(r int) (*kexec.Cluster, error) {
	cols := m.Shape.Cols
	devs := m.devices[r*cols : (r+1)*cols]
	eth := m.Target.Eth
	if eth == nil {
		return nil, fmt.Errorf("runtime: target %s has no ethernet cores for collectives", m.Target.Name)
	}
	links, err := kexec.TargetLinks(m.Target, cols)
	if err != nil {
		return nil, fmt.Errorf("runtime: mesh row %d: %w", r, err)
	}
	return kexec.NewClusterOf(devs, links)
}

// LaunchCollective runs p on every card of every mesh row, one mesh
// workload per row, and returns the statistics of every device (device
// index = row*cols + column). Within a row, card c resolves p's
// kir.DeviceID values to c. A deadlock (for example a receiver waiting for
// a transfer no card sends) is returned as a *kexec.DeadlockError naming
// the card, the core and what it waits for; errors name the row.
func (m *Mesh) LaunchCollective(p *kir.Program) ([]*kexec.Stats, error) {
	return m.launchCollective(p, nil)
}

// launchCollective is LaunchCollective with program buffer names bound to
// mesh tensor names.
func (m *Mesh) launchCollective(p *kir.Program, binding map[string]string) ([]*kexec.Stats, error) {
	if p == nil {
		return nil, fmt.Errorf("runtime: LaunchCollective: nil program")
	}
	var all []*kexec.Stats
	for r := 0; r < m.Shape.Rows; r++ {
		c, err := m.row(r)
		if err != nil {
			return nil, err
		}
		st, err := c.RunAll(p, kexec.RunOptions{Binding: binding})
		if err != nil {
			if m.Shape.Rows > 1 {
				return nil, fmt.Errorf("runtime: mesh row %d: %w", r, err)
			}
			return nil, err
		}
		all = append(all, st...)
	}
	return all, nil
}

// RunCollective launches program i of the build, a collective, on all
// cards at once; errors name the program and the op it implements.
func (e *Executable) RunCollective(i int) error {
	if i < 0 || i >= len(e.Build.Programs) {
		return fmt.Errorf("runtime: program %d out of range (%d programs)", i, len(e.Build.Programs))
	}
	p := e.Build.Programs[i]
	if _, err := e.Mesh.launchCollective(p.Kernel, e.binding); err != nil {
		return fmt.Errorf("runtime: program %d %s (%s) on mesh %s: %w", i, p.Kernel.Name, p.Op.Where(), e.Mesh.Shape, err)
	}
	return nil
}

// runCollectiveOnChips runs collective program i on every chip of the
// mesh row together and compares each chip with its simulator: every
// chip's buffers are uploaded from its simulator's state, the simulator
// runs the collective (simRun), then the program (worker and ethernet
// kernels, the ethernet ones on each chip's physical channels of the
// build's logical ones: PhysicalChannel) is written to every chip, every
// chip is sent its go messages, and only then is each waited for (the
// chips' kernels signal each other over the links). Each device gets
// its own result; a launch error is "failed" on the device it names.
func (e *Executable) runCollectiveOnChips(i int, results []ProgramResult, record func(d int, status, detail string), simRun func() error) error {
	chips := e.Mesh.chips
	dir, refs, err := e.uploadAndSimulate(i, simRun)
	if err != nil {
		return err
	}
	cfg := e.configs[i]
	t := e.Build.Target
	written := make([]*blackhole.Written, len(chips))
	failAll := func(status, detail string) error {
		for d := range chips {
			record(d, status, detail)
		}
		return nil
	}
	for d, c := range chips {
		if e.Mesh.beforeLaunch != nil {
			e.Mesh.beforeLaunch(results[d])
		}
		phys := func(ch int) (int, error) { return PhysicalChannel(t, d, ch) }
		w, err := c.WriteProgram(dir, cfg, refs[d], phys)
		if status, detail, ok := launchStatus(err); !ok {
			return failAll(status, chipErr(len(chips), d, errors.New(detail)).Error())
		}
		written[d] = w
	}
	for d, w := range written {
		if err := w.Go(); err != nil {
			return failAll("failed", chipErr(len(chips), d, err).Error())
		}
	}
	waitErr := make([]error, len(chips))
	for d, w := range written {
		waitErr[d] = w.Wait()
	}
	for d, c := range chips {
		if waitErr[d] != nil {
			record(d, "failed", waitErr[d].Error())
			continue
		}
		status, detail, err := e.compareOnChip(i, results[d], cfg, c, refs[d], e.Mesh.devices[d])
		if err != nil {
			return chipErr(len(chips), d, err)
		}
		record(d, status, detail)
	}
	return nil
}
