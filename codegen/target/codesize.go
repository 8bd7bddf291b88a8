package target

// CodeSize holds what the pinned tt-metal release (TTMetalRelease) does
// with a program's kernel binaries on a Tensix core, and the per-processor
// code budgets tcc holds kernels to. It is the one table of these facts;
// kir.Validate checks every program against it (rule code-size).
//
// Facts, with their sources (paths in the tt-metal tree of TTMetalRelease):
//
//   - Kernel images live in the kernel config ring, not at fixed text
//     addresses: for Tensix, Hal::get_core_kernel_stored_in_config_buffer
//     is true, and program_dispatch::finalize_kernel_bins
//     (tt_metal/impl/program/dispatch.cpp) packs every binary of a kernel
//     group back to back (binary->get_packed_size(), each rounded up to the
//     16-byte L1 alignment) after the group's runtime args, semaphores and
//     CB configs; kernel_config_msg_t.kernel_text_offset[processor]
//     (tt_metal/hw/inc/hostdev/dev_msgs.h) holds each image's offset.
//   - The ring is [KERNEL_CONFIG, DEFAULT_UNRESERVED): KERNEL_CONFIG =
//     MEM_MAP_END, DEFAULT_UNRESERVED = MEM_MAP_END + 69 KiB rounded up to
//     64 (tt_metal/llrt/hal/tt-1xx/blackhole/bh_hal_tensix.cpp,
//     default_l1_kernel_config_size = 69 * 1024), and
//     ProgramImpl::finalize_program_offsets (tt_metal/impl/program/program.cpp)
//     refuses a program with TT_FATAL "Program size (...) too large for
//     kernel config buffer" unless its end offset is strictly below
//     get_ringbuffer_size = l1_unreserved_base - KERNEL_CONFIG.
//   - The offsets are computed component by component, each the maximum
//     over the program's kernel groups (dispatch.cpp): unique runtime args
//     (finalize_rt_args: per group the sum over its kernels of their
//     largest runtime-arg count, 4 bytes each, rounded up to 16), common
//     runtime args (per dispatch class DM0, DM1, compute: the largest
//     count, 4 bytes each, each class rounded up to 16), semaphores
//     (finalize_sems: (largest id + 1) * 16), local CB configs
//     (finalize_cbs: (highest local CB index + 1) * 4 words of 4 bytes),
//     then the binaries (finalize_kernel_bins). A compute kernel is three
//     binaries (TRISC0/1/2), a data-movement kernel one.
//   - Per-processor limits: dev_mem_map.h sets MEM_{BRISC,NCRISC,TRISC0..2}
//     _KERNEL_SIZE = MEM_MAX_KERNEL_SIZE (1497 KiB) at this release, so the
//     ring is the binding limit; tcc keeps the per-processor budgets of
//     Target.CodeBytes (BRISC 48 KiB, NCRISC and each TRISC 24 KiB) so
//     that no single kernel takes most of the ring. Ethernet kernels are
//     held to MEM_ERISC_KERNEL_SIZE (24 KiB, dev_mem_map.h).
//   - Images execute in place: Blackhole's Tensix processors load kernels
//     as ll_api::memory::Loading::CONTIGUOUS_XIP
//     (tt_metal/llrt/hal/tt-1xx/blackhole/bh_hal_tensix.cpp), position
//     independent, and the firmware jumps to kernel_config_base +
//     kernel_text_offset[processor] (brisc.cc, ncrisc.cc, trisc.cc), any
//     L1 address. A persistent program's merged kernels do not fit the
//     ring (tiny-mlp's five binaries alone take an estimated 77 KiB), so
//     tcc places them in an L1 buffer of their own (kir.TextBuffer) and
//     the ring holds their arguments only; each image is held to
//     MEM_MAX_KERNEL_SIZE (XIPImageBytes, dev_mem_map.h), and the buffer
//     takes L1 the phases' CBs cannot use (rule l1-budget).
//   - Build flags: tt-metal builds data-movement kernels at -O2
//     (DataMovementConfig.opt_level, tt_metal/api/tt-metalium/kernel_types.hpp)
//     and compute kernels at -O3 (ComputeConfig.opt_level).
type CodeSize struct {
	// RingBytes is get_ringbuffer_size: the kernel config ring a program's
	// runtime args, semaphores, CB configs and binaries share. A program
	// fits when its end offset is below it (strictly).
	RingBytes int
	// Align is the L1 alignment each ring component and each binary is
	// rounded up to.
	Align int
	// SemaphoreBytes is the ring bytes per semaphore id (one L1 alignment).
	SemaphoreBytes int
	// CBConfigBytes is the ring bytes per local CB index
	// (UINT32_WORDS_PER_LOCAL_CIRCULAR_BUFFER_CONFIG = 4 words).
	CBConfigBytes int
	// EthKernelBytes is the code limit of a kernel on an ethernet core.
	EthKernelBytes int
	// XIPImageBytes is the largest kernel image a Tensix processor runs
	// (MEM_MAX_KERNEL_SIZE): the limit of a persistent program's images,
	// which live outside the ring.
	XIPImageBytes int
}

// BlackholeCodeSize is the CodeSize of the pinned release on Blackhole.
func BlackholeCodeSize() CodeSize {
	l := BlackholeLayout()
	return CodeSize{
		RingBytes:      int(l.Unreserved - l.KernelConfig.Base),
		Align:          16,
		SemaphoreBytes: 16,
		CBConfigBytes:  4 * 4,
		EthKernelBytes: 24 << 10,
		XIPImageBytes:  1497 << 10,
	}
}
