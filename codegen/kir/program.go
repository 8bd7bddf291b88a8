package kir

import (
	"fmt"
	"slices"
	"sort"

	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/ir/sfpu"
)

// Core is one logical worker core; X is the column.
type Core struct{ X, Y int }

func (c Core) String() string {
	if c.IsEth() {
		return fmt.Sprintf("eth%d", c.X)
	}
	return fmt.Sprintf("(%d,%d)", c.X, c.Y)
}

// Less orders cores row-major: by Y, then X.
func (c Core) Less(o Core) bool { return c.Y < o.Y || (c.Y == o.Y && c.X < o.X) }

// Range is the single-core range of c.
func (c Core) Range() ir.CoreRange { return ir.CoreRange{X0: c.X, Y0: c.Y, X1: c.X, Y1: c.Y} }

// InRanges reports whether c lies in any of rs.
func InRanges(rs []ir.CoreRange, c Core) bool {
	for _, r := range rs {
		if c.X >= r.X0 && c.X <= r.X1 && c.Y >= r.Y0 && c.Y <= r.Y1 {
			return true
		}
	}
	return false
}

// CoresOf lists the distinct cores of rs in row-major order (Core.Less).
func CoresOf(rs []ir.CoreRange) []Core {
	n := 0
	for _, r := range rs {
		if r.X1 >= r.X0 && r.Y1 >= r.Y0 {
			n += (r.X1 - r.X0 + 1) * (r.Y1 - r.Y0 + 1)
		}
	}
	if n == 0 {
		return nil
	}
	out := make([]Core, 0, n)
	for _, r := range rs {
		for y := r.Y0; y <= r.Y1; y++ {
			for x := r.X0; x <= r.X1; x++ {
				out = append(out, Core{x, y})
			}
		}
	}
	less := func(a, b Core) int {
		if a.Less(b) {
			return -1
		}
		if b.Less(a) {
			return 1
		}
		return 0
	}
	if !slices.IsSortedFunc(out, less) {
		slices.SortFunc(out, less)
	}
	return slices.Compact(out)
}

// Program is one device program: everything the host enqueues for one op.
type Program struct {
	Name       string
	CBs        []CB
	Semaphores []Semaphore
	Kernels    []*Kernel
	// Buffers are the device buffers (tensors) the program's argument values
	// name; the runtime allocates them and resolves BufferAddr values.
	Buffers []Buffer
	// Persist, when set, makes the program a persistent one (persist.go).
	Persist *Persist `json:",omitempty"`
	// RowSplit, when set, says the program is a split-row norm: each row's
	// tiles are reduced in chunks on consecutive cores and the chunks' sums
	// added on an exchange tree (codegen/lower/multicore.Exchange). The
	// reference evaluator needs it to add those sums in the device's order
	// (sim/ref Options.RowSplit). It is not part of the host contract.
	RowSplit *RowSplit `json:"-"`
}

// RowSplit is a split-row norm's chunking: Per tiles of a row per core,
// the chunk sums added in core order on one level (Fan 0) or per subgroup
// of Fan consecutive cores and then the subgroups' sums in order.
type RowSplit struct{ Per, Fan int }

// NewProgram returns an empty program called name.
func NewProgram(name string) *Program { return &Program{Name: name} }

// CB is one circular buffer configuration: index Index on every core of Cores.
// Its storage is Pages*PageSize bytes of L1 (or, when Backing is set, the L1
// shard of that buffer on each core, as tt-metal's globally allocated CBs).
type CB struct {
	Index    int
	PageSize int
	Pages    int
	Format   ir.DType
	Cores    []ir.CoreRange
	// Name is an optional description printed as a comment ("in0", "out").
	Name string
	// Backing, when non-empty, names an L1-sharded Buffer whose shard is the
	// CB's storage; such a CB takes no L1 of its own.
	Backing string
}

// Bytes is PageSize*Pages.
func (c CB) Bytes() int { return c.PageSize * c.Pages }

// AddCB appends a CB configuration and returns its index.
func (p *Program) AddCB(cb CB) int {
	p.CBs = append(p.CBs, cb)
	return cb.Index
}

// CBOn returns the configuration of CB index idx on core c, or nil.
func (p *Program) CBOn(c Core, idx int) *CB {
	for i := range p.CBs {
		if p.CBs[i].Index == idx && InRanges(p.CBs[i].Cores, c) {
			return &p.CBs[i]
		}
	}
	return nil
}

// Semaphore is one program semaphore: a 4-byte L1 word on every core of
// Cores, initialised to Initial; kernels find its address with
// get_semaphore(ID).
type Semaphore struct {
	ID      int
	Cores   []ir.CoreRange
	Initial uint32
}

// AddSemaphore appends a semaphore and returns its id.
func (p *Program) AddSemaphore(s Semaphore) int {
	p.Semaphores = append(p.Semaphores, s)
	return s.ID
}

// SemaphoreOn returns semaphore id on core c, or nil.
func (p *Program) SemaphoreOn(c Core, id int) *Semaphore {
	for i := range p.Semaphores {
		if p.Semaphores[i].ID == id && InRanges(p.Semaphores[i].Cores, c) {
			return &p.Semaphores[i]
		}
	}
	return nil
}

// Buffer is a device buffer a program reads or writes, by symbolic name.
// Pages are interleaved (DRAM: page i in bank i%banks at offset
// (i/banks)*aligned page size, or placed in Blocks; L1 interleaved:
// round-robin over the worker cores) or sharded as Mem says.
type Buffer struct {
	Name     string
	Mem      ir.MemoryConfig
	DType    ir.DType
	Layout   ir.Layout
	PageSize int
	Pages    int
	// Blocks, when set on a DRAM-interleaved buffer of tiles, places its
	// pages in blocks the way one matmul reads them (see BlockLayout).
	Blocks *BlockLayout `json:",omitempty"`
}

// AddBuffer appends a buffer declaration and returns its name.
func (p *Program) AddBuffer(b Buffer) string {
	p.Buffers = append(p.Buffers, b)
	return b.Name
}

// Buffer returns the buffer called name, or nil.
func (p *Program) Buffer(name string) *Buffer {
	for i := range p.Buffers {
		if p.Buffers[i].Name == name {
			return &p.Buffers[i]
		}
	}
	return nil
}

// ShardCores lists the cores holding a part of an L1 buffer in row-major
// order: the shard grid for sharded buffers, every worker core
// (gridX x gridY) for L1-interleaved buffers, none for DRAM buffers.
func (b *Buffer) ShardCores(gridX, gridY int) []Core {
	switch {
	case b.Mem.Kind.IsDRAM():
		return nil
	case b.Mem.Shard != nil:
		return CoresOf([]ir.CoreRange{b.Mem.Shard.Grid})
	}
	return CoresOf([]ir.CoreRange{{X0: 0, Y0: 0, X1: gridX - 1, Y1: gridY - 1}})
}

// PagesPerCore is the number of pages an L1 buffer keeps on each of its
// ShardCores: ceil(Pages / len(ShardCores)). It is 0 for DRAM buffers.
func (b *Buffer) PagesPerCore(gridX, gridY int) int {
	n := len(b.ShardCores(gridX, gridY))
	if n == 0 {
		return 0
	}
	return (b.Pages + n - 1) / n
}

// Role is what a kernel does in the reader -> compute -> writer pipeline.
type Role uint8

const (
	RoleReader Role = iota
	RoleWriter
	RoleCompute
)

func (r Role) String() string {
	switch r {
	case RoleReader:
		return "reader"
	case RoleWriter:
		return "writer"
	case RoleCompute:
		return "compute"
	}
	return fmt.Sprintf("role(%d)", int(r))
}

// Processor is the RISC-V class a kernel is built for.
type Processor uint8

const (
	// RISCV0 is BRISC (tt::tt_metal::DataMovementProcessor::RISCV_0).
	RISCV0 Processor = iota
	// RISCV1 is NCRISC (DataMovementProcessor::RISCV_1).
	RISCV1
	// ComputeProc is TRISC0/1/2 running one compute source.
	ComputeProc
)

func (p Processor) String() string {
	switch p {
	case RISCV0:
		return "RISCV_0"
	case RISCV1:
		return "RISCV_1"
	case ComputeProc:
		return "compute"
	}
	return fmt.Sprintf("processor(%d)", int(p))
}

// ComputeConfig is the host-side configuration of a compute kernel.
type ComputeConfig struct {
	MathFidelity   ir.MathFidelity
	FP32DestAccEn  bool
	MathApproxMode bool
	DstFullSyncEn  bool
	// SFPU is whose SFPU code the kernel's SFPU statements run: tcc's own
	// instruction sequences (sfpu.CodeTCC, the zero value) or tt-metal's
	// calls (sfpu.CodeLLK). The printer, the kernel executor and the timing
	// model all read it; lower.Lower sets it from the target.
	SFPU sfpu.Code
	// UnpackToDestFP32 lists, ascending, the CBs whose tiles the unpacker
	// writes straight into DEST at full fp32 (tt-metal's
	// unpack_to_dest_mode[cb] = UnpackToDestFp32). Any other Float32 CB is
	// unpacked through source register A or B and so truncated to tf32,
	// copy_tile included; a CB in this list can only be read by copy_tile
	// (the FPU never sees it). ChooseUnpackModes fills it.
	UnpackToDestFP32 []int
}

// UnpacksToDest reports whether CB cb is in c.UnpackToDestFP32.
func (c ComputeConfig) UnpacksToDest(cb int) bool {
	for _, x := range c.UnpackToDestFP32 {
		if x == cb {
			return true
		}
	}
	return false
}

// Kernel is one kernel of a program: one source, built for one processor,
// running on every core of Cores.
type Kernel struct {
	Name      string
	Role      Role
	Processor Processor
	// NoC is the NoC index (0 or 1) of a data-movement kernel.
	NoC int
	// TXQ is the ethernet TX queue (0 or 1) that the transmit commands of
	// a kernel on ethernet cores use (0 on workers): 0 prints the
	// release's ethernet calls, which send on TXQ 0; 1 prints tcc's
	// queue-1 helpers (codegen/cpp). Two kernels of one ethernet core
	// never send on one queue (RuleEthTXQ); the lowering gives ERISC c's
	// kernels queue EthTXQ(c).
	TXQ     int
	Cores   []ir.CoreRange
	Compute ComputeConfig
	// Defines are preprocessor defines passed to the kernel build.
	Defines map[string]string
	// Args is the kernel's one argument table; indices are per kind, dense
	// from 0 in declaration order.
	Args []Arg
	// RuntimeValues holds, per core, the values of the runtime args in
	// index order; kept sorted by core (Core.Less).
	RuntimeValues []CoreArgs
	// Body is the kernel's code (kernel_main / MAIN).
	Body []Stmt
}

// CoreArgs are the runtime argument values of one kernel on one core.
type CoreArgs struct {
	Core   Core
	Values []ArgValue
}

// AddKernel appends k to the program and returns it.
func (p *Program) AddKernel(k *Kernel) *Kernel {
	p.Kernels = append(p.Kernels, k)
	return k
}

// Kernel returns the kernel called name, or nil.
func (p *Program) Kernel(name string) *Kernel {
	for _, k := range p.Kernels {
		if k.Name == name {
			return k
		}
	}
	return nil
}

// KernelsOn lists the kernels running on core c in program order.
func (p *Program) KernelsOn(c Core) []*Kernel {
	var out []*Kernel
	for _, k := range p.Kernels {
		if InRanges(k.Cores, c) {
			out = append(out, k)
		}
	}
	return out
}

// Cores lists every core any kernel runs on, row-major.
func (p *Program) Cores() []Core {
	var rs []ir.CoreRange
	for _, k := range p.Kernels {
		rs = append(rs, k.Cores...)
	}
	return CoresOf(rs)
}

// SortedDefines returns the define names in sorted order.
func (k *Kernel) SortedDefines() []string {
	names := make([]string, 0, len(k.Defines))
	for n := range k.Defines {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Define sets a preprocessor define.
func (k *Kernel) Define(name, value string) {
	if k.Defines == nil {
		k.Defines = map[string]string{}
	}
	k.Defines[name] = value
}
