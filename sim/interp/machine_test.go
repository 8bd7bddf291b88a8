package interp

import (
	"fmt"
	"testing"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
)

// state is the test machine's per-thread state: a log of the calls it
// ran (name and operand values), an L1 of words and the waits.
type state struct {
	log   []string
	mem   map[uint64]uint64
	waits []Wait
}

// logger is a machine that logs every instruction.
type logger struct{}

func (logger) Instruction(_ *Compiler[*state], s kir.Stmt) (Op[*state], error) {
	name := kir.APIName(s)
	if name == "" {
		name = "l1_store"
	}
	return func(t *Thread[*state], v []uint64) (bool, error) {
		t.S.log = append(t.S.log, fmt.Sprint(name, v))
		if name == "l1_store" {
			t.S.mem[v[0]] = v[1]
		}
		return false, nil
	}, nil
}

func (logger) ReadL1(t *Thread[*state], addr uint64, _ string) uint64 { return t.S.mem[addr] }

func (logger) Block(t *Thread[*state], w Wait) { t.S.waits = append(t.S.waits, w) }

var bh = target.Blackhole()

func testConfig() *Config {
	return &Config{Target: bh, SemaphoreBase: 0x1000, EthSemaphoreBase: 0x2000, ScalarCycles: 1}
}

// testCore is worker (1,2) with CB c_0 of 4 pages of 2048 bytes at 0x10000
// and semaphore 3.
func testCore(t *testing.T) *Core {
	t.Helper()
	c := &Core{C: kir.Core{X: 1, Y: 2}, NX: 2, NY: 3, CBs: make([]*CB, bh.MaxCBs), SemBase: 0x1000}
	if _, f := c.AddCB(&kir.CB{Index: 0, PageSize: 2048, Pages: 4, Format: ir.BF16}, 0x10000); f != nil {
		t.Fatal(f)
	}
	c.AddSemaphore(3)
	return c
}

// runKernel compiles k and runs it on core until it finishes, blocks or
// fails (at most 10,000 steps); it returns the thread and the last status
// (0 when it finished).
func runKernel(t *testing.T, k *kir.Kernel, core *Core, mem map[uint64]uint64) (*Thread[*state], int) {
	t.Helper()
	code, err := Compile(k, testConfig(), Machine[*state](logger{}))
	if err != nil {
		t.Fatal(err)
	}
	args, err := ResolveArgs(k, core.C, nil)
	if err != nil {
		t.Fatal(err)
	}
	if mem == nil {
		mem = map[uint64]uint64{}
	}
	th := &Thread[*state]{}
	th.Start(code, core, args, &state{mem: mem})
	for i := 0; i < 10000 && !th.Done(); i++ {
		if st := th.Step(); st < 0 {
			return th, st
		}
	}
	return th, 0
}

func reader(body func(b *kir.Builder)) *kir.Kernel {
	k := &kir.Kernel{Name: "k", Role: kir.RoleReader}
	body(k.Builder())
	return k
}

// silent is a machine with no op for any instruction.
type silent struct{ logger }

func (silent) Instruction(*Compiler[*state], kir.Stmt) (Op[*state], error) { return nil, nil }
