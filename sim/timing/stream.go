package timing

import (
	"fmt"
	"sync"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
)

// dramStream describes a DRAM read microbenchmark: Cores worker cores each
// read Blocks blocks of InFlight requests of Size bytes (one barrier per
// block), on NoC 1 or, with BothNoCs, half the blocks by a second reader
// on NoC 0. Interleaved requests walk all banks (request i of a core to
// bank (i + core) mod 8); BankLocal requests all go to the bank the core
// is assigned (core mod 8).
type dramStream struct {
	Size, Cores, InFlight, Blocks int
	BothNoCs, BankLocal           bool
}

// program builds the stream. Cores must be a positive multiple of the
// grid width.
func (s dramStream) program(t *target.Target) *kir.Program {
	p := kir.NewProgram(fmt.Sprintf("dram_%dB", s.Size))
	pages := s.Cores * s.InFlight * s.Blocks
	buf := p.AddBuffer(kir.Buffer{Name: "w", Mem: ir.MemoryConfig{Kind: ir.DRAMInterleaved}, DType: ir.BF16, Layout: ir.RowMajorLayout, PageSize: s.Size, Pages: pages})
	rs := []ir.CoreRange{{X0: 0, Y0: 0, X1: t.GridX - 1, Y1: s.Cores/t.GridX - 1}}
	readers := []int{1}
	if s.BothNoCs {
		readers = []int{1, 0}
	}
	for _, noc := range readers {
		proc := kir.RISCV1
		if noc == 0 {
			proc = kir.RISCV0
		}
		k := p.AddKernel(&kir.Kernel{Name: fmt.Sprintf("reader%d", noc), Role: kir.RoleReader, Processor: proc, NoC: noc, Cores: rs})
		core := k.RuntimeArg("core")
		base := k.CommonArg("w", kir.BufferAddr(buf, 0))
		b := k.Builder()
		l1 := kir.C(0x40000) // a scratch area: the data is not used
		b.For("blk", kir.C(0), kir.Ci(s.Blocks/len(readers)), func(blk kir.Var) {
			b.For("i", kir.C(0), kir.Ci(s.InFlight), func(i kir.Var) {
				bank := kir.Expr(kir.Mod(kir.Add(i, core), kir.Ci(t.DRAMBanks)))
				if s.BankLocal {
					bank = kir.Mod(core, kir.Ci(t.DRAMBanks))
				}
				off := kir.Add(base, kir.Mul(kir.Add(kir.Mul(blk, kir.Ci(s.InFlight)), i), kir.Ci(s.Size)))
				b.NoCAsyncRead(kir.DRAMBankAddr{Bank: bank, Offset: off}, kir.Add(l1, kir.Mul(i, kir.Ci(s.Size))), kir.Ci(s.Size))
			})
			b.NoCAsyncReadBarrier()
		})
		for i, c := range kir.CoresOf(rs) {
			k.SetRuntimeArgs(c, kir.U32(uint32(i)))
		}
	}
	return p
}

// rate is the stream's steady read rate in bytes per second: the bytes of
// Blocks more blocks over the time they add (which cancels the fixed
// per-program cost and the ramp-up).
func (s dramStream) rate(t *target.Target, prm *Params) (float64, error) {
	if s.Cores <= 0 || s.Cores%t.GridX != 0 || s.Cores > t.NumWorkers() {
		return 0, fmt.Errorf("timing: a DRAM stream on %d cores: want a multiple of the grid width %d up to %d", s.Cores, t.GridX, t.NumWorkers())
	}
	us := func(s dramStream) (float64, error) {
		pt, err := Simulate(s.program(t), t, prm, Options{})
		if err != nil {
			return 0, err
		}
		return pt.US(), nil
	}
	long := s
	long.Blocks *= 2
	a, err := us(s)
	if err != nil {
		return 0, err
	}
	b, err := us(long)
	if err != nil {
		return 0, err
	}
	bytes := float64(s.Size * s.Cores * s.InFlight * s.Blocks)
	return bytes / ((b - a) * 1e-6), nil
}

// bestStream is the best DRAM stream the model knows: 16 KB reads, each
// reader two in flight from one bank, eleven readers per bank
// (88 cores on Blackhole's 11-wide grid).
var bestStream = dramStream{Size: 16384, Cores: 88, InFlight: 2, Blocks: 8, BankLocal: true}

var streamRates sync.Map // Params value -> bytes per second

// StreamBytesPerSecond is the rate the model predicts for the best DRAM
// stream on t (bestStream): the bandwidth of the stream floor. It is
// computed once per parameter set.
func (p *Params) StreamBytesPerSecond(t *target.Target) (float64, error) {
	key := fmt.Sprintf("%s %v", t.Name, p.Table())
	if r, ok := streamRates.Load(key); ok {
		return r.(float64), nil
	}
	s := bestStream
	if s.Cores > t.NumWorkers() || s.Cores%t.GridX != 0 {
		s.Cores = t.NumWorkers() / t.GridX * t.GridX
	}
	r, err := s.rate(t, p)
	if err != nil {
		return 0, err
	}
	streamRates.Store(key, r)
	return r, nil
}
