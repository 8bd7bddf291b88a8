package timing

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/kir/kirtest"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
)

// TestKernelChangeChangesPrediction: the prediction follows the kernel's
// loops: twice the K tiles on the same cores take about twice as long.
func TestKernelChangeChangesPrediction(t *testing.T) {
	tg := target.Blackhole()
	a := predictSpec(t, tg, matmulSpec{Name: "a", Kt: 96, Nt: 160, Cores: 33, Weights: ir.BFP8B, Fidelity: ir.HiFi2})
	b := predictSpec(t, tg, matmulSpec{Name: "b", Kt: 192, Nt: 160, Cores: 33, Weights: ir.BFP8B, Fidelity: ir.HiFi2})
	fixed := Default().FixedProgramUS
	if r := (b - fixed) / (a - fixed); r < 1.8 || r > 2.2 {
		t.Errorf("K 96: %.1f us, K 192: %.1f us; kernel time ratio %.2f, want about 2", a, b, r)
	}
	// A higher fidelity costs time only where compute is the bound: on few cores.
	lo := predictSpec(t, tg, matmulSpec{Name: "lo", Kt: 96, Nt: 32, Cores: 4, Weights: ir.BFP4B, Fidelity: ir.LoFi})
	hi := predictSpec(t, tg, matmulSpec{Name: "hi", Kt: 96, Nt: 32, Cores: 4, Weights: ir.BFP4B, Fidelity: ir.HiFi4})
	if hi <= lo*1.1 {
		t.Errorf("4 cores, bfp4_b: LoFi %.1f us, HiFi4 %.1f us; HiFi4 should be slower", lo, hi)
	}
}

// TestDeadlockIsAnError: a compute kernel waiting for pages nobody pushes
// is reported, naming the kernel and the CB, instead of hanging.
func TestDeadlockIsAnError(t *testing.T) {
	tg := target.Blackhole()
	p := kir.NewProgram("stuck")
	c := kir.Core{}.Range()
	p.AddCB(kir.CB{Index: 0, PageSize: 2048, Pages: 2, Format: ir.BF16, Cores: []ir.CoreRange{c}})
	k := p.AddKernel(&kir.Kernel{Name: "compute", Role: kir.RoleCompute, Processor: kir.ComputeProc, Cores: []ir.CoreRange{c}})
	k.Builder().CBWaitFront(0, kir.C(1))
	_, err := Simulate(p, tg, Default(), Options{})
	if err == nil || !strings.Contains(err.Error(), "deadlocks") || !strings.Contains(err.Error(), "cb_wait_front c_0") {
		t.Fatalf("err = %v, want a deadlock naming cb_wait_front c_0", err)
	}
}

// TestSemaphoreOrdersCores: a core that waits on a semaphore set by
// another core's increment finishes after the increment arrives.
func TestSemaphoreOrdersCores(t *testing.T) {
	tg := target.Blackhole()
	p := kir.NewProgram("sem")
	a, b := kir.Core{X: 0, Y: 0}, kir.Core{X: 5, Y: 5}
	both := []ir.CoreRange{a.Range(), b.Range()}
	p.AddSemaphore(kir.Semaphore{ID: 0, Cores: both})
	busy := p.AddKernel(&kir.Kernel{Name: "busy", Role: kir.RoleReader, Processor: kir.RISCV1, NoC: 1, Cores: []ir.CoreRange{a.Range()}})
	bx, by, _ := tg.WorkerNoC(b.X, b.Y)
	bb := busy.Builder()
	bb.For("i", kir.C(0), kir.C(1000), func(kir.Var) {})
	bb.NoCSemaphoreInc(kir.NoCAddr{X: kir.Ci(bx), Y: kir.Ci(by), Addr: kir.GetSemaphore{ID: kir.C(0)}}, kir.C(1))
	wait := p.AddKernel(&kir.Kernel{Name: "waiter", Role: kir.RoleReader, Processor: kir.RISCV1, NoC: 1, Cores: []ir.CoreRange{b.Range()}})
	wait.Builder().NoCSemaphoreWait(kir.GetSemaphore{ID: kir.C(0)}, kir.C(1))
	pt, err := Simulate(p, tg, Default(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	d := pt.Devices[0]
	if d.Critical.Kernel != "waiter" {
		t.Errorf("critical thread %s, want the waiter", d.Critical.Kernel)
	}
	// 1000 loop iterations at ScalarCycles each, then the increment's trip.
	prm := Default()
	if min := prm.cyclesToUS(1000*prm.ScalarCycles + prm.L1WriteLatency[0]*0.5); d.Critical.FinishUS < min {
		t.Errorf("waiter finished at %.3f us, before the busy loop ends (%.3f us)", d.Critical.FinishUS, min)
	}
	if w := d.Critical.Waits["noc_semaphore_wait"]; w <= 0 {
		t.Errorf("waiter's semaphore stall %.3f us", w)
	}
}

// producerConsumer is a one-core program: the reader spins 1,000
// iterations and pushes one page, the writer waits for it, pops it and
// then runs tail.
func producerConsumer(name string, tail func(wb *kir.Builder)) *kir.Program {
	p := kir.NewProgram(name)
	a := kir.Core{X: 0, Y: 0}
	rs := []ir.CoreRange{a.Range()}
	p.AddCB(kir.CB{Index: 0, PageSize: 2048, Pages: 1, Format: ir.BF16, Cores: rs, Name: "page"})
	rd := p.AddKernel(&kir.Kernel{Name: "producer", Role: kir.RoleReader, Processor: kir.RISCV1, NoC: 1, Cores: rs})
	rb := rd.Builder()
	rb.For("i", kir.C(0), kir.C(1000), func(kir.Var) {})
	rb.CBReserveBack(0, kir.C(1))
	rb.CBPushBack(0, kir.C(1))
	wr := p.AddKernel(&kir.Kernel{Name: "consumer", Role: kir.RoleWriter, Processor: kir.RISCV0, NoC: 0, Cores: rs})
	wb := wr.Builder()
	wb.CBWaitFront(0, kir.C(1))
	wb.CBPopFront(0, kir.C(1))
	tail(wb)
	return p
}

// TestProgramEndsWithLastThread: a thread that finishes after the one
// that held the program up (here: a core that keeps working after its
// stall is over) still counts — the program's time is its last thread's
// finish plus the fixed cost, whichever thread is named critical.
func TestProgramEndsWithLastThread(t *testing.T) {
	p := producerConsumer("tail", func(wb *kir.Builder) {
		wb.For("i", kir.C(0), kir.C(20000), func(kir.Var) {}) // long after its stall
	})
	pt, err := Simulate(p, target.Blackhole(), Default(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	d := pt.Devices[0]
	last := 0.0
	for _, r := range d.Kernels {
		last = max(last, r.FinishUS)
	}
	if want := last + Default().FixedProgramUS; d.US < want-1e-9 {
		t.Errorf("program %.3f us, but its last thread finishes at %.3f us (+ fixed %.3f); critical %s at %.3f", d.US, last, Default().FixedProgramUS, d.Critical.Kernel, d.Critical.FinishUS)
	}
}

// TestBusyByInstruction: a thread's busy profile books each instruction's
// cycles under its name and excludes stalls. The consumer stalls on the
// producer's 1,000-iteration loop, then stores 100 words (after its pop:
// the order does not matter to the profile); the producer's loop is
// scalar time.
func TestBusyByInstruction(t *testing.T) {
	prm := Default()
	p := producerConsumer("busy", func(wb *kir.Builder) {
		for i := 0; i < 100; i++ {
			wb.L1Write32(kir.Ci(0x20000+4*i), kir.C(0))
		}
	})
	pt, err := Simulate(p, target.Blackhole(), prm, Options{})
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]ThreadTime{}
	for _, th := range pt.Devices[0].Kernels {
		byName[th.Kernel] = th
	}
	us := prm.cyclesToUS
	cons, prod := byName["consumer"], byName["producer"]
	assert.InDelta(t, us(100*prm.ScalarCycles), cons.Busy["l1_store"], 1e-9, "100 stores")
	assert.Greater(t, cons.Waits["cb_wait_front c_0"], 0.0, "the consumer stalls first")
	busy := 0.0
	for _, v := range cons.Busy {
		busy += v
	}
	assert.InDelta(t, cons.FinishUS, busy+cons.Waits["cb_wait_front c_0"], 1e-9, "finish = busy + stalls")
	assert.GreaterOrEqual(t, prod.Busy["scalar"], us(1000*prm.ScalarCycles), "the loop is scalar time")
}

// BenchmarkSimulatePingPong times kirtest.PingPong on 8 cores: the timing
// model's control flow, expressions and CB and semaphore bookkeeping.
func BenchmarkSimulatePingPong(b *testing.B) {
	p := kirtest.PingPong(8, 20000)
	for i := 0; i < b.N; i++ {
		if _, err := Simulate(p, target.Blackhole(), Default(), Options{}); err != nil {
			b.Fatal(err)
		}
	}
}
