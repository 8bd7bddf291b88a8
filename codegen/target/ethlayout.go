package target

// ActiveEthLayout is the memory map of an active ethernet core of the
// pinned release (TTMetalRelease) in its default 2-ERISC mode, and the
// launch-message layout ttsim's two-chip library reads instead: the one
// table the runtime's firmware load (runtime/blackhole/firmware BootEth),
// its launches (runtime/blackhole/launch CardEthLayout, TTSimEthLayout)
// and the JIT's ttsim prologue (runtime/blackhole/jit) take their
// addresses from.
//
// Sources: tt_metal/hw/inc/internal/tt-1xx/blackhole/dev_mem_map.h and
// eth_fw_api.h, llrt/hal/tt-1xx/blackhole/bh_hal_active_eth.cpp
// (configure_for_2erisc), impl/context/metal_context.cpp
// (initialize_firmware, ACTIVE_ETH), and hostdev/dev_msgs.h compiled with
// COMPILE_FOR_ERISC (PROCESSOR_COUNT 2: the mailbox's dprint buffers are
// smaller than a Tensix's, so core_info and profiler sit lower); ttsim
// v1.10.0 src/tile.cpp for the TTSim* fields.
type ActiveEthLayout struct {
	// MailboxBase is MEM_AERISC_MAILBOX_BASE; CoreInfo and Profiler are
	// mailboxes_t's core_info and profiler offsets (the fields before
	// them are a Tensix mailbox's: Layout.Msg).
	MailboxBase        uint32
	CoreInfo, Profiler int
	// FirmwareBase[i] and FirmwareSize are ERISCi's firmware text
	// (MEM_AERISC_FIRMWARE_BASE, MEM_SUBORDINATE_AERISC_FIRMWARE_BASE,
	// MEM_ERISC_FIRMWARE_SIZE); InitScratch[i] is where the host puts
	// ERISCi's core-local data for its firmware to copy at boot
	// (MEM_*AERISC_INIT_LOCAL_L1_BASE_SCRATCH). ERISC0's local data is
	// linked above the base firmware's (BaseFWLocal bytes,
	// MEM_ERISC_BASE_FW_LOCAL_SIZE), which the relocation undoes
	// (bh_hal.cpp relocate_func_).
	FirmwareBase [2]uint32
	FirmwareSize uint32
	InitScratch  [2]uint32
	BaseFWLocal  uint32
	// KernelConfigBase and KernelConfigSize are the kernel config ring
	// (MEM_AERISC_MAP_END, MEM_ERISC_KERNEL_CONFIG_SIZE); BankToNoC the
	// bank-to-NoC tables the firmware reads at init
	// (MEM_AERISC_BANK_TO_NOC_SCRATCH).
	KernelConfigBase, KernelConfigSize uint32
	BankToNoC                          uint32
	// CoreMagic is core_info_msg_t.core_magic_number of an active
	// ethernet core (CoreMagicNumber::ACTIVE_ETH).
	CoreMagic uint32
	// FWMailbox is the base firmware's mailbox 0 (MEM_SYSENG_ETH_MAILBOX_ADDR):
	// a message word then FWMailboxArgs argument words. The host writes the
	// arguments, then MsgCall|MsgReleaseCore; the base firmware jumps ERISC0
	// to argument 0 and the word reads MsgDone|MsgReleaseCore
	// (MEM_SYSENG_ETH_MSG_*; llrt.cpp send_msg_to_eth_mailbox).
	FWMailbox                                       uint32
	FWMailboxArgs                                   int
	MsgCall, MsgDone, MsgStatusMask, MsgReleaseCore uint32
	// ResetHold is the soft reset value the host writes before the load:
	// every RISC-V held but ERISC0, which runs the base firmware
	// (RiscType::ALL_TENSIX &~ ERISC0); the active-erisc firmware
	// releases ERISC1 itself.
	ResetHold uint32
	// TTSimMailbox, TTSimLaunchSize, TTSimGoMessages and
	// TTSimSemOffsets are the launch-message layout ttsim's bh_x2 reads
	// (a newer tt-metal's, with four programmable core types):
	// launch_msg_rd_ptr at mailbox +12, launch[] at +16 of TTSimLaunchSize
	// bytes, go_messages[0] at +TTSimGoMessages (L1 0x590), and in a
	// launch message kernel_config_base[4] at +0, sem_offset[4] at
	// +TTSimSemOffsets.
	TTSimMailbox                                      uint32
	TTSimLaunchSize, TTSimGoMessages, TTSimSemOffsets int
	// TTSimRTAOffsets is rta_offset[] in ttsim's launch message (rta and
	// crta offsets, 2 B each, per processor).
	TTSimRTAOffsets int
}

// BlackholeActiveEth returns the pinned release's active ethernet core map.
// Postcondition: FirmwareBase[1] = FirmwareBase[0] + FirmwareSize,
// KernelConfigBase = FirmwareBase[1] + FirmwareSize = InitScratch[0], and
// InitScratch[1] = InitScratch[0] + 8 KiB - BaseFWLocal.
func BlackholeActiveEth() *ActiveEthLayout {
	const (
		mailbox     = 0x100      // MEM_ERISC_RESERVED1 + MEM_ERISC_RESERVED1_SIZE
		mailboxSize = 12768      // MEM_ERISC_MAILBOX_SIZE
		inline      = 16 * 2 * 2 // MEM_L1_INLINE_SIZE_PER_NOC * 2 NoCs * 2
		voidFlag    = 16         // MEM_AERISC_VOID_LAUNCH_FLAG_SIZE
		fwSize      = 24 << 10   // MEM_ERISC_FIRMWARE_SIZE
		localSize   = 8 << 10    // MEM_ERISC_LOCAL_SIZE
		baseFWLocal = 0x700      // MEM_ERISC_BASE_FW_LOCAL_SIZE
		kcSize      = 0x6400     // MEM_ERISC_KERNEL_CONFIG_SIZE
		fw0         = mailbox + mailboxSize + inline + voidFlag
	)
	e := &ActiveEthLayout{
		MailboxBase: mailbox, CoreInfo: 1648, Profiler: 1904,
		FirmwareBase: [2]uint32{fw0, fw0 + fwSize}, FirmwareSize: fwSize,
		BaseFWLocal:      baseFWLocal,
		KernelConfigBase: fw0 + 2*fwSize, KernelConfigSize: kcSize,
		CoreMagic: 0xc63050d1,
		FWMailbox: 0x7D000, FWMailboxArgs: 3,
		MsgCall: 0xCA110000, MsgDone: 0xD0E50000, MsgStatusMask: 0xFFFF0000, MsgReleaseCore: 0x0002,
		ResetHold:    0x47000,
		TTSimMailbox: mailbox, TTSimLaunchSize: 144, TTSimGoMessages: 0x490, TTSimSemOffsets: 16, TTSimRTAOffsets: 28,
	}
	e.InitScratch = [2]uint32{e.KernelConfigBase, e.KernelConfigBase + localSize - baseFWLocal}
	e.BankToNoC = e.InitScratch[1] + localSize
	return e
}
