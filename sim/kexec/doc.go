// Package kexec is the kernel executor of the simulator: it runs kir
// programs on a simulated Blackhole device, instruction by instruction, and
// so executes exactly the kernel IR the C++ printer prints.
//
// # Device model
//
// A Device has DRAM as target.DRAMBanks banks of bytes and one L1 of
// target.L1Size bytes per worker core (memory is allocated lazily in 4 KiB
// chunks; DRAM and L1 — worker and ethernet — read as garbage until
// written: every 16-bit half 0x7FFF, a NaN as bf16 and fp32, as a card's
// memory holds whatever the last program left, so a kernel that uses L1 it
// never wrote, or a consumer of DRAM padding rows a producer never wrote,
// shows). Buffers are allocated by a
// deterministic first-fit allocator: DRAM buffers at the same address in
// every bank, bottom-up from DRAMBase (page i of an interleaved buffer is in
// bank i%banks at address + (i/banks)*aligned page size); L1 buffers at the
// same address on every core that holds part of them, top-down from the top
// of L1. WritePages / ReadPages / WriteTiles / ReadTiles move a tensor's
// pages between the host and a buffer.
//
// # Running a program
//
// Run places the program's CBs (in index order, 64-byte aligned, from
// L1UnreservedBase up, at one address on all of a CB's cores and not
// overlapping any other CB on a shared core; a CB with a Backing buffer uses
// the buffer's address), writes the semaphores' initial values (semaphore
// id i lives at SemaphoreBase + 16*i, a simulator convention inside the
// reserved region below L1UnreservedBase), resolves every kernel's
// arguments on every core, compiles each kernel body once into a flat
// instruction list and interprets it. Compiling, expressions, arguments and
// the CB and semaphore books are the interpreter core's (sim/interp, shared
// with the timing model); the executor is its machine: each instruction's
// effect on memory and DEST, L1 reads, and what a blocked kernel waits for.
//
// Scheduling is deterministic: the kernels of all cores (row-major, then
// program order) run round-robin, each for up to a quantum of instructions
// or until it blocks. cb_reserve_back blocks until enough pages are free,
// cb_wait_front until enough are available (cumulative from the front),
// noc_semaphore_wait(_min) until the semaphore word satisfies it. When a
// whole round makes no progress and some kernel is unfinished, Run returns
// a *DeadlockError naming every blocked kernel, its core, and the CB or
// semaphore it waits for; a step budget (RunOptions.StepLimit) turns
// infinite loops into a *StepLimitError. Run never hangs.
//
// NoC transfers copy immediately when issued, so the barriers
// (noc_async_read_barrier, noc_async_write_barrier,
// noc_async_writes_flushed) complete at once. Kernels that forget a
// barrier therefore still work in the simulator; that race is not modelled.
//
// Hardware rules that need run-time values are checked as they execute and
// reported as *kir.RuleError with the same Rule names Validate uses: DEST
// indices beyond the capacity (RuleDEST), a CB block straddling the ring's
// end, pushes without room or reads beyond the waited pages (RuleCBFlow),
// DRAM reads that are not 64-byte aligned, whose L1 destination differs
// from the source modulo 64 (Blackhole's NoC shifts such data), or that
// read neither whole pages nor within one page, and DRAM writes not
// 16-byte aligned (RuleDRAMAlign), NoC packets over 16 KiB (RuleNoCPacket),
// out-of-range memory or unknown NoC endpoints (RuleMemory), the
// tile_regs_acquire/commit/wait/release order (RuleTileRegs), a compute op
// without its init (RuleInit), and unpacking or packing a CB whose format
// differs from the configured unpacker or packer format (RuleDataFormat).
//
// # Meshes of cards
//
// A Cluster is N devices joined by ethernet cables (Link: channel a of
// device i to channel b of device j; RingLinks and LineLinks build the
// usual 1xN topologies). Cluster.Run executes one program per device as one
// mesh workload: every device loads its program as Device.Run does
// (kir.DeviceID arguments resolve to the device index) and the kernels of
// all devices are scheduled round-robin together, so transfers between
// devices interleave with the rest. Ethernet cores (kir.EthCore) have their
// own 512 KiB L1 (kernel region target.Ethernet.L1UnreservedBase ..
// L1Top, semaphores just below, at EthSemaphoreBase) and no CBs; NoC reads,
// writes and semaphore increments reach them like worker cores. The
// ethernet calls move bytes to the cabled peer's L1 at once and model
// channel 0's bytes_sent handshake (see kir/eth.go): eth_wait_for_bytes
// and eth_wait_for_receiver_done block until the peer's side of the
// handshake arrives. Every device's bytes_sent words start at 0 in a run.
// When no kernel on any device can move, Run returns a *DeadlockError
// whose entries name device, core, kernel and what each waits for (for a
// receiver: the bytes it expects from which device and channel); sending
// on an uncabled channel is a RuleEthernet error.
//
// # Compute numerics
//
// Compute ops unpack tiles from CB pages with ir/numerics into float32
// DEST tiles (face order). What is modelled:
//
//   - tile_regs_acquire hands out a zeroed DEST; the capacity is
//     target.DestTiles(dst_full_sync_en, fp32_dest_acc_en).
//   - FPU source operands: bf16 and block-float data are exact in bf16;
//     fp32 data is truncated to tf32 (numerics.TruncTF32) and subnormals
//     flush to zero. add, sub, mul and matmul run the FPU datapath bit for
//     bit as ttsim models it (numerics.FPUAdd, FPUSub, FPUMul, MatmulTile:
//     not IEEE arithmetic) at the kernel's math fidelity and DEST format
//     (eltwise in0 feeds SrcA; matmul in1 feeds SrcA); mul accumulates
//     into DEST as ELWMUL does. reduce is not bit-modelled: it multiplies each element by the scaler tile's element (0,0)
//     with FidelityMul and sums (or maxes) in float32; a reduce-max into a
//     DEST tile not yet written by a reduce since tile_regs_acquire takes
//     the reduction itself rather than max(0, ...).
//   - copy_tile of fp32 data copies exactly only from a CB in the kernel's
//     UnpackToDestFP32 list (tt-metal's UnpackToDestFp32, with
//     fp32_dest_acc_en); from any other CB the value passes through source
//     register A and is truncated to tf32 as above. An FPU op reading a CB
//     in that list is a RuleUnpackMode error.
//   - SFPU ops apply the numerics functions (exp, sigmoid, silu, rsqrt,
//     recip, softplus with beta 1, threshold 20) or float32 arithmetic
//     (square, negative, abs, relu, add/mul scalar) or float64 math rounded
//     once (log, sqrt) to every element; math_approx_mode is ignored.
//   - Without fp32_dest_acc_en DEST holds bf16: the FPU datapath rounds
//     in it, SFPU results are truncated to bf16 as SFPSTORE does (low 16
//     bits dropped, subnormals to zero), copies and reduces round to
//     nearest even (numerics.RoundBF16).
//   - pack_tile of an fp32 DEST into a bf16 CB rounds as the packer does,
//     half away from zero (numerics.PackerBF16).
//   - pack_tile packs the DEST tile into the output CB's format with
//     numerics.PackTileDevice: bfp8_b and bfp4_b as ttsim's packer does
//     (the DEST value cut to a bf16 word, rounded half up twice, bfp4_b
//     truncated), other formats as numerics.PackTile. reduce_init programs the packer's edge mask and
//     only reduce_uninit clears it: in between, every pack keeps just the
//     elements a reduction of that dimension produces (column 0 for a row
//     reduce, row 0 for a column reduce, (0,0) for a scalar) and packs
//     zeros elsewhere, as the card's packer does.
//
// A data-movement kernel that ends with noc_semaphore_inc atomics not
// waited for by noc_async_atomic_barrier is a RuleAtomicBarrier error. A
// DRAM write whose bank offset is built on one buffer's address argument
// (through variables with one definition) must stay inside that buffer's
// bank region, not merely inside some buffer: a write that runs into the
// next buffer is a RuleMemory error naming the buffer.
package kexec
