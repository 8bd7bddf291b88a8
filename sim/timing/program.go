package timing

import (
	"errors"
	"fmt"
	"sort"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/sim/interp"
)

// ThreadTime is what one kernel did on one core.
type ThreadTime struct {
	Device int
	Core   kir.Core
	Kernel string
	Role   kir.Role
	// FinishUS is when the thread finished, from the program's start
	// (kernel time only, without the fixed program cost).
	FinishUS float64
	// Waits are the microseconds the thread stalled, by what it waited on
	// (a CB call and index, a NoC barrier, a semaphore, an ethernet word).
	Waits map[string]float64
	// Busy are the microseconds it spent executing, by instruction (the
	// tt-metal call, "scalar" for control statements and address
	// arithmetic, "l1_store" for L1 word stores).
	Busy map[string]float64
}

// TopWait is the call the thread stalled on longest and for how long ("" when it never stalled).
func (t ThreadTime) TopWait() (string, float64) {
	best, us := "", 0.0
	keys := make([]string, 0, len(t.Waits))
	for k := range t.Waits {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if t.Waits[k] > us {
			best, us = k, t.Waits[k]
		}
	}
	return best, us
}

// DeviceTime is one device's share of a program.
type DeviceTime struct {
	// US is the program's predicted device kernel duration on this device:
	// its latest core's finish plus the fixed per-program cost.
	US float64
	// Critical is the thread that finished last.
	Critical ThreadTime
	// Kernels holds, per kernel of the program (in the order the kernels
	// first ran), the latest-finishing thread of that kernel.
	Kernels []ThreadTime
	// Cores is the number of cores that ran a kernel.
	Cores int
	// BytesRead and BytesWritten are the NoC bytes moved by the device's
	// kernels; DRAMRead and DRAMWritten the DRAM part; EthSent the bytes
	// sent over ethernet.
	BytesRead, BytesWritten, DRAMRead, DRAMWritten, EthSent int64
	// LinkBytes is the most bytes one ethernet core sent (eth_send_bytes:
	// one direction of one link) and LinkFloorUS that many bytes at the
	// link rate (Params.EthBytesPerCycle): the program's link floor.
	LinkBytes   int64
	LinkFloorUS float64
	// Phases are a persistent program's phase spans (nil otherwise).
	Phases []PhaseSpan
}

// ProgramTime is the predicted time of one program on every device it ran on.
type ProgramTime struct {
	Program string
	Devices []DeviceTime
	// Steps is the number of kernel-IR instructions the model executed
	// (fast-forwarded: the estimate at the position).
	Steps int64
	// From, when set, are the two positions the time was fast-forwarded
	// from (Predictor, extrapolate.go); nil: simulated.
	From []int
}

// US is the slowest device's time.
func (pt *ProgramTime) US() float64 {
	us := 0.0
	for _, d := range pt.Devices {
		us = max(us, d.US)
	}
	return us
}

// Options control Simulate.
type Options struct {
	// Devices is the number of devices the program runs on at once (a mesh
	// row cabled as the target's canonical ring); 0 means 1.
	Devices int
	// StepLimit bounds the instructions executed (0: DefaultStepLimit).
	StepLimit int64
	// Contents are the known contents of small DRAM buffers of the
	// program, by buffer name (the position buffer: the step's position):
	// the 32-bit words of the buffer's data, its pages laid end to end
	// (word i is bytes 4i..4i+3; words past the slice read 0). A NoC read
	// from such a buffer puts the words it covers into the destination
	// L1 words of its core when it completes, so an L1 load (L1Read32) or
	// a compute-side read of that CB page sees them, and a NoC read or
	// write that copies those L1 words to another core carries them
	// along. Every other L1 word that no semaphore or store set reads as
	// 0: data is not modelled. The buffer must be DRAM interleaved, not
	// placed in blocks, with pages of a multiple of 4 bytes.
	Contents map[string][]uint32
}

// IsMesh reports whether p has kernels on ethernet cores, so it must be
// timed on every device of a mesh row at once.
func IsMesh(p *kir.Program) bool {
	for _, k := range p.Kernels {
		if k != nil && k.OnEth() {
			return true
		}
	}
	return false
}

// Simulate predicts p's device time on target t with parameters prm: every
// core's kernels run their statements as events (NoC transactions in
// flight until a barrier, CB flow between threads, semaphores, ethernet
// handshakes, compute by instruction kind), bounded by the shared DRAM
// banks, NoC ports and ethernet links. The program's time on a device is
// its latest core's finish plus prm.FixedProgramUS. Simulate does not check
// the hardware rules about data (kir.Validate and sim/kexec do); it fails
// on a program it cannot follow: a deadlock, an unknown statement, a bad
// address, a CB call or semaphore the interpreter core's books refuse.
func Simulate(p *kir.Program, t *target.Target, prm *Params, opt Options) (*ProgramTime, error) {
	if p == nil || t == nil || prm == nil {
		return nil, errors.New("timing: Simulate needs a program, a target and parameters")
	}
	n := max(opt.Devices, 1)
	m := &machine{p: prm, t: t, prog: p, peers: map[ethEnd]ethEnd{}, limit: opt.StepLimit, contents: opt.Contents}
	if m.limit <= 0 {
		m.limit = DefaultStepLimit
	}
	if n > 1 {
		if t.Eth == nil {
			return nil, fmt.Errorf("program %q: target %s has no ethernet cores for a %d-device run", p.Name, t.Name, n)
		}
		links, err := interp.TargetLinks(t, n)
		if err != nil {
			return nil, fmt.Errorf("program %q: %w", p.Name, err)
		}
		for _, l := range links {
			a, b := ethEnd{l.A.Device, l.A.Channel}, ethEnd{l.B.Device, l.B.Channel}
			m.peers[a], m.peers[b] = b, a
		}
	}
	if err := m.load(n); err != nil {
		return nil, err
	}
	if err := m.run(); err != nil {
		return nil, err
	}
	pt := &ProgramTime{Program: p.Name, Steps: m.steps}
	for d := 0; d < n; d++ {
		dt := DeviceTime{}
		cores := map[kir.Core]bool{}
		kernels := map[string]int{}
		var last *thread
		perLink := map[kir.Core]int64{}
		for _, th := range m.threads {
			if th.core.dev.idx != d {
				continue
			}
			cores[th.core.C] = true
			tt := threadTime(th, prm)
			if tt.FinishUS > dt.Critical.FinishUS || dt.Critical.Kernel == "" {
				dt.Critical = tt
				last = th
			}
			if i, ok := kernels[th.k.Name]; !ok {
				kernels[th.k.Name] = len(dt.Kernels)
				dt.Kernels = append(dt.Kernels, tt)
			} else if tt.FinishUS > dt.Kernels[i].FinishUS {
				dt.Kernels[i] = tt
			}
			dt.BytesRead += th.bytesRead
			dt.BytesWritten += th.bytesWritten
			dt.DRAMRead += th.dramRead
			dt.DRAMWritten += th.dramWritten
			dt.EthSent += th.ethSent
			if th.core.Eth {
				perLink[th.core.C] += th.ethSent
				dt.LinkBytes = max(dt.LinkBytes, perLink[th.core.C])
			}
		}
		dt.LinkFloorUS = prm.cyclesToUS(float64(dt.LinkBytes) / prm.EthBytesPerCycle)
		// The program ends with its last thread; Critical then names the
		// thread that held it up (which may have finished earlier).
		dt.US = dt.Critical.FinishUS + prm.FixedProgramUS
		if b := bottleneck(last); b != nil && b != last {
			dt.Critical = threadTime(b, prm)
		}
		dt.Cores = len(cores)
		dt.Phases = m.devs[d].phases
		pt.Devices = append(pt.Devices, dt)
	}
	return pt, nil
}

func threadTime(th *thread, prm *Params) ThreadTime {
	tt := ThreadTime{Device: th.core.dev.idx, Core: th.core.C, Kernel: th.k.Name, Role: th.k.Role, FinishUS: prm.cyclesToUS(th.Clock),
		Waits: map[string]float64{}, Busy: map[string]float64{}}
	for k, v := range th.waits {
		tt.Waits[k] = prm.cyclesToUS(v)
	}
	for pc, c := range th.busy {
		if c > 0 {
			tt.Busy[th.labels[pc]] += prm.cyclesToUS(c)
		}
	}
	return tt
}

// bottleneck follows the last-finishing thread's longest CB stall to the
// thread on the same core that fed (or drained) that CB, until a thread's
// longest stall is not on a local CB: the thread that set the pace.
func bottleneck(th *thread) *thread {
	seen := map[*thread]bool{}
	for th != nil && !seen[th] {
		seen[th] = true
		best, top := "", 0.0
		for k, v := range th.waits {
			if v > top || (v == top && k < best) {
				best, top = k, v
			}
		}
		var idx int
		var next *thread
		if _, err := fmt.Sscanf(best, "cb_wait_front c_%d", &idx); err == nil {
			if th.core.CB(idx) != nil {
				next = th.core.q[idx].producer
			}
		} else if _, err := fmt.Sscanf(best, "cb_reserve_back c_%d", &idx); err == nil {
			if th.core.CB(idx) != nil {
				next = th.core.q[idx].consumer
			}
		}
		if next == nil || next == th {
			return th
		}
		th = next
	}
	return th
}
