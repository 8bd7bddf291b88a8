package runtime

import (
	"bytes"
	"errors"
	"fmt"
	goruntime "runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/tcc-dev/tcc/codegen"
	"github.com/tcc-dev/tcc/codegen/hostcfg"
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/persist"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/ir/longtest"
	"github.com/tcc-dev/tcc/models"
	"github.com/tcc-dev/tcc/models/qwen27b"
	"github.com/tcc-dev/tcc/models/tinymlp"
	"github.com/tcc-dev/tcc/passes"
	"github.com/tcc-dev/tcc/runtime/blackhole"
	"github.com/tcc-dev/tcc/runtime/blackhole/access/fake"
	"github.com/tcc-dev/tcc/runtime/blackhole/firmware/fwtest"
)

// persistBuilder is fakeBuilder that also "builds" a persistent program's
// merged kernels: per processor an image of 40+8*proc bytes (not a
// multiple of 16, so the images' alignment in persist.text shows), filled
// with a byte of the kernel's name and the processor.
type persistBuilder struct{ fakeBuilder }

func (b persistBuilder) PersistentKernel(_ *kir.Program, k *kir.Kernel) (map[int][]byte, error) {
	cfg := &hostcfg.KernelConfig{Name: k.Name, Processor: k.Processor.String()}
	imgs, err := b.Kernel("", nil, cfg)
	if err != nil {
		return nil, err
	}
	h := byte(0)
	for _, ch := range k.Name {
		h = h*31 + byte(ch)
	}
	for proc := range imgs {
		imgs[proc] = bytes.Repeat([]byte{h + byte(proc)}, 40+8*proc)
	}
	return imgs, nil
}

// loopModel is a device-loop model the fake-chip tests run.
type loopModel struct {
	name  string
	m     models.Model
	flags map[string]string
}

var tinyLoop = loopModel{"tiny-mlp", tinymlp.Model{}, map[string]string{"device-loop": "true"}}

// loopExe is a device-loop build loaded on a mesh from the model's weights
// and the loop's first tokens.
type loopExe struct {
	e     *Executable
	g     *ir.Graph
	build *codegen.Build
}

func loadLoop(t testing.TB, lm loopModel, m *Mesh, build *codegen.Build, g *ir.Graph, args models.Args) *loopExe {
	t.Helper()
	e, err := Load(m, build)
	require.NoError(t, err)
	runner := lm.m.(models.Runner)
	envs, err := runner.DeviceEnv(args, g, 1)
	require.NoError(t, err)
	loop, err := runner.(interface {
		LoopState(models.Args, *ir.Graph, [][]int, int) ([]map[*ir.Value][]float32, error)
	}).LoopState(args, g, [][]int{{3}}, 0)
	require.NoError(t, err)
	for _, set := range [][]map[*ir.Value][]float32{envs, loop} {
		for d, env := range set {
			for v, data := range env {
				require.NoError(t, e.UploadTo(d, v, data))
			}
		}
	}
	return &loopExe{e: e, g: g, build: build}
}

// fakeRun is a device-loop model loaded on the fake chip with a
// multi-step persistent program, and the simulator that plays its steps.
type fakeRun struct {
	f      *fake.Chip
	chip   *loopExe
	player *loopExe
	// played holds the tokens the player wrote, per step.
	played [][]float32
}

// newFakeRun compiles lm's device-loop graph, loads it on a fake chip
// (OpenChip) with its multi-step persistent program of steps steps, and
// puts the fake in persistent mode: each step the host rings is played by
// a second, simulator-only executable of the same build running the
// step's programs (Run), whose next tokens the fake writes into the
// chip's history page of the step.
func newFakeRun(t testing.TB, lm loopModel, steps int, timeout time.Duration) *fakeRun {
	t.Helper()
	args, err := models.DefaultArgs(lm.m, lm.flags)
	require.NoError(t, err)
	mesh := ir.Mesh{Rows: 1, Cols: 1}
	g, err := lm.m.Build(args, mesh)
	require.NoError(t, err)
	_, err = passes.Run(g, passes.Options{})
	require.NoError(t, err)
	build, err := codegen.Compile(g, target.Blackhole())
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, fwtest.WriteSet(dir))
	f := fake.New()
	f.Delay = 2000
	cm, err := OpenChip("fake", mesh, ChipOptions{Builder: persistBuilder{fakeBuilder{fwDir: dir}}, Fake: blackhole.Options{Fake: f, Timeout: timeout}})
	require.NoError(t, err)
	t.Cleanup(func() { cm.Close() })
	r := &fakeRun{f: f, chip: loadLoop(t, lm, cm, build, g, args)}
	_, err = r.chip.e.LoadPersistentLoop(steps, g.Outputs[1])
	require.NoError(t, err)
	sm, err := Open("sim", mesh)
	require.NoError(t, err)
	r.player = loadLoop(t, lm, sm, build, g, args)

	p := r.chip.e.persistent
	sim := cm.devices[0]
	ctl, ok := sim.Buffer(r.chip.e.binding[persist.CtlBuffer])
	require.True(t, ok)
	hist, ok := sim.Buffer(r.chip.e.binding[persist.HistoryBuffer])
	require.True(t, ok)
	leader, err := cm.chip.Chip.Worker(p.Persist.Loop.Leader)
	require.NoError(t, err)
	tokens := g.Outputs[1]
	f.SetPersistent(&fake.Persistent{Ctl: ctl.Addr, Proto: *p.Persist.Loop, Leader: fake.XY{X: leader.X, Y: leader.Y}, Steps: steps,
		Step: func(_ *fake.Chip, s int) error {
			if err := r.player.e.Run(); err != nil {
				return err
			}
			next, err := r.player.e.Download(tokens)
			if err != nil {
				return err
			}
			r.played = append(r.played, next)
			tt, err := r.player.e.tensor(tokens)
			if err != nil {
				return err
			}
			page, err := Encode(tt, next)
			if err != nil {
				return err
			}
			return cm.chip.WritePage(placement(hist), s, page)
		}})
	return r
}

// goSignals counts, per core, the go signals the fake saw.
func goSignals(f *fake.Chip) map[fake.XY]int {
	n := map[fake.XY]int{}
	for _, l := range f.Launches {
		n[l.Core]++
	}
	return n
}

// TestPersistentOnFakeChip: the runtime launches the multi-step persistent
// program ONCE on the fake chip (one go signal per core), rings each
// step's doorbell, reads each step's tokens from the chip while the
// launch runs, and stops it; every step's tokens equal the simulator's
// (the persistent loop's history) and the steps the fake played.
func TestPersistentOnFakeChip(t *testing.T) {
	for _, tc := range []struct {
		lm    loopModel
		steps int
		long  bool
	}{
		{tinyLoop, 3, false},
		{loopModel{"qwen27b-small", qwen27b.Model{}, map[string]string{"config": "../models/qwen27b/testdata/small.json", "device-loop": "true"}}, 16, true},
	} {
		t.Run(tc.lm.name, func(t *testing.T) {
			if tc.long {
				longtest.Skip(t, "16 steps of the small qwen27b config on the fake chip, each played by the simulator")
			}
			r := newFakeRun(t, tc.lm, tc.steps, 10*time.Second)
			var seen []int
			run, err := r.chip.e.DrivePersistent(func(cs ChipStep) error {
				// The device has not stopped: no core reported done yet.
				if n := doneCores(r.f); n != 0 {
					return fmt.Errorf("step %d: %d cores finished the launch before the stop", cs.Step, n)
				}
				seen = append(seen, cs.Step)
				return nil
			})
			require.NoError(t, err)
			require.Empty(t, r.f.Errors)
			if run.Launches != 1 || len(run.Steps) != tc.steps {
				t.Fatalf("launches %d, steps %d; want 1 launch of %d steps", run.Launches, len(run.Steps), tc.steps)
			}
			gos := goSignals(r.f)
			if len(gos) == 0 {
				t.Fatal("no core was launched")
			}
			for c, n := range gos {
				if n != 1 {
					t.Errorf("core %v got %d go signals, want 1 (one launch)", c, n)
				}
			}
			var got, sim [][]float32
			for _, s := range run.Steps {
				got, sim = append(got, s.Tokens), append(sim, s.Sim)
				if !s.Match {
					t.Errorf("step %d: chip tokens %v, simulator %v", s.Step, s.Tokens, s.Sim)
				}
			}
			if d := cmp.Diff(r.played, got); d != "" {
				t.Errorf("tokens read from the chip differ from the played steps' (-played +chip):\n%s", d)
			}
			if d := cmp.Diff(sim, got); d != "" {
				t.Errorf("chip tokens differ from the simulator's persistent loop (-sim +chip):\n%s", d)
			}
			if r.f.Played() != tc.steps || doneCores(r.f) != len(gos) {
				t.Errorf("fake played %d steps, %d of %d cores done after the stop; want %d, all", r.f.Played(), doneCores(r.f), len(gos), tc.steps)
			}
			host := hostTotal(run) - r.f.StepTime()
			t.Logf("launches: 1 (%d steps on %d cores); host time per step %v without the fake's play of the steps (%v in all, the play %v)",
				len(run.Steps), len(gos), host/time.Duration(len(run.Steps)), hostTotal(run), r.f.StepTime())
		})
	}
}

func hostTotal(run *PersistentChipRun) time.Duration {
	var d time.Duration
	for _, s := range run.Steps {
		d += s.Host
	}
	return d
}

// doneCores counts the cores whose go message says RUN_MSG_DONE after a
// launch.
func doneCores(f *fake.Chip) int {
	l := target.BlackholeLayout()
	n := 0
	for c := range goSignals(f) {
		if f.L1(c.X, c.Y)[l.Mailbox.Base+uint32(l.Msg.GoMessages)+3] == l.RunMsgDone {
			n++
		}
	}
	return n
}

// TestPersistentStopAndSteps drives a launch step by step through the
// session: a step is not played before its doorbell, the done word
// follows the step after the fake's delay, the cores run until the stop
// and finish after it; stopping before the last step or ringing past it
// is an error.
func TestPersistentStopAndSteps(t *testing.T) {
	r := newFakeRun(t, tinyLoop, 3, 5*time.Second)
	e := r.chip.e
	ref := blackhole.Reference{Mem: simMemory{e.Mesh.devices[0]}, Binding: e.binding}
	names := make([]string, len(e.persistent.Buffers))
	for i, b := range e.persistent.Buffers {
		names[i] = b.Name
	}
	require.NoError(t, e.Mesh.chip.UploadBuffers(names, ref))
	s, err := e.Mesh.chip.LaunchPersistent(e.persistent, ref)
	require.NoError(t, err)
	if r.f.Played() != 0 {
		t.Fatalf("the fake played %d steps before any doorbell", r.f.Played())
	}
	require.NoError(t, s.Ring(1))
	if n, _ := s.Done(); n != 0 || r.f.Played() != 1 {
		t.Errorf("right after the doorbell: done %d, played %d; want 0 (the fake's delay), 1", n, r.f.Played())
	}
	require.NoError(t, s.WaitStep(0))
	if err := s.Stop(); err == nil || !strings.Contains(err.Error(), "stop after 1 of 3 steps") {
		t.Errorf("early stop: %v", err)
	}
	if err := s.Ring(4); err == nil || !strings.Contains(err.Error(), "the launch runs 3 steps") {
		t.Errorf("ringing past the steps: %v", err)
	}
	require.NoError(t, s.Ring(3))
	require.NoError(t, s.WaitStep(2))
	if n := doneCores(r.f); n != 0 {
		t.Fatalf("%d cores finished before the stop", n)
	}
	require.NoError(t, s.Stop())
	if n, all := doneCores(r.f), len(goSignals(r.f)); n != all {
		t.Errorf("%d of %d cores done after the stop", n, all)
	}
	require.Empty(t, r.f.Errors)
}

// TestPersistentWatchdog: a core that stops in a phase makes the step's
// wait fail with the watchdog's report naming the core, its NoC
// coordinate, its data-movement processors and the phase each is in, the
// barriers its RISCs reached, the done words set on it and the stream
// counters of the stalled phase's CBs.
func TestPersistentWatchdog(t *testing.T) {
	r := newFakeRun(t, tinyLoop, 3, 50*time.Millisecond)
	p := r.chip.e.persistent
	phase := 2
	ph := p.Persist.Phases[phase]
	c := ph.Cores[len(ph.Cores)-1]
	at, err := r.chip.e.Mesh.chip.Chip.Worker(c)
	require.NoError(t, err)
	r.f.HangIn(at.X, at.Y, 1, phase, "ncrisc")
	_, err = r.chip.e.DrivePersistent(nil)
	var se *blackhole.PersistentStallError
	if !errors.As(err, &se) {
		t.Fatalf("DrivePersistent: %v, want a *PersistentStallError", err)
	}
	// The stream counters of the stalled phase's CBs on the core, at
	// their merged indices (the fake's registers read zero).
	tables, terr := p.Persist.Tables()
	require.NoError(t, terr)
	var streams []string
	for _, cb := range ph.CBs {
		if kir.InRanges(cb.Cores, c) {
			streams = append(streams, fmt.Sprintf("c_%d (%s, merged %d) received 0 acked 0", cb.Index, cb.Name, tables.CBMap[phase][cb.Index]))
		}
	}
	require.NotEmpty(t, streams)
	want := fmt.Sprintf("persistent program %s: step 1 did not finish within 50ms (watchdog): 1 core(s) stalled:\n  core %s NoC (%d,%d): brisc after phase %d (%s), ncrisc in phase %d (%s); barriers reached: brisc 0, ncrisc 0, trisc0 0, trisc1 0, trisc2 0; done words set: none; CB streams %s",
		p.Name, c, at.X, at.Y, phase-1, p.Persist.Phases[phase-1].Name, phase, ph.Name, strings.Join(streams, ", "))
	if d := cmp.Diff(want, err.Error()); d != "" {
		t.Errorf("watchdog report (-want +got):\n%s", d)
	}
	if r.f.Played() != 1 {
		t.Errorf("the fake played %d steps; want 1 (step 1 hangs)", r.f.Played())
	}
}

// BenchmarkPersistentStep measures the host's side of one step of a
// persistent launch on the fake chip: the doorbell write, the done-word
// poll and the read of the step's token page (Session.Ring, WaitStep,
// ReadHistory). The fake plays no simulation (its Step hook is nil) and
// reports done without delay, so one poll finds the step done; what it
// still does on the doorbell write (the step's finished and done words)
// it times itself (StepTime), and host-ns/step subtracts it from the wall
// time. cpu-ns/step is the benchmark thread's CPU time per step (Linux
// RUSAGE_THREAD; the fake runs on the same thread, so its bookkeeping is
// included), which a loaded machine does not inflate as it does wall
// time. A launch runs 1024 steps; relaunching is not timed.
func BenchmarkPersistentStep(b *testing.B) {
	const steps = 1024
	r := newFakeRun(b, tinyLoop, steps, 10*time.Second)
	e := r.chip.e
	dev := e.Mesh.chip
	ref := blackhole.Reference{Mem: simMemory{e.Mesh.devices[0]}, Binding: e.binding}
	names := make([]string, len(e.persistent.Buffers))
	for i, buf := range e.persistent.Buffers {
		names[i] = buf.Name
	}
	require.NoError(b, dev.UploadBuffers(names, ref))
	r.f.Delay = 0
	base := *r.f.PersistentConfig()
	base.Step = nil
	ht := e.Mesh.tensors[e.binding[persist.HistoryBuffer]]
	page := make([]byte, ht.PageSize)
	var s *blackhole.Session
	var fake0, fakeTime time.Duration // the fake's time while timed
	goruntime.LockOSThread()
	defer goruntime.UnlockOSThread()
	var cpu0, cpuTime time.Duration
	cpuOK := true
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		step := i % steps
		if step == 0 {
			b.StopTimer()
			fakeTime += r.f.StepTime() - fake0
			if c, ok := threadCPU(); ok && i > 0 {
				cpuTime += c - cpu0
			}
			if s != nil {
				require.NoError(b, s.Ring(steps))
				require.NoError(b, s.Stop())
			}
			cfg := base
			r.f.SetPersistent(&cfg)
			var err error
			s, err = dev.LaunchPersistent(e.persistent, ref)
			require.NoError(b, err)
			fake0 = r.f.StepTime()
			cpu0, cpuOK = threadCPU()
			b.StartTimer()
		}
		if err := s.Ring(step + 1); err != nil {
			b.Fatal(err)
		}
		if err := s.WaitStep(step); err != nil {
			b.Fatal(err)
		}
		if err := s.ReadHistory(step, page); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	fakeTime += r.f.StepTime() - fake0
	b.ReportMetric(float64(b.Elapsed()-fakeTime)/float64(b.N), "host-ns/step")
	if c, ok := threadCPU(); ok && cpuOK {
		cpuTime += c - cpu0
		b.ReportMetric(float64(cpuTime)/float64(b.N), "cpu-ns/step")
	}
}
