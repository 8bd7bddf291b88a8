// Package hostcfg turns a kernel IR program into its host program config:
// the data the host side of tt-metal needs to create and launch the
// program, as a Go value and as deterministic JSON.
//
// A ProgramConfig lists
//
//   - kernels: name, source file (SourceFile: "<program>/<kernel>.cpp"),
//     role, processor (RISCV_0, RISCV_1 or compute), NoC, core ranges, the
//     compute config (math fidelity, fp32_dest_acc_en, math_approx_mode,
//     dst_full_sync_en), defines, compile-time args, per-core runtime args
//     and common runtime args;
//   - CBs: index, page size, page count, total size, data format (name and
//     tt::DataFormat code), core ranges, backing buffer;
//   - semaphores: id, core ranges, initial value, and core_type "ETH" for
//     a semaphore on ethernet cores (CreateSemaphore's CoreType::ETH);
//   - buffers: name, memory placement, dtype, layout, page size and count.
//
// Argument vectors are printed from each kernel's one argument table
// (kir.Kernel.Args), the same table the C++ printer (codegen/cpp) declares
// its get_compile_time_arg_val / get_arg_val / get_common_arg_val locals
// from, so the index a kernel reads and the index the host writes cannot
// disagree. Values the host only knows at load time stay symbolic:
// "addr(buf)+64" is the address of buffer buf plus 64, "noc_x(1,0)" the NoC
// x coordinate of logical core (1,0); constants are JSON numbers.
//
// Programs that every card of a mesh row runs (collectives) place kernels
// and semaphores on ethernet cores and may differ per card only through
// "device_id" values (kir.DeviceID), resolved when the program is loaded
// on card d of the row. An ethernet core prints as "eth3" (channel 3), a
// range of channels as "eth0-eth3", its NoC coordinates as "noc_x(eth3)"
// and "noc_y(eth3)". A kernel on ethernet cores carries an "ethernet"
// object, tt-metal's EthernetConfig (eth_mode SENDER or RECEIVER, both
// active ethernet; noc; processor): the host creates it with that config
// instead of a DataMovementConfig. Worker kernels and semaphores have
// neither field, so their JSON is what it was before ethernet support.
//
// Source files are named by program and kernel rather than by a content
// hash: names are stable across rebuilds and readable in a build
// directory; deduplication of identical kernels is kernels_gen's job.
//
// Config refuses programs that break a hardware rule (kir.Validate), so a
// config that exists describes a program the card can run.
package hostcfg
