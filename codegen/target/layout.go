package target

import (
	"fmt"
	"sort"
)

// Layout holds every Tensix L1 address, mailbox and launch-message field
// offset, message value and register address of the pinned tt-metal
// release (TTMetalRelease) that a host needs to load firmware and launch
// programs on a Blackhole chip. It is the one table of these facts:
// Blackhole().L1UnreservedBase and the runtime's firmware and launch
// layers read them from here.
//
// Sources (paths in the tt-metal tree of TTMetalRelease): dev_mem_map.h is
// tt_metal/hw/inc/internal/tt-1xx/blackhole/dev_mem_map.h, dev_msgs.h is
// tt_metal/hw/inc/hostdev/dev_msgs.h (struct offsets computed by compiling
// offsetof against it for rv32/ilp32 with -DKERNEL_BUILD -DARCH_BLACKHOLE),
// bh_hal_tensix.cpp is tt_metal/llrt/hal/tt-1xx/blackhole/bh_hal_tensix.cpp,
// tensix.h is tt_metal/hw/inc/internal/tt-1xx/blackhole/tensix.h.
type Layout struct {
	// L1 regions of a Tensix core (dev_mem_map.h unless noted).
	Mailbox        Region // MEM_MAILBOX_BASE, MEM_MAILBOX_SIZE = sizeof(mailboxes_t)
	Zeros          Region // MEM_ZEROS_BASE
	LLKDebug       Region // MEM_LLK_DEBUG_BASE
	Firmware       [5]Region
	NoCCounters    Region // MEM_NOC_COUNTER_BASE
	FabricCounters Region // MEM_FABRIC_COUNTER_BASE
	FabricLock     Region // MEM_FABRIC_CONNECTION_LOCK_BASE
	RoutingTable   Region // MEM_TENSIX_ROUTING_TABLE_BASE
	FabricConns    Region // MEM_TENSIX_FABRIC_CONNECTIONS_BASE
	PacketHeaders  Region // MEM_PACKET_HEADER_POOL_BASE
	// InitScratch are the per-processor areas the host writes the
	// firmware's core-local (0xFFB00000) segments to; the firmware copies
	// them in at boot (do_crt1). Init-only: the kernel config ring reuses
	// them once firmware runs.
	InitScratch [5]Region
	// NCRISCIRAMScratch is MEM_NCRISC_INIT_IRAM_L1_BASE_SCRATCH (init only).
	NCRISCIRAMScratch Region
	// BankToNoC is MEM_BANK_TO_NOC_SCRATCH: dram_bank_to_noc_xy[2][banks]
	// (uint16 (y<<6)|x per NoC), l1_bank_to_noc_xy[2][l1 banks], then
	// int32 bank_to_dram_offset[banks] and bank_to_l1_offset[l1 banks]
	// (firmware_common.h noc_bank_table_init). Init only.
	BankToNoC Region
	// LogicalToVirtual is MEM_LOGICAL_TO_VIRTUAL_SCRATCH: the worker
	// logical column then row to NoC coordinate maps, one byte each
	// (noc_worker_logical_to_virtual_map_init). Init only.
	LogicalToVirtual Region
	// KernelConfig is the kernel config ring: HalL1MemAddrType::KERNEL_CONFIG
	// = MEM_MAP_END, 69 KiB (bh_hal_tensix.cpp default_l1_kernel_config_size).
	// Run time only.
	KernelConfig Region
	// Unreserved is DEFAULT_UNRESERVED: the first byte the host allocator
	// hands out (KernelConfig's end rounded up to 64, bh_hal_tensix.cpp).
	Unreserved uint32
	L1Size     uint32 // MEM_L1_SIZE

	// Core-local memory and registers (per processor view).
	LocalBase      uint32 // MEM_LOCAL_BASE: core-local data memory
	SoftReset      uint32 // RISCV_DEBUG_REG_SOFT_RESET_0 (tensix.h)
	ResetAll       uint32 // BRISC|NCRISC|TRISCS held (tensix.h RISCV_SOFT_RESET_0_*)
	ResetBRISC     uint32 // RISCV_SOFT_RESET_0_BRISC
	NCRISCResetPC  uint32 // RISCV_DEBUG_REG_NCRISC_RESET_PC (tensix.h)
	TRISC0ResetPC  uint32 // RISCV_DEBUG_REG_TRISC0_RESET_PC; TRISC1/2 follow at +4, +8
	BootCodeBase   uint32 // MEM_BOOT_CODE_BASE: BRISC's reset PC, where the host writes a jal
	JALMaxFirmware uint32 // hal.cpp generate_risc_startup_addr: a jal reaches below this

	// CB stream counters (noc_overlay_parameters.h, stream_io_map.h): CB i
	// uses stream i; tiles received is register 10 of its stream
	// (STREAM_REMOTE_DEST_BUF_SIZE_REG_INDEX), tiles acked register 8
	// (STREAM_REMOTE_DEST_BUF_START_REG_INDEX); StreamRegs is
	// NOC_OVERLAY_START_ADDR, StreamStride NOC_STREAM_REG_SPACE_SIZE.
	StreamRegs, StreamStride, TilesReceivedReg, TilesAckedReg uint32

	Msg    MailboxFields
	Launch LaunchFields

	// Go message signals (dev_msgs.h).
	RunMsgInit, RunMsgGo, RunMsgResetReadPtr, RunMsgDone uint8
	// DispatchModeHost is kernel_config_msg_t.mode for host (slow) dispatch.
	DispatchModeHost uint8
	// CoreMagicWorker is core_info_msg_t.core_magic_number of a worker.
	CoreMagicWorker uint32
	// CBConfigWords is the number of uint32 per local CB config in the
	// kernel config blob: address, size, num pages, page size (cb_api.h
	// UINT32_WORDS_PER_LOCAL_CIRCULAR_BUFFER_CONFIG).
	CBConfigWords int
	// SemaphoreStride is the byte distance between semaphores in the blob
	// (L1 alignment, hal L1 alignment = 16).
	SemaphoreStride int
	// Processors is the number of Tensix processors (MaxProcessorsPerCoreType).
	Processors int
	// ProgrammableCoreTypes is ProgrammableCoreType::COUNT.
	ProgrammableCoreTypes int
}

// MailboxFields are byte offsets inside mailboxes_t (dev_msgs.h).
type MailboxFields struct {
	NCRISCHalt, SubordinateSync, LaunchRdPtr, Launch, LaunchSize, LaunchEntries int
	GoMessages, GoMessageIndex, Watcher, DPrint, CoreInfo, Profiler             int
	// core_info_msg_t fields, relative to CoreInfo.
	CoreInfoNoCPCIeBase, CoreInfoNoCDRAMBase, CoreInfoNonWorker, CoreInfoVirtualNonWorker int
	CoreInfoHarvested, CoreInfoNoCSizeX, CoreInfoGridSizeX, CoreInfoLogicalX              int
	CoreInfoL1Unreserved, CoreInfoMagic, CoreInfoSize                                     int
}

// LaunchFields are byte offsets inside kernel_config_msg_t (dev_msgs.h);
// the struct is packed, Size bytes.
type LaunchFields struct {
	KernelConfigBase, SemOffset, LocalCBOffset, RemoteCBOffset, RTAOffset int
	Mode, KernelTextOffset, LocalCBMask, BRISCNoCID, BRISCNoCMode         int
	MinRemoteCBStart, HostAssignedID, Enables, WatcherKernelIDs           int
	NCRISCKernelSize16, SubDeviceOriginX, Preload, Size                   int
}

// Region is a named byte range [Base, Base+Size).
type Region struct {
	Name       string
	Base, Size uint32
	// Phase says when the range is live: regions of different phases may
	// share bytes (the init scratch areas are the kernel config ring).
	Phase Phase
}

// End is Base+Size.
func (r Region) End() uint32 { return r.Base + r.Size }

// Phase is when an L1 region holds live data.
type Phase int

// Phases of Region.Phase.
const (
	Always  Phase = iota // from firmware load on
	Init                 // between firmware load and init done
	Running              // while programs run (after init)
)

// Blackhole L1 layout values of the pinned release.
const (
	bhMailboxBase  = 96    // MEM_MAILBOX_BASE
	bhMailboxSize  = 12896 // MEM_MAILBOX_SIZE, sizeof(mailboxes_t)
	bhZerosBase    = 12992 // (MEM_MAILBOX_END + 31) & ~31
	bhLLKDebugBase = 13504 // MEM_ZEROS_BASE + MEM_ZEROS_SIZE (512)
	bhBRISCFWBase  = 14528 // MEM_LLK_DEBUG_BASE + 1024
	bhMapEnd       = 40416 // MEM_MAP_END
	bhLocalBase    = 0xFFB00000
	bhDebugRegs    = 0xFFB12000 // RISCV_DEBUG_REGS_START_ADDR (tensix.h)
	bhKernelConfig = 69 * 1024
)

// BlackholeLayout returns the Layout of the pinned release on Blackhole.
func BlackholeLayout() *Layout {
	fwSizes := [5]uint32{6*1024 + 2560, 2560, 2560, 2560, 2560} // MEM_{BRISC,NCRISC,TRISC0..2}_FIRMWARE_SIZE
	localSizes := [5]uint32{8 << 10, 8 << 10, 4 << 10, 4 << 10, 4 << 10}
	l := &Layout{
		Mailbox:  Region{"mailbox", bhMailboxBase, bhMailboxSize, Always},
		Zeros:    Region{"zeros", bhZerosBase, 512, Always},
		LLKDebug: Region{"llk debug", bhLLKDebugBase, 1024, Always},
	}
	base := uint32(bhBRISCFWBase)
	for i, s := range fwSizes {
		l.Firmware[i] = Region{"firmware " + ProcessorNames[i], base, s, Always}
		base += s
	}
	l.NoCCounters = Region{"noc counters", base, 5 * 2 * 2 * 4, Always}
	l.FabricCounters = Region{"fabric counters", l.NoCCounters.End(), 3*2*4 + 8, Always}
	l.FabricLock = Region{"fabric connection lock", l.FabricCounters.End(), 144, Always}
	l.RoutingTable = Region{"routing table", l.FabricLock.End(), 2576, Always}
	l.FabricConns = Region{"fabric connections", l.RoutingTable.End(), 656, Always}
	l.PacketHeaders = Region{"packet header pool", l.FabricConns.End(), 144 * 6 * 2 * 2, Always}
	base = l.PacketHeaders.End() // MEM_MAP_END
	for i, s := range localSizes {
		l.InitScratch[i] = Region{"init scratch " + ProcessorNames[i], base, s, Init}
		base += s
	}
	l.NCRISCIRAMScratch = Region{"ncrisc iram scratch", base, 8 << 10, Init}
	l.BankToNoC = Region{"bank to noc tables", l.NCRISCIRAMScratch.End(), 2048, Init}
	l.LogicalToVirtual = Region{"logical to virtual maps", l.BankToNoC.End(), 20 + 12, Init}
	l.KernelConfig = Region{"kernel config ring", bhMapEnd, bhKernelConfig, Running}
	l.Unreserved = (l.KernelConfig.End() - 1) | 63 + 1
	l.L1Size = 1536 * 1024
	l.LocalBase = bhLocalBase
	l.SoftReset = bhDebugRegs | 0x1B0
	l.ResetBRISC = 0x00800
	l.ResetAll = 0x00800 | 0x40000 | 0x07000
	l.NCRISCResetPC = bhDebugRegs | 0x238
	l.TRISC0ResetPC = bhDebugRegs | 0x228
	l.StreamRegs, l.StreamStride, l.TilesReceivedReg, l.TilesAckedReg = 0xFFB40000, 0x1000, 10, 8
	l.BootCodeBase = 0
	l.JALMaxFirmware = 0x0007ffff
	l.Msg = MailboxFields{
		NCRISCHalt: 0, SubordinateSync: 8, LaunchRdPtr: 12, Launch: 16, LaunchSize: 112, LaunchEntries: 8,
		GoMessages: 912, GoMessageIndex: 960, Watcher: 968, DPrint: 1240, CoreInfo: 2264, Profiler: 2528,
		CoreInfoNoCPCIeBase: 0, CoreInfoNoCDRAMBase: 16, CoreInfoNonWorker: 32, CoreInfoVirtualNonWorker: 137,
		CoreInfoHarvested: 224, CoreInfoNoCSizeX: 228, CoreInfoGridSizeX: 230, CoreInfoLogicalX: 232,
		CoreInfoL1Unreserved: 236, CoreInfoMagic: 240, CoreInfoSize: 248,
	}
	l.Launch = LaunchFields{
		KernelConfigBase: 0, SemOffset: 12, LocalCBOffset: 18, RemoteCBOffset: 20, RTAOffset: 22,
		Mode: 42, KernelTextOffset: 44, LocalCBMask: 64, BRISCNoCID: 72, BRISCNoCMode: 73,
		MinRemoteCBStart: 74, HostAssignedID: 76, Enables: 80, WatcherKernelIDs: 84,
		NCRISCKernelSize16: 94, SubDeviceOriginX: 96, Preload: 111, Size: 112,
	}
	l.RunMsgInit, l.RunMsgGo, l.RunMsgResetReadPtr, l.RunMsgDone = 0x40, 0x80, 0xc0, 0
	l.DispatchModeHost = 1
	l.CoreMagicWorker = 0x50ec09a3
	l.CBConfigWords = 4
	l.SemaphoreStride = 16
	l.Processors = 5
	l.ProgrammableCoreTypes = 3
	return l
}

// Indices of the five Tensix RISC-Vs in TensixProcessorTypes order (DM0,
// DM1, MATH0..2), as firmware images, launch-message slots and JIT images
// number them.
const (
	ProcBRISC = iota
	ProcNCRISC
	ProcTRISC0
	ProcTRISC1
	ProcTRISC2
	NumProcs
)

// ProcessorNames names the Tensix processors by index (ProcBRISC ...).
var ProcessorNames = [NumProcs]string{"brisc", "ncrisc", "trisc0", "trisc1", "trisc2"}

// L1Regions lists the layout's L1 regions sorted by base.
func (l *Layout) L1Regions() []Region {
	rs := []Region{l.Mailbox, l.Zeros, l.LLKDebug}
	rs = append(rs, l.Firmware[:]...)
	rs = append(rs, l.NoCCounters, l.FabricCounters, l.FabricLock, l.RoutingTable, l.FabricConns, l.PacketHeaders)
	rs = append(rs, l.InitScratch[:]...)
	rs = append(rs, l.NCRISCIRAMScratch, l.BankToNoC, l.LogicalToVirtual, l.KernelConfig)
	sort.SliceStable(rs, func(i, j int) bool { return rs[i].Base < rs[j].Base })
	return rs
}

// CheckOverlaps returns an error naming the first two regions that share a
// byte while both live (Always overlaps every phase; Init and Running are
// disjoint in time), or one that ends past L1 or past Unreserved.
func (l *Layout) CheckOverlaps() error {
	rs := l.L1Regions()
	for i, a := range rs {
		if a.End() > l.Unreserved || a.End() > l.L1Size {
			return fmt.Errorf("L1 region %q [%#x, %#x) ends past the unreserved base %#x", a.Name, a.Base, a.End(), l.Unreserved)
		}
		for _, b := range rs[i+1:] {
			live := a.Phase == Always || b.Phase == Always || a.Phase == b.Phase
			if live && a.Base < b.End() && b.Base < a.End() {
				return fmt.Errorf("L1 regions %q [%#x, %#x) and %q [%#x, %#x) overlap", a.Name, a.Base, a.End(), b.Name, b.Base, b.End())
			}
		}
	}
	mf := l.Msg
	if end := mf.Launch + mf.LaunchSize*mf.LaunchEntries; end > mf.GoMessages {
		return fmt.Errorf("mailbox: launch ring ends at %d, past go_messages at %d", end, mf.GoMessages)
	}
	if mf.CoreInfo+mf.CoreInfoSize > mf.Profiler || int(l.Mailbox.Size) < mf.Profiler {
		return fmt.Errorf("mailbox: core_info [%d, %d) overlaps profiler at %d", mf.CoreInfo, mf.CoreInfo+mf.CoreInfoSize, mf.Profiler)
	}
	lf := l.Launch
	if lf.Preload != lf.Size-1 || l.Msg.LaunchSize != lf.Size {
		return fmt.Errorf("launch message: preload at %d must be its last byte (size %d)", lf.Preload, lf.Size)
	}
	return nil
}
