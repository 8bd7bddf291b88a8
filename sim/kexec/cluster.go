package kexec

import (
	"fmt"
	"sort"
	"strings"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/sim/interp"
)

// EthEnd is one end of an ethernet cable: an ethernet channel of a device.
type EthEnd = interp.EthEnd

// Link is an ethernet cable between two ethernet cores of different
// devices. Links are full duplex: either end may send.
type Link = interp.Link

// RingLinks cables n devices as a ring (interp.RingLinks).
func RingLinks(n int, east, west []int) []Link { return interp.RingLinks(n, east, west) }

// TargetLinks are the links of t's topology on a row of n devices
// (interp.TargetLinks).
func TargetLinks(t *target.Target, n int) ([]Link, error) { return interp.TargetLinks(t, n) }

// LineLinks cables n devices as a line (interp.LineLinks).
func LineLinks(n int, east, west []int) []Link { return interp.LineLinks(n, east, west) }

// Cluster is a set of simulated devices joined by ethernet links: a mesh
// of cards. Programs run on it as one mesh workload (Run): the kernels of
// every device are scheduled together, ethernet transfers and remote
// semaphores are carried between the devices, and a deadlock is detected
// across devices.
type Cluster struct {
	T       *target.Target
	Devices []*Device
	links   []Link
	peers   map[EthEnd]EthEnd
}

// NewCluster returns n empty devices of t cabled by links. Every link must
// join two different devices through existing ethernet channels, and no
// channel may carry two cables.
func NewCluster(t *target.Target, n int, links []Link) (*Cluster, error) {
	if t == nil || n < 1 {
		return nil, fmt.Errorf("kexec: a cluster needs a target and at least one device (got %d)", n)
	}
	devs := make([]*Device, n)
	for i := range devs {
		devs[i] = NewDevice(t)
	}
	return NewClusterOf(devs, links)
}

// NewClusterOf cables existing devices (device i of the cluster is devs[i];
// all must share one target) and returns the cluster. Their memory and
// buffers are used as they are, so a runtime can run one program on a
// device alone and the next one as a mesh workload on the same devices.
func NewClusterOf(devs []*Device, links []Link) (*Cluster, error) {
	n := len(devs)
	if n < 1 || devs[0] == nil {
		return nil, fmt.Errorf("kexec: a cluster needs at least one device")
	}
	t := devs[0].T
	for i, d := range devs {
		if d == nil || d.T != t {
			return nil, fmt.Errorf("kexec: device %d of the cluster is nil or has another target than device 0", i)
		}
	}
	if t.Eth == nil && len(links) > 0 {
		return nil, fmt.Errorf("kexec: target %s has no ethernet cores to cable", t.Name)
	}
	c := &Cluster{T: t, Devices: append([]*Device(nil), devs...), links: append([]Link(nil), links...), peers: map[EthEnd]EthEnd{}}
	for _, l := range links {
		for _, e := range []EthEnd{l.A, l.B} {
			if e.Device < 0 || e.Device >= n || !t.InEth(e.Channel) {
				return nil, fmt.Errorf("kexec: link %s <-> %s: %s does not exist (%d devices, %d ethernet channels)", l.A, l.B, e, n, t.Eth.Cores)
			}
			if other, dup := c.peers[e]; dup {
				return nil, fmt.Errorf("kexec: link %s <-> %s: %s is already cabled to %s", l.A, l.B, e, other)
			}
		}
		if l.A.Device == l.B.Device {
			return nil, fmt.Errorf("kexec: link %s <-> %s joins a device to itself", l.A, l.B)
		}
		c.peers[l.A] = l.B
		c.peers[l.B] = l.A
	}
	return c, nil
}

// Links returns the cables, in the order given to NewCluster.
func (c *Cluster) Links() []Link { return append([]Link(nil), c.links...) }

// Peer returns the ethernet core cabled to e.
func (c *Cluster) Peer(e EthEnd) (EthEnd, bool) { p, ok := c.peers[e]; return p, ok }

// meshRun is what the runs of one Cluster.Run share.
type meshRun struct {
	devices []*Device
	peers   map[EthEnd]EthEnd
}

// Run executes progs[d] on device d, all devices at once, and returns the
// statistics of each device. len(progs) must equal the number of devices;
// a program whose kernels differ per device only through kir.DeviceID
// values may be passed for every device. Each program is loaded as by
// Device.Run (its buffers must be allocated on its device; opt.Binding
// applies to all), DeviceID resolves to the device index, the bytes_sent
// word of every ethernet core starts at 0, and the kernels of all devices
// are scheduled round-robin in device order (opt.StepLimit bounds the
// steps of all devices together).
//
// Errors: a *DeadlockError whose Blocked entries name device, core, kernel
// and what each waits for (a CB, a semaphore, or an ethernet transfer from
// a named device and channel) when every unfinished kernel on every device
// is blocked; a *StepLimitError; or a load or rule error prefixed with
// "device d:" (errors.As still finds a *kir.RuleError).
func (c *Cluster) Run(progs []*kir.Program, opt RunOptions) ([]*Stats, error) {
	if len(progs) != len(c.Devices) {
		return nil, fmt.Errorf("kexec: a mesh run needs one program per device: %d programs for %d devices", len(progs), len(c.Devices))
	}
	if opt.StepLimit <= 0 {
		opt.StepLimit = DefaultStepLimit
	}
	if opt.Quantum <= 0 {
		opt.Quantum = DefaultQuantum
	}
	m := &meshRun{devices: c.Devices, peers: c.peers}
	for _, d := range c.Devices {
		for _, e := range d.ethCores {
			if e != nil {
				e.bytesSent = [kir.EthHandshakeChannels]uint32{}
			}
		}
	}
	runs := make([]*run, len(progs))
	var names []string
	seen := map[string]bool{}
	for i, p := range progs {
		if p == nil {
			return nil, fmt.Errorf("kexec: device %d: nil program", i)
		}
		for j, k := range p.Kernels {
			if k == nil {
				return nil, fmt.Errorf("kexec: device %d: program %q: kernel %d is nil", i, p.Name, j)
			}
		}
		d := c.Devices[i]
		r := &run{d: d, p: p, t: d.T, opt: opt, bufAddr: map[string]uint32{}, bufDev: map[string]*DeviceBuffer{},
			cores: map[kir.Core]*coreState{}, dev: i, mesh: m}
		if err := r.load(); err != nil {
			return nil, fmt.Errorf("device %d: %w", i, err)
		}
		runs[i] = r
		if !seen[p.Name] {
			seen[p.Name] = true
			names = append(names, p.Name)
		}
	}
	sort.Strings(names)
	err := scheduleRuns(runs, strings.Join(names, ","), true)
	stats := make([]*Stats, len(runs))
	for i, r := range runs {
		s := r.stats
		stats[i] = &s
	}
	return stats, err
}

// RunAll runs p on every device (Run with p repeated).
func (c *Cluster) RunAll(p *kir.Program, opt RunOptions) ([]*Stats, error) {
	ps := make([]*kir.Program, len(c.Devices))
	for i := range ps {
		ps[i] = p
	}
	return c.Run(ps, opt)
}
