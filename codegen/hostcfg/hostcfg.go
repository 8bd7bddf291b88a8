package hostcfg

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
)

// ProgramConfig is everything the host needs to create one device program:
// kernels with their configuration and argument vectors, CBs, semaphores and
// the buffers the arguments refer to. Slices are in program order (kernels,
// CBs, semaphores, buffers as declared), arguments in index order.
type ProgramConfig struct {
	Program    string            `json:"program"`
	Kernels    []KernelConfig    `json:"kernels"`
	CBs        []CBConfig        `json:"cbs"`
	Semaphores []SemaphoreConfig `json:"semaphores"`
	Buffers    []BufferConfig    `json:"buffers"`
	// Persistent is the persistent section of a persistent program
	// (Persistent), absent for any other program.
	Persistent *PersistentConfig `json:"persistent,omitempty"`
}

// KernelConfig is one CreateKernel call plus its runtime arguments.
type KernelConfig struct {
	Name string `json:"name"`
	// Source is the kernel source file, relative to the build directory:
	// SourceFile(program, kernel).
	Source string `json:"source"`
	// Role is reader, writer or compute.
	Role string `json:"role"`
	// Processor is RISCV_0 (BRISC), RISCV_1 (NCRISC) or compute.
	Processor string `json:"processor"`
	// NoC is the NoC index of a data-movement kernel (absent for compute).
	NoC   *int        `json:"noc,omitempty"`
	Cores []CoreRange `json:"cores"`
	// Compute is the compute configuration (absent for data movement).
	Compute *ComputeConfig `json:"compute,omitempty"`
	// Ethernet is present exactly for a kernel on ethernet cores: the host
	// creates it with tt-metal's EthernetConfig (CreateKernel on the
	// ethernet cores) instead of a DataMovementConfig. Its NoC and
	// Processor repeat the kernel's.
	Ethernet *EthernetConfig `json:"ethernet,omitempty"`
	// Defines are the preprocessor defines; JSON objects print sorted by key.
	Defines map[string]string `json:"defines"`
	// CompileArgs are the compile-time args in index order.
	CompileArgs []NamedArg `json:"compile_args"`
	// RuntimeArgNames names the per-core runtime args in index order.
	RuntimeArgNames []string `json:"runtime_arg_names"`
	// RuntimeArgs are the per-core runtime arg values, cores row-major;
	// empty when the kernel has no runtime args.
	RuntimeArgs []CoreArgs `json:"runtime_args"`
	// CommonRuntimeArgs are the common runtime args in index order.
	CommonRuntimeArgs []NamedArg `json:"common_runtime_args"`
}

// ComputeConfig is tt-metal's ComputeConfig of a compute kernel.
type ComputeConfig struct {
	MathFidelity   string `json:"math_fidelity"`
	FP32DestAccEn  bool   `json:"fp32_dest_acc_en"`
	MathApproxMode bool   `json:"math_approx_mode"`
	DstFullSyncEn  bool   `json:"dst_full_sync_en"`
	// UnpackToDestFP32 lists the CBs whose unpack_to_dest_mode entry is
	// UnpackToDestFp32 (every other CB: Default).
	UnpackToDestFP32 []int `json:"unpack_to_dest_fp32_cbs"`
}

// EthernetConfig is tt-metal's EthernetConfig of a kernel on ethernet
// cores (tt_metal/api/tt-metalium/kernel_types.hpp: eth_mode, noc,
// processor; compile args and defines are the kernel's).
type EthernetConfig struct {
	// EthMode is "SENDER" for a kernel that sends over its link
	// (eth_send_bytes or eth_wait_for_receiver_done), else "RECEIVER". Both
	// run on active ethernet cores (HalProgrammableCoreType::ACTIVE_ETH);
	// tcc never uses IDLE.
	EthMode string `json:"eth_mode"`
	// NoC is the NoC index (tt-metal's NOC::NOC_0 / NOC_1).
	NoC int `json:"noc"`
	// Processor is the ERISC, RISCV_0 or RISCV_1 (DataMovementProcessor).
	Processor string `json:"processor"`
}

// Ethernet modes of EthernetConfig.EthMode.
const (
	EthSender   = "SENDER"
	EthReceiver = "RECEIVER"
)

// NamedArg is one row of a kernel's argument table with its value.
type NamedArg struct {
	Index int      `json:"index"`
	Name  string   `json:"name"`
	Value ArgValue `json:"value"`
}

// CoreArgs are the runtime argument values of a kernel on one core, in
// runtime-arg index order.
type CoreArgs struct {
	Core   Core       `json:"core"`
	Values []ArgValue `json:"values"`
}

// CBConfig is one CircularBufferConfig.
type CBConfig struct {
	Index          int         `json:"index"`
	Name           string      `json:"name,omitempty"`
	PageSize       int         `json:"page_size"`
	NumPages       int         `json:"num_pages"`
	TotalSize      int         `json:"total_size"`
	DataFormat     string      `json:"data_format"`
	DataFormatCode int         `json:"data_format_code"`
	Cores          []CoreRange `json:"cores"`
	// BackingBuffer names the L1-sharded buffer whose shard is the CB's
	// storage (a globally allocated CB); empty for an ordinary CB.
	BackingBuffer string `json:"backing_buffer,omitempty"`
}

// SemaphoreConfig is one CreateSemaphore call.
type SemaphoreConfig struct {
	ID      int         `json:"id"`
	Cores   []CoreRange `json:"cores"`
	Initial uint32      `json:"initial"`
	// CoreType is CreateSemaphore's core_type: "ETH" for a semaphore on
	// ethernet cores, empty (CoreType::WORKER, the default) for one on
	// worker cores. kir.Validate keeps a semaphore on one kind of core.
	CoreType string `json:"core_type,omitempty"`
}

// CoreTypeEth is SemaphoreConfig.CoreType of a semaphore on ethernet
// cores (tt-metal's CoreType::ETH).
const CoreTypeEth = "ETH"

// BufferConfig is one device buffer the program's arguments refer to.
type BufferConfig struct {
	Name   string `json:"name"`
	Memory string `json:"memory"`
	// Shard is the shard spec of a sharded buffer.
	Shard      *ShardConfig `json:"shard,omitempty"`
	DType      string       `json:"dtype"`
	DataFormat string       `json:"data_format"`
	Layout     string       `json:"layout"`
	PageSize   int          `json:"page_size"`
	Pages      int          `json:"pages"`
	// Blocks is the block layout of a weight placed in blocks
	// (kir.BlockLayout: page k*nt + n is tile (k, n)).
	Blocks *BlockConfig `json:"blocks,omitempty"`
}

// BlockConfig is a kir.BlockLayout: a weight of kt x nt tiles in runs of
// period columns, groups of dest columns, kb K rows a block of a full
// group.
type BlockConfig struct {
	Kt     int `json:"kt"`
	Nt     int `json:"nt"`
	Period int `json:"period"`
	Dest   int `json:"dest"`
	KB     int `json:"kb"`
}

// Blocks is l as a BlockConfig (nil for nil).
func Blocks(l *kir.BlockLayout) *BlockConfig {
	if l == nil {
		return nil
	}
	return &BlockConfig{Kt: l.Kt, Nt: l.Nt, Period: l.Period, Dest: l.Dest, KB: l.KB}
}

// ShardConfig is a buffer's shard grid and shard shape (elements).
type ShardConfig struct {
	Grid  CoreRange `json:"grid"`
	Shape [2]int    `json:"shape"`
}

// SourceFile is the path of kernel's C++ source relative to the build
// directory: "<program>/<kernel>.cpp". Kernel names are C++ identifiers
// (kir.Validate), so the name is a plain file name; programs are unique per
// build, so the path is unique.
func SourceFile(program, kernel string) string { return program + "/" + kernel + ".cpp" }

// Config returns the host program config of p for target t.
//
// p must pass kir.Validate(p, t); otherwise Config returns that error (a
// kir.Errors) and no config. On success every kernel, CB, semaphore and
// buffer of p appears once, argument vectors come from each kernel's
// argument table (the table the C++ printer reads too), and runtime values
// print with kir.ArgValue.String (numbers for constants).
func Config(p *kir.Program, t *target.Target) (*ProgramConfig, error) {
	if p == nil || t == nil {
		return nil, fmt.Errorf("hostcfg: Config needs a program and a target")
	}
	if err := kir.Validate(p, t); err != nil {
		return nil, err
	}
	return ConfigValidated(p, t)
}

// ConfigValidated is Config for a program the caller has already checked
// with kir.Validate(p, t) (codegen's programs come from lower.Lower, which
// validates every one): it skips the second validation, half of a build's
// time. On an unvalidated program its output is unspecified.
func ConfigValidated(p *kir.Program, t *target.Target) (*ProgramConfig, error) {
	if p == nil || t == nil {
		return nil, fmt.Errorf("hostcfg: Config needs a program and a target")
	}
	cfg := &ProgramConfig{
		Program:    p.Name,
		Kernels:    []KernelConfig{},
		CBs:        []CBConfig{},
		Semaphores: []SemaphoreConfig{},
		Buffers:    []BufferConfig{},
	}
	for _, k := range p.Kernels {
		cfg.Kernels = append(cfg.Kernels, kernelConfig(p, k))
	}
	for _, cb := range p.CBs {
		df, err := target.DataFormatOf(cb.Format)
		if err != nil {
			return nil, fmt.Errorf("hostcfg: program %q CB c_%d: %w", p.Name, cb.Index, err)
		}
		cfg.CBs = append(cfg.CBs, CBConfig{
			Index: cb.Index, Name: cb.Name, PageSize: cb.PageSize, NumPages: cb.Pages, TotalSize: cb.Bytes(),
			DataFormat: df.Name(), DataFormatCode: int(df), Cores: ranges(cb.Cores), BackingBuffer: cb.Backing,
		})
	}
	for _, s := range p.Semaphores {
		sc := SemaphoreConfig{ID: s.ID, Cores: ranges(s.Cores), Initial: s.Initial}
		if len(s.Cores) > 0 && kir.IsEthRange(s.Cores[0]) {
			sc.CoreType = CoreTypeEth
		}
		cfg.Semaphores = append(cfg.Semaphores, sc)
	}
	for _, b := range p.Buffers {
		df, err := target.DataFormatOf(b.DType)
		if err != nil {
			return nil, fmt.Errorf("hostcfg: program %q buffer %q: %w", p.Name, b.Name, err)
		}
		bc := BufferConfig{Name: b.Name, Memory: b.Mem.Kind.String(), DType: b.DType.String(), DataFormat: df.Name(),
			Layout: b.Layout.String(), PageSize: b.PageSize, Pages: b.Pages, Blocks: Blocks(b.Blocks)}
		if b.Mem.Shard != nil {
			bc.Shard = &ShardConfig{Grid: CoreRange(b.Mem.Shard.Grid), Shape: b.Mem.Shard.Shape}
		}
		cfg.Buffers = append(cfg.Buffers, bc)
	}
	return cfg, nil
}

func kernelConfig(p *kir.Program, k *kir.Kernel) KernelConfig {
	kc := KernelConfig{
		Name:              k.Name,
		Source:            SourceFile(p.Name, k.Name),
		Role:              k.Role.String(),
		Processor:         k.Processor.String(),
		Cores:             ranges(k.Cores),
		Defines:           map[string]string{},
		CompileArgs:       []NamedArg{},
		RuntimeArgNames:   []string{},
		RuntimeArgs:       []CoreArgs{},
		CommonRuntimeArgs: []NamedArg{},
	}
	if k.Processor == kir.ComputeProc {
		c := k.Compute
		kc.Compute = &ComputeConfig{MathFidelity: c.MathFidelity.String(), FP32DestAccEn: c.FP32DestAccEn,
			MathApproxMode: c.MathApproxMode, DstFullSyncEn: c.DstFullSyncEn, UnpackToDestFP32: append([]int{}, c.UnpackToDestFP32...)}
	} else {
		noc := k.NoC
		kc.NoC = &noc
	}
	if k.OnEth() {
		kc.Ethernet = &EthernetConfig{EthMode: ethMode(k), NoC: k.NoC, Processor: k.Processor.String()}
	}
	for n, v := range k.Defines {
		kc.Defines[n] = v
	}
	for _, a := range k.ArgsOfKind(kir.CompileTimeArg) {
		kc.CompileArgs = append(kc.CompileArgs, NamedArg{Index: a.Index, Name: a.Name, Value: ArgValue{a.Value}})
	}
	for _, a := range k.ArgsOfKind(kir.RuntimeArg) {
		kc.RuntimeArgNames = append(kc.RuntimeArgNames, a.Name)
	}
	var cores []kir.Core
	if len(kc.RuntimeArgNames) > 0 { // no runtime args: no per-core vectors
		cores = kir.CoresOf(k.Cores)
		kc.RuntimeArgs = make([]CoreArgs, 0, len(cores))
	}
	// Every core's values in one allocation, each core's capped.
	perCore := make([][]kir.ArgValue, len(cores))
	total := 0
	for i, c := range cores {
		perCore[i] = k.RuntimeValuesOn(c)
		total += len(perCore[i])
	}
	all := make([]ArgValue, total)
	for i, c := range cores {
		n := len(perCore[i])
		vs := all[:n:n]
		all = all[n:]
		for j, v := range perCore[i] {
			vs[j] = ArgValue{v}
		}
		kc.RuntimeArgs = append(kc.RuntimeArgs, CoreArgs{Core: Core(c), Values: vs})
	}
	for _, a := range k.ArgsOfKind(kir.CommonRuntimeArg) {
		kc.CommonRuntimeArgs = append(kc.CommonRuntimeArgs, NamedArg{Index: a.Index, Name: a.Name, Value: ArgValue{a.Value}})
	}
	return kc
}

// ethMode is EthSender for a kernel that uses the sending side of the
// ethernet handshake, else EthReceiver.
func ethMode(k *kir.Kernel) string {
	mode := EthReceiver
	kir.Inspect(k.Body, func(s kir.Stmt) bool {
		switch s.(type) {
		case kir.EthSendBytes, kir.EthWaitForReceiverDone, kir.EthSendBytesOverChannelPayloadOnly, kir.EthSendPayloadCompleteSignalOverChannel, kir.EthWaitForReceiverChannelDone:
			mode = EthSender
		}
		return mode == EthReceiver
	})
	return mode
}

func ranges(rs []ir.CoreRange) []CoreRange {
	out := make([]CoreRange, len(rs))
	for i, r := range rs {
		out[i] = CoreRange(r)
	}
	return out
}

// JSON returns the config as indented JSON (two spaces, HTML characters not
// escaped, a final newline). The output is deterministic: struct fields in
// declaration order, define maps sorted by key.
func (c *ProgramConfig) JSON() ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(c); err != nil {
		return nil, fmt.Errorf("hostcfg: program %q: %w", c.Program, err)
	}
	return buf.Bytes(), nil
}

// Marshal is Config followed by JSON.
func Marshal(p *kir.Program, t *target.Target) ([]byte, error) {
	c, err := Config(p, t)
	if err != nil {
		return nil, err
	}
	return c.JSON()
}

// Kernel returns the config of the kernel called name, or nil.
func (c *ProgramConfig) Kernel(name string) *KernelConfig {
	for i := range c.Kernels {
		if c.Kernels[i].Name == name {
			return &c.Kernels[i]
		}
	}
	return nil
}

// Sources lists the kernel source files of the program, sorted.
func (c *ProgramConfig) Sources() []string {
	out := make([]string, len(c.Kernels))
	for i, k := range c.Kernels {
		out[i] = k.Source
	}
	sort.Strings(out)
	return out
}
