package timing

import (
	"fmt"
	"math"
	"slices"

	"github.com/tcc-dev/tcc/codegen/target"
)

// Position fast-forward.
//
// A program that reads the step's position (a flash prefill attention
// over the KV cache up to the chunk's end) runs loops whose trip counts
// grow with the position: one more K/V block per 32 positions, the same
// statements, the same reads, the same CB and semaphore traffic as the
// block before it. At the last position of a 131,072-token cache such a
// program runs more kernel instructions than one simulation may
// (DefaultStepLimit) and takes minutes. The Predictor then simulates the
// program in full at two smaller positions lo < hi of the same residue
// modulo extrapolatePeriod (so the last, partial blocks of every loop are
// the same) and advances the rest in one step: every device's time and
// byte counts are those at hi plus (P - hi) / (hi - lo) times their growth
// from lo to hi. Where the iterations that the extra positions add are
// identical (the steady state: each adds the same duration), this is the
// simulation's own result; the tests bound the difference on programs
// small enough to simulate in full (extrapolate_test.go; the flash
// prefill attention of the small config, cmd/tcc/cli).
//
// Whether a simulation at P would be too long is itself derived from the
// kernels: the Predictor first simulates the program at the probe
// positions r + Q and r + 2Q (Q = extrapolatePeriod, r = P mod Q), takes
// the instructions each position adds, and extrapolates only when the
// estimate at P exceeds the budget (SetBudget; DefaultSimulateBudget). hi
// is then the largest position of that residue whose estimate fits the
// budget, lo about half of it, so both lie in the steady state of long
// loops, and every position past the budget shares them.

// extrapolatePeriod is Q above: positions simulated for a fast-forward
// differ from the predicted one by multiples of it, a multiple of every
// K/V block and chunk length the kernels use (tiles of 32 up to 1,024
// positions) and of the period of how their work falls on the cores: the
// full model's 2,048-token prefill attention grows by 1,851.6 and 1,975.1
// us in turn per 2,048 positions (simulated at 2,048 ... 14,336), so
// positions 1,024 apart left its fast-forward 0.64% off; 4,096 apart it is
// the full simulation's (TestFastForwardFullWidthPrefill, TCC_LONG).
const extrapolatePeriod = 4096

// DefaultSimulateBudget is the most kernel instructions a Predictor lets
// one program's simulation at one position be estimated to take before it
// fast-forwards it (about 5 s of CPU).
const DefaultSimulateBudget = 100_000_000

// SetBudget sets the instruction budget of one program's simulation at one
// position (0: DefaultSimulateBudget; negative: never fast-forward, every
// program simulated in full).
func (pr *Predictor) SetBudget(n int64) { pr.budget = n }

// Extrapolated is the number of program times the Predictor fast-forwarded
// (each computed from two full simulations at smaller positions).
func (pr *Predictor) Extrapolated() int { return pr.extrapolated }

// positionOnly reports whether every known word of contents is the step's
// position: the position buffers fromcodegen.BuildAt fills for a step
// whose users all start at st.Pos.
func positionOnly(contents map[string][]uint32, st *Step) bool {
	if st == nil || st.Users != nil || len(contents) == 0 {
		return false
	}
	for _, ws := range contents {
		for _, w := range ws {
			if w != uint32(st.Pos) {
				return false
			}
		}
	}
	return true
}

// programKey is the cache key of program p run on n devices of t with the
// known contents of b's buffers (known, by name), and the contents the
// program reads.
func programKey(p Program, t *target.Target, n int, sig string, known map[string][]uint32) (string, map[string][]uint32) {
	key, contents := fmt.Sprintf("%s %d %s", t.Name, n, sig), map[string][]uint32(nil)
	for j, pb := range p.Kernel.Buffers {
		if w, ok := known[pb.Name]; ok {
			if contents == nil {
				contents = map[string][]uint32{}
			}
			contents[pb.Name] = w
			key += fmt.Sprintf(" %d:%v", j, w)
		}
	}
	return key, contents
}

// timeProgram is program p's time on n devices with the known contents
// known: cached, simulated, or, for a program reading only the position
// whose simulation at st.Pos is estimated past the budget, fast-forwarded
// from two simulations at smaller positions.
func (pr *Predictor) timeProgram(p Program, t *target.Target, n int, sig string, known map[string][]uint32, st *Step) (string, *ProgramTime, error) {
	key, contents := programKey(p, t, n, sig, known)
	if pt, ok := pr.cache[key]; ok {
		return key, pt, nil
	}
	at := func(pos int) (*ProgramTime, error) {
		moved := map[string][]uint32{}
		for name, ws := range known {
			if _, ok := contents[name]; ok {
				moved[name] = slices.Repeat([]uint32{uint32(pos)}, len(ws))
			} else {
				moved[name] = ws
			}
		}
		k, c := programKey(p, t, n, sig, moved)
		if pt, ok := pr.cache[k]; ok {
			return pt, nil
		}
		pt, err := Simulate(p.Kernel, t, pr.prm, Options{Devices: n, Contents: c})
		if err != nil {
			return nil, err
		}
		pr.cache[k] = pt
		pr.simulated++
		return pt, nil
	}
	budget := pr.budget
	if budget == 0 {
		budget = DefaultSimulateBudget
	}
	P, Q := 0, extrapolatePeriod
	if st != nil {
		P = st.Pos
	}
	if budget < 0 || !positionOnly(contents, st) || P < 3*Q {
		pt, err := at(P)
		return key, pt, err
	}
	r := P % Q
	a, c := r+Q, r+2*Q
	ta, err := at(a)
	if err != nil {
		return "", nil, err
	}
	tc, err := at(c)
	if err != nil {
		return "", nil, err
	}
	slope := float64(tc.Steps-ta.Steps) / float64(Q) // instructions per position
	est := float64(tc.Steps) + slope*float64(P-c)
	if est <= float64(budget) {
		pt, err := at(P)
		return key, pt, err
	}
	// hi: the largest position r + kQ (k >= 2) whose estimate fits; lo
	// about half of it.
	k := 2
	if slope > 0 {
		k += int(math.Floor((float64(budget) - float64(tc.Steps)) / (slope * float64(Q))))
	}
	hi := min(r+max(k, 2)*Q, P-Q)
	lo := r + max((hi-r)/Q/2, 1)*Q
	if lo >= hi {
		lo = hi - Q
	}
	tlo, err := at(lo)
	if err != nil {
		return "", nil, err
	}
	thi, err := at(hi)
	if err != nil {
		return "", nil, err
	}
	pt := fastForward(tlo, thi, lo, hi, P)
	pt.Steps = int64(est)
	pr.cache[key] = pt
	pr.extrapolated++
	return key, pt, nil
}

// fastForward is the program's time at position p from its simulations
// lo and hi at positions plo < phi: per device, its time, bytes and
// threads' finishes at phi plus (p - phi) / (phi - plo) times their growth
// from plo (the steady state's growth per position, continued). The
// threads' waits and busy times are hi's. From records plo and phi.
func fastForward(lo, hi *ProgramTime, plo, phi, p int) *ProgramTime {
	f := float64(p-phi) / float64(phi-plo)
	ext := func(a, b float64) float64 { return b + f*(b-a) }
	exti := func(a, b int64) int64 { return int64(math.Round(ext(float64(a), float64(b)))) }
	out := &ProgramTime{Program: hi.Program, From: []int{plo, phi}}
	for d, dh := range hi.Devices {
		dl := lo.Devices[min(d, len(lo.Devices)-1)]
		dt := dh
		dt.US = ext(dl.US, dh.US)
		dt.BytesRead, dt.BytesWritten = exti(dl.BytesRead, dh.BytesRead), exti(dl.BytesWritten, dh.BytesWritten)
		dt.DRAMRead, dt.DRAMWritten = exti(dl.DRAMRead, dh.DRAMRead), exti(dl.DRAMWritten, dh.DRAMWritten)
		dt.EthSent = exti(dl.EthSent, dh.EthSent)
		shift := dt.US - dh.US
		dt.Critical.FinishUS += shift
		dt.Kernels = slices.Clone(dh.Kernels)
		for i := range dt.Kernels {
			grow := shift
			if i < len(dl.Kernels) && dl.Kernels[i].Kernel == dt.Kernels[i].Kernel {
				grow = ext(dl.Kernels[i].FinishUS, dh.Kernels[i].FinishUS) - dh.Kernels[i].FinishUS
			}
			dt.Kernels[i].FinishUS += grow
		}
		out.Devices = append(out.Devices, dt)
	}
	return out
}
