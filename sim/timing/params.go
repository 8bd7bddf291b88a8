package timing

import (
	"fmt"
	"sort"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/ir/sfpu"
)

// Params are the physical parameters of the cost model. Every value is in
// Tensix cycles at ClockHz or bytes per cycle unless its name says
// otherwise. Table lists each with its unit and source; three are fitted on
// the rows of reference/measured.md (Fitted in the table), the rest are
// fixed from published measurements or the chip description.
type Params struct {
	ClockHz float64

	// LaunchGapUS is the device gap between consecutive programs (traced).
	LaunchGapUS float64
	// FixedProgramUS is the fixed device cost of one program beyond what
	// its kernels do: firmware start, argument and CB setup, completion.
	FixedProgramUS float64

	// LatencySizes are the transfer sizes (bytes) of the latency tables;
	// each table gives the round trip in cycles of one transaction alone
	// (issue to barrier), interpolated linearly between sizes.
	LatencySizes                                                     []float64
	DRAMReadLatency, DRAMWriteLatency, L1ReadLatency, L1WriteLatency []float64
	// NoCHopCycles adjusts a transaction's latency per NoC hop away from
	// LatencyRefHops, the distance the tables were measured at.
	NoCHopCycles, LatencyRefHops float64
	// NoCIssueCycles is the RISC-V time to issue one NoC command.
	NoCIssueCycles float64
	// NoCLinkBytesPerCycle is the sustained rate of one core's NoC port
	// (each direction).
	NoCLinkBytesPerCycle float64
	// DRAMBankBytesPerCycle is the data rate of one DRAM bank (channel):
	// the physical 512 GB/s per card over its 8 banks. DRAMEfficiency is
	// the fraction of it the best measured stream reaches (refresh and
	// turnarounds): the bank's data path moves DRAMEfficiency x
	// DRAMBankBytesPerCycle.
	DRAMBankBytesPerCycle, DRAMEfficiency float64
	// DRAMRequestCycles is a DRAM bank's acceptance time of one read
	// request per NoC: requests from one NoC reach a bank at most one per
	// DRAMRequestCycles. DRAMOverlapExponent p says how the request and
	// data times of a read overlap: a read of d data cycles whose NoC
	// request time is r occupies the bank (d^p + r^p)^(1/p) cycles (p = 1:
	// not at all, p -> infinity: perfectly, max(d, r)). See dramBank.
	DRAMRequestCycles, DRAMOverlapExponent float64

	// Ethernet: a transmit command (one internal_::eth_send_packet) of s
	// bytes holds the link's TX queue for EthCommandCycles + s /
	// EthBytesPerCycle (both fitted on tt-metal's Blackhole erisc bandwidth
	// rows, see ethRows), and its data reaches the peer's L1
	// EthLatencyCycles after the command ends (the one-way latency row less
	// one 16-byte command).
	EthCommandCycles, EthBytesPerCycle, EthLatencyCycles float64

	// MatmulCycles is the math time of one 32x32x32 tile product by
	// fidelity (index ir.MathFidelity).
	MatmulCycles [5]float64
	// UnpackCyclesPerTile is the unpacker time of one operand tile into a
	// source register (or DEST), in series with the math of the
	// element-wise, copy, reduce and transpose calls.
	UnpackCyclesPerTile float64
	// MatmulUnpackCyclesPerTile is the unpacker time of one operand tile of
	// a tile product (matmul_tiles, matmul_block), which overlaps the
	// matrix unit's products (matmulBlockCycles).
	MatmulUnpackCyclesPerTile float64
	// FPUEltwiseCycles is the math time of one FPU element-wise tile op.
	FPUEltwiseCycles float64
	// PackCycles16 and PackCycles32 pack one tile from 16-bit or fp32 DEST.
	PackCycles16, PackCycles32 float64
	// DestMoveCycles is the math thread's time per instruction of a DEST
	// move sequence (MOVD2B, MOVB2D, MOVA2D, MOVB2A, TRNSPSRCB: 4 or 8
	// rows each), which transpose_wh_dest is made of (transposeDestCycles).
	DestMoveCycles float64
	// SFPUCycles is the time of one SFPU op on a tile, by op (default:
	// kir.SFPUTable's Cycles).
	SFPUCycles map[kir.SFPUOp]float64
	// TCCSFPUCycles is the time of one SFPU op on a tile run as tcc's own
	// program (default: sfpu.Op.CyclesFor(sfpu.CodeTCC), from the
	// program's instruction count), for kernels whose SFPU code is tcc's.
	TCCSFPUCycles map[kir.SFPUOp]float64
	// InitCycles is the cost of one init / reconfiguration call;
	// CBCycles of one CB call; ScalarCycles of one scalar statement or loop
	// iteration on a RISC-V.
	InitCycles, CBCycles, ScalarCycles float64

	// FloorBytesPerSecond is the per-card DRAM bandwidth the floor of a
	// build is computed at (bytes a device must stream / this rate).
	FloorBytesPerSecond float64
}

// Default returns the calibrated parameters (see Table for the sources).
func Default() *Params {
	return &Params{
		ClockHz:        clockHz,
		LaunchGapUS:    1.63,
		FixedProgramUS: fittedFixedProgramUS,
		LatencySizes:   []float64{64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384},
		// noc_latencies.yaml, arch 3 (Blackhole), one transaction:
		// DRAM sharded read (pattern 0, memory 2), DRAM sharded write
		// (memory 2), L1 read (pattern 0, NoC 1), L1 write.
		DRAMReadLatency:           []float64{481, 482, 489, 497, 513, 538, 578, 665, 841},
		DRAMWriteLatency:          []float64{381, 381, 381, 389, 397, 413, 453, 523, 669},
		L1ReadLatency:             []float64{373, 393, 372, 379, 388, 414, 439, 510, 636},
		L1WriteLatency:            []float64{358, 359, 360, 369, 375, 403, 432, 510, 629},
		NoCHopCycles:              9,
		LatencyRefHops:            8,
		NoCIssueCycles:            24,
		NoCLinkBytesPerCycle:      61,
		DRAMBankBytesPerCycle:     dramPeakBytesPerSecond / dramBanks / clockHz,
		DRAMEfficiency:            0.98,
		DRAMRequestCycles:         fittedDRAMRequestCycles,
		DRAMOverlapExponent:       fittedDRAMOverlapExponent,
		EthCommandCycles:          fittedEthCommandCycles,
		EthBytesPerCycle:          fittedEthBytesPerCycle,
		EthLatencyCycles:          ethLatencyCycles,
		MatmulCycles:              [5]float64{ir.LoFi: 16, 1: 32, ir.HiFi2: 32, ir.HiFi3: 48, ir.HiFi4: 64},
		UnpackCyclesPerTile:       fittedUnpackCyclesPerTile,
		MatmulUnpackCyclesPerTile: fittedMatmulUnpackCyclesPerTile,
		FPUEltwiseCycles:          8,
		PackCycles16:              32,
		PackCycles32:              64,
		DestMoveCycles:            2,
		SFPUCycles:                sfpuCycles(),
		TCCSFPUCycles:             tccSFPUCycles(),
		InitCycles:                20,
		CBCycles:                  10,
		ScalarCycles:              2,
		FloorBytesPerSecond:       dramPeakBytesPerSecond,
	}
}

// The fitted parameters (TestFittedParamsAreOptimal checks that each is a
// minimum of the calibration error; `tcc perf --params` prints them).
const (
	fittedFixedProgramUS      = 1.85
	fittedUnpackCyclesPerTile = 59.0
	// The matmul operand unpack, fitted on the one compute-bound row: the
	// measured stacks' prefill matmuls (bfp8_b weights) take 1.84x as long
	// at HiFi4 as at HiFi2 (issue 31), which the overlapped unpack
	// (matmulBlockCycles) meets when a product's unpacks take 1.84x less
	// than a HiFi4 product; the decode rows do not depend on it (their
	// reads bound them). tt-metal's element-wise op model puts the
	// unpacker at 80 B/cycle, 25.6 cycles for a bf16 tile.
	fittedMatmulUnpackCyclesPerTile = 27.0
	// The DRAM request cost, fitted on measured.md's DRAM microbenchmark
	// rows (one tile per request from one NoC: bf16 98%, bfp8_b 91%,
	// bfp4_b 62% of the channel's peak; bfp4_b from both NoCs 95%) by
	// least squares on the fraction of peak: every row within 3.5 points
	// (TestDRAMMicrobenchmarks). measured.md's "one request per ~16.4
	// cycles" is the same limit in the source's units; at the 1.35 GHz
	// clock and 64 GB/s per bank the rows put it at 19.2 cycles.
	fittedDRAMRequestCycles   = 19.2
	fittedDRAMOverlapExponent = 5.5
	// Ethernet, fitted on the four bandwidth rows of measured.md (erisc
	// raw bandwidth at 16 B, 256 B and 1 KB per command, the fabric's 4 KB
	// packet rate) by least squares on the log of the rate: t(s) = 69.5 +
	// s / 17.6 cycles = 51.5 ns + s / 23.8 GB/s; every row within 10%
	// (TestEthFit).
	fittedEthCommandCycles = 69.5
	fittedEthBytesPerCycle = 17.6
	// ethLatencyCycles is the erisc latency test's 894 ns round trip of
	// 16 B halved, less one 16-byte command: 447 - 52.2 = 395 ns.
	ethLatencyCycles = 533.0
)

// The chip's clock and its physical DRAM: 512 GB/s per card
// (reference/blackhole.md) over 8 banks.
const (
	clockHz                = 1.35e9
	dramPeakBytesPerSecond = 512e9
	dramBanks              = 8
)

// Param is one row of the parameter table.
type Param struct {
	Name   string  `json:"name"`
	Value  string  `json:"value"`
	Unit   string  `json:"unit"`
	Fitted bool    `json:"fitted"`
	Source string  `json:"source"`
	Num    float64 `json:"-"`
}

const (
	srcYAML     = "tt-metal noc_estimator/latencies/noc_latencies.yaml, arch 3 rows"
	srcMeasured = "reference/measured.md"
	srcChip     = "reference/blackhole.md"
	srcAssumed  = "assumed (compute is <0.1% of a decode step; not fitted)"
)

// Table lists every parameter with its unit and source, in a fixed order.
func (p *Params) Table() []Param {
	f := func(name string, v float64, unit string, fitted bool, src string) Param {
		return Param{Name: name, Value: fmt.Sprintf("%.6g", v), Unit: unit, Fitted: fitted, Source: src, Num: v}
	}
	list := func(name string, v []float64, src string) Param {
		return Param{Name: name, Value: fmt.Sprint(v), Unit: "cycles", Source: src}
	}
	rows := []Param{
		f("clock", p.ClockHz/1e9, "GHz", false, srcChip),
		f("launch_gap", p.LaunchGapUS, "us/program", false, srcMeasured+": traced launch gap <= 1.63 us"),
		f("fixed_program", p.FixedProgramUS, "us/program", true, srcMeasured+": fitted on the per-program rows"),
		{Name: "latency_sizes", Value: fmt.Sprint(p.LatencySizes), Unit: "bytes", Source: srcYAML},
		list("dram_read_latency", p.DRAMReadLatency, srcYAML+" (DRAM sharded read, pattern 0, memory 2)"),
		list("dram_write_latency", p.DRAMWriteLatency, srcYAML+" (DRAM sharded write, memory 2)"),
		list("l1_read_latency", p.L1ReadLatency, srcYAML+" (L1 read, pattern 0)"),
		list("l1_write_latency", p.L1WriteLatency, srcYAML+" (L1 write)"),
		f("noc_hop", p.NoCHopCycles, "cycles/hop", false, srcYAML+": same-axis vs cross rows (~150 cycles over ~16 hops)"),
		f("latency_ref_hops", p.LatencyRefHops, "hops", false, "mean worker-to-endpoint distance of the tables' sweeps (assumed)"),
		f("noc_issue", p.NoCIssueCycles, "cycles/transaction", false, srcYAML+": 256 x 64 B DRAM reads take 6,089 cycles"),
		f("noc_link", p.NoCLinkBytesPerCycle, "B/cycle", false, srcChip+"; yaml 256 x 16 KiB L1 reads: 61.3 B/cycle"),
		f("dram_bank", p.DRAMBankBytesPerCycle, "B/cycle", false, srcChip+": 512 GB/s per card over 8 banks, the physical limit"),
		f("dram_efficiency", p.DRAMEfficiency, "fraction", false, srcMeasured+": 16 KB bank-local reads with transaction-id double buffering reach 98% of 512 GB/s (tt-metal PR #47885)"),
		f("dram_request", p.DRAMRequestCycles, "cycles/request/NoC", true, srcMeasured+": fitted on the DRAM microbenchmark rows (tt-metal #55898: one tile per request, by format and NoCs)"),
		f("dram_overlap", p.DRAMOverlapExponent, "exponent", true, srcMeasured+": fitted with dram_request"),
		f("eth_command", p.EthCommandCycles, "cycles/command", true, srcMeasured+": fitted on the erisc bandwidth rows (16 B, 256 B, 1 KB) and the fabric 4 KB packet rate"),
		f("eth_link", p.EthBytesPerCycle, "B/cycle", true, srcMeasured+": fitted with eth_command"),
		f("eth_latency", p.EthLatencyCycles, "cycles", false, srcMeasured+": erisc latency 894 ns round trip for 16 B, halved, less one 16-byte command"),
		{Name: "matmul_tile", Value: fmt.Sprintf("LoFi %g, HiFi2 %g, HiFi3 %g, HiFi4 %g", p.MatmulCycles[ir.LoFi], p.MatmulCycles[ir.HiFi2], p.MatmulCycles[ir.HiFi3], p.MatmulCycles[ir.HiFi4]), Unit: "cycles/tile", Source: srcChip},
		f("unpack_tile", p.UnpackCyclesPerTile, "cycles/tile", true, srcMeasured+": fitted on the decode matmul rows (time tracks tiles)"),
		f("matmul_unpack_tile", p.MatmulUnpackCyclesPerTile, "cycles/tile", true, "issue 31: the measured stacks' prefill matmuls take 1.84x as long at HiFi4 as at HiFi2 (bfp8_b weights); overlaps the products"),
		f("fpu_eltwise", p.FPUEltwiseCycles, "cycles/tile", false, srcChip),
		f("pack_tile_16", p.PackCycles16, "cycles/tile", false, srcAssumed),
		f("pack_tile_32", p.PackCycles32, "cycles/tile", false, srcAssumed),
		f("dest_move", p.DestMoveCycles, "cycles/instruction", false, "assumed: one issue plus one dependency stall per move (tt-llk llk_math_transpose_dest.h replays; not measured)"),
	}
	ops := make([]kir.SFPUOp, 0, len(p.SFPUCycles))
	for op := range p.SFPUCycles {
		ops = append(ops, op)
	}
	sort.Slice(ops, func(i, j int) bool { return ops[i] < ops[j] })
	s := ""
	for i, op := range ops {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%s %g", op, p.SFPUCycles[op])
	}
	rows = append(rows,
		Param{Name: "sfpu_tile", Value: s, Unit: "cycles/tile", Source: "ir/sfpu Table: instructions of the pinned tt-llk SFPU functions (each entry's CyclesSource)"},
		f("init", p.InitCycles, "cycles/call", false, srcAssumed),
		f("cb_call", p.CBCycles, "cycles/call", false, srcAssumed),
		f("scalar", p.ScalarCycles, "cycles/statement", false, srcAssumed),
		f("floor_bandwidth", p.FloorBytesPerSecond/1e9, "GB/s/card", false, srcChip+": the physical DRAM bandwidth (the physical floor; the stream floor is at the rate the model predicts for the best stream, StreamBytesPerSecond)"),
	)
	return rows
}

// latency interpolates a latency table at size bytes (clamped at the ends,
// extrapolated linearly past the largest size) and adjusts it for hops.
func (p *Params) latency(table []float64, size float64, hops int) float64 {
	xs := p.LatencySizes
	var l float64
	switch {
	case size <= xs[0]:
		l = table[0]
	case size >= xs[len(xs)-1]:
		n := len(xs) - 1
		slope := (table[n] - table[n-1]) / (xs[n] - xs[n-1])
		l = table[n] + slope*(size-xs[n])
	default:
		i := sort.SearchFloat64s(xs, size)
		f := (size - xs[i-1]) / (xs[i] - xs[i-1])
		l = table[i-1] + f*(table[i]-table[i-1])
	}
	l += (float64(hops) - p.LatencyRefHops) * p.NoCHopCycles
	return max(l, 1)
}

// cyclesToUS converts cycles to microseconds.
func (p *Params) cyclesToUS(c float64) float64 { return c / p.ClockHz * 1e6 }

// tccSFPUCycles is every SFPU op's cycles as tcc's program.
func tccSFPUCycles() map[kir.SFPUOp]float64 {
	m := map[kir.SFPUOp]float64{}
	for _, s := range kir.SFPUTable {
		m[s.Op] = s.Op.CyclesFor(sfpu.CodeTCC)
	}
	return m
}

// sfpuCycles is every SFPU op's Cycles from kir.SFPUTable.
func sfpuCycles() map[kir.SFPUOp]float64 {
	m := map[kir.SFPUOp]float64{}
	for _, s := range kir.SFPUTable {
		m[s.Op] = s.Cycles
	}
	return m
}
