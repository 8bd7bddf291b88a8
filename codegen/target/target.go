package target

import (
	"fmt"

	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/ir/sfpu"
)

// Processor is a RISC-V core class of a Tensix.
type Processor uint8

// Processors. BRISC is RISCV_0 and NCRISC is RISCV_1 in tt-metal's host API;
// TRISC0/1/2 (unpack, math, pack) run the one compute source.
const (
	BRISC Processor = iota
	NCRISC
	TRISC
)

func (p Processor) String() string {
	switch p {
	case BRISC:
		return "BRISC"
	case NCRISC:
		return "NCRISC"
	case TRISC:
		return "TRISC"
	}
	return fmt.Sprintf("processor(%d)", int(p))
}

// Target is the description of one chip. All sizes are in bytes.
type Target struct {
	Name string

	// SFPU is whose SFPU code the build's compute kernels run (sfpu.CodeTCC,
	// the zero value: tcc's own instruction sequences; sfpu.CodeLLK:
	// tt-metal's calls, which need the SFPI compiler).
	SFPU sfpu.Code

	// GridX x GridY logical worker cores (compute with storage); logical x is
	// the column, 0 <= x < GridX, 0 <= y < GridY.
	GridX, GridY int

	// ClockHz is the Tensix clock.
	ClockHz float64

	// L1Size is the L1 SRAM of one Tensix; L1UnreservedBase is the first
	// byte kernels may use for CBs and L1 buffers (after firmware, mailboxes
	// and the kernel-config area).
	L1Size, L1UnreservedBase int

	// Kernel binary limits per RISC-V (code) and local memory per RISC-V.
	BRISCCodeBytes, NCRISCCodeBytes, TRISCCodeBytes    int
	BRISCLocalBytes, NCRISCLocalBytes, TRISCLocalBytes int

	// DRAMBanks is the number of DRAM channels pages are interleaved over.
	DRAMBanks int
	// DRAMBankBytes is the capacity of one bank: what programs' buffers
	// may occupy in it (DRAMBytes for the device).
	DRAMBankBytes int64

	// Alignment: DRAM reads, DRAM writes, L1 addresses.
	DRAMReadAlign, DRAMWriteAlign, L1Align int

	// NumNoCs is the number of NoCs; MaxNoCPacket the largest single NoC
	// transfer; NoCFlitBytes the flit width.
	NumNoCs, MaxNoCPacket, NoCFlitBytes int

	// MaxCBs is the number of circular buffers per core (indices 0..MaxCBs-1).
	MaxCBs int
	// MaxSemaphores is the number of program semaphores per core.
	MaxSemaphores int
	// MaxRuntimeArgs is the limit on unique plus common runtime args per
	// kernel per core.
	MaxRuntimeArgs int

	// DEST tile capacity: half-sync (default) and full-sync, for 16-bit and
	// fp32 DEST.
	DestTilesHalf16, DestTilesHalf32, DestTilesFull16, DestTilesFull32 int

	// workerNoCX/Y map logical worker x/y to NoC (physical, unharvested) coordinates.
	workerNoCX, workerNoCY []int
	// dramNoC is the NoC endpoint used for each DRAM bank.
	dramNoC [][2]int

	// Eth describes the ethernet cores (nil: the chip has none modelled).
	Eth *Ethernet

	// Code is where kernel binaries live and what bounds them.
	Code CodeSize
}

// BlackholeDRAMBankBytes is one Blackhole DRAM bank as tt-metal gives it
// to buffers: dram_bank_size 4,278,190,080 B (4 GiB less 16 MiB) in
// tt_metal/soc_descriptors/blackhole_140_arch.yaml (and dram_view_size of
// BLACKHOLE_DRAM_METADATA); 8 banks make the p150a's 31.875 GiB of its
// ~32 GiB GDDR6 (reference/blackhole.md: 8 channels, ~32 GiB).
const BlackholeDRAMBankBytes int64 = 4_278_190_080

// Blackhole returns the p150a Blackhole description with the 11x10 worker
// grid (the last logical column reserved for fast dispatch).
func Blackhole() *Target {
	return &Target{
		Name:             "blackhole",
		GridX:            11,
		GridY:            10,
		ClockHz:          1.35e9,
		L1Size:           1_572_864,
		L1UnreservedBase: int(BlackholeLayout().Unreserved),
		BRISCCodeBytes:   48 << 10,
		NCRISCCodeBytes:  24 << 10,
		TRISCCodeBytes:   24 << 10,
		BRISCLocalBytes:  8 << 10,
		NCRISCLocalBytes: 8 << 10,
		TRISCLocalBytes:  4 << 10,
		DRAMBanks:        8,
		DRAMBankBytes:    BlackholeDRAMBankBytes,
		DRAMReadAlign:    64,
		DRAMWriteAlign:   16,
		L1Align:          16,
		NumNoCs:          2,
		MaxNoCPacket:     16384,
		NoCFlitBytes:     64,
		MaxCBs:           32,
		MaxSemaphores:    16,
		MaxRuntimeArgs:   341,
		DestTilesHalf16:  8,
		DestTilesHalf32:  4,
		DestTilesFull16:  16,
		DestTilesFull32:  8,
		// Tensix columns of the Blackhole NoC grid (columns 0 and 9 hold DRAM,
		// 8 the PCIe/ARC column); rows 2..11 hold Tensix.
		workerNoCX: []int{1, 2, 3, 4, 5, 6, 7, 10, 11, 12, 13, 14, 15, 16},
		workerNoCY: []int{2, 3, 4, 5, 6, 7, 8, 9, 10, 11},
		dramNoC:    [][2]int{{0, 0}, {0, 2}, {0, 9}, {0, 5}, {9, 0}, {9, 2}, {9, 9}, {9, 5}},
		Eth:        blackholeEthernet(),
		Code:       BlackholeCodeSize(),
	}
}

// L1Budget is the number of L1 bytes per core available to a program's CBs
// and L1 buffers: L1Size - L1UnreservedBase.
func (t *Target) L1Budget() int { return t.L1Size - t.L1UnreservedBase }

// DRAMBytes is one device's DRAM capacity for buffers: DRAMBanks x
// DRAMBankBytes.
func (t *Target) DRAMBytes() int64 { return int64(t.DRAMBanks) * t.DRAMBankBytes }

// NumWorkers is GridX*GridY.
func (t *Target) NumWorkers() int { return t.GridX * t.GridY }

// InGrid reports whether logical core (x, y) is a worker core.
func (t *Target) InGrid(x, y int) bool { return x >= 0 && y >= 0 && x < t.GridX && y < t.GridY }

// RangeInGrid reports whether every core of r is a worker core and r is not empty.
func (t *Target) RangeInGrid(r ir.CoreRange) bool {
	return r.X0 <= r.X1 && r.Y0 <= r.Y1 && t.InGrid(r.X0, r.Y0) && t.InGrid(r.X1, r.Y1)
}

// CodeBytes is the kernel code limit of processor p.
func (t *Target) CodeBytes(p Processor) int {
	switch p {
	case BRISC:
		return t.BRISCCodeBytes
	case NCRISC:
		return t.NCRISCCodeBytes
	}
	return t.TRISCCodeBytes
}

// LocalBytes is the local-memory (stack and globals) limit of processor p.
func (t *Target) LocalBytes(p Processor) int {
	switch p {
	case BRISC:
		return t.BRISCLocalBytes
	case NCRISC:
		return t.NCRISCLocalBytes
	}
	return t.TRISCLocalBytes
}

// DestTiles is the number of tiles a compute kernel may address in DEST:
// 8 (16-bit) or 4 (fp32) in half-sync mode, 16 or 8 in full-sync mode.
func (t *Target) DestTiles(fullSync, fp32 bool) int {
	switch {
	case fullSync && fp32:
		return t.DestTilesFull32
	case fullSync:
		return t.DestTilesFull16
	case fp32:
		return t.DestTilesHalf32
	}
	return t.DestTilesHalf16
}

// TileBytes is the size of one 32x32 tile of d (0 for an invalid dtype).
func (t *Target) TileBytes(d ir.DType) int { return d.TileBytes() }

// DRAMPageSize is a page size rounded up to the DRAM read alignment: the
// stride between consecutive pages of one interleaved buffer in one bank.
func (t *Target) DRAMPageSize(pageSize int) int { return AlignUp(pageSize, t.DRAMReadAlign) }

// AlignUp rounds n up to a multiple of a (a > 0).
func AlignUp(n, a int) int { return (n + a - 1) / a * a }

// DataFormat is tt-metal's tt::DataFormat enumeration value.
type DataFormat uint8

// tt::DataFormat codes used by tcc.
const (
	Float32  DataFormat = 0
	Float16B DataFormat = 5
	Bfp8B    DataFormat = 6
	Bfp4B    DataFormat = 7
	Int32    DataFormat = 8
	UInt32   DataFormat = 24
)

// Name is the tt-metal spelling, e.g. "Float16_b".
func (f DataFormat) Name() string {
	switch f {
	case Float32:
		return "Float32"
	case Float16B:
		return "Float16_b"
	case Bfp8B:
		return "Bfp8_b"
	case Bfp4B:
		return "Bfp4_b"
	case Int32:
		return "Int32"
	case UInt32:
		return "UInt32"
	}
	return fmt.Sprintf("DataFormat(%d)", int(f))
}

func (f DataFormat) String() string { return f.Name() }

// DataFormatOf is the tt::DataFormat of a storage format.
func DataFormatOf(d ir.DType) (DataFormat, error) {
	switch d {
	case ir.FP32:
		return Float32, nil
	case ir.BF16:
		return Float16B, nil
	case ir.BFP8B:
		return Bfp8B, nil
	case ir.BFP4B:
		return Bfp4B, nil
	case ir.Int32:
		return Int32, nil
	case ir.UInt32:
		return UInt32, nil
	}
	return 0, fmt.Errorf("dtype %s has no tt::DataFormat", d)
}

// WorkerNoC maps logical worker core (x, y) to its NoC coordinates on an
// unharvested chip. A real backend resolves coordinates through the device
// (harvesting moves columns); the simulator uses this mapping.
func (t *Target) WorkerNoC(x, y int) (nx, ny int, err error) {
	if !t.InGrid(x, y) {
		return 0, 0, fmt.Errorf("logical core (%d,%d) is outside the %dx%d worker grid", x, y, t.GridX, t.GridY)
	}
	return t.workerNoCX[x], t.workerNoCY[y], nil
}

// WorkerAt is the inverse of WorkerNoC; ok is false when (nx, ny) is not a worker.
func (t *Target) WorkerAt(nx, ny int) (x, y int, ok bool) {
	x, y = -1, -1
	for i, v := range t.workerNoCX[:t.GridX] {
		if v == nx {
			x = i
		}
	}
	for i, v := range t.workerNoCY[:t.GridY] {
		if v == ny {
			y = i
		}
	}
	return x, y, x >= 0 && y >= 0
}

// DRAMNoC is the NoC endpoint of DRAM bank b (the first of its endpoints).
func (t *Target) DRAMNoC(bank int) (nx, ny int, err error) {
	if bank < 0 || bank >= t.DRAMBanks {
		return 0, 0, fmt.Errorf("DRAM bank %d out of range 0..%d", bank, t.DRAMBanks-1)
	}
	return t.dramNoC[bank][0], t.dramNoC[bank][1], nil
}

// DRAMBankAt is the inverse of DRAMNoC; ok is false when (nx, ny) is not a DRAM endpoint.
func (t *Target) DRAMBankAt(nx, ny int) (bank int, ok bool) {
	for b, c := range t.dramNoC {
		if c[0] == nx && c[1] == ny {
			return b, true
		}
	}
	return -1, false
}
