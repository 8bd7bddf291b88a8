package launch

import "github.com/tcc-dev/tcc/codegen/target"

// Ethernet launches on ttsim.
//
// ttsim's two-chip library (bh_x2, v1.10.0) does not run the active-erisc
// firmware: a RUN_MSG_GO written to an active (linked) ethernet core's
// go_messages[0] at L1 0x590 jumps ERISC0 straight into the kernel at
// kernel_config_base[ACTIVE_ETH] + kernel_text_offset[DM0] of the launch
// message launch[launch_msg_rd_ptr] of the mailbox at L1 0x100 (rd_ptr at
// +12, launch[] at +16, 144 B each; kernel_config_base[1] at +4,
// rta_offset[DM0] at +28 and +30, kernel_text_offset[DM0] at +52), with
// rta_l1_base and crta_l1_base set from it, and sets RUN_MSG_DONE when the
// kernel returns (ttsim src/tile.cpp). Those offsets are a launch_msg_t of
// four programmable core types (launch_msg_t 144 B, go_messages at
// mailbox +0x490): a newer tt-metal's, not the pinned release's three
// (target.BlackholeLayout: 112 B, go_messages at +912). TTSimEthLayout is
// that layout; the kernel itself never reads the launch message, so
// kernels built against the pinned release run under it. A card runs the
// active-erisc firmware, which reads the pinned release's layout:
// CardEthLayout, after runtime/blackhole/firmware BootEth loaded it.
//
// ttsim sets no other firmware global: sem_l1_base (get_semaphore),
// the bank-to-NoC tables (interleaved DRAM/L1 addressing) and the NoC
// counters stay as the core's local memory holds them. The kernel's own
// _start initialises the NoC counters (noc_local_state_init); a kernel
// built for ttsim sets sem_l1_base[] from this launch message's
// kernel_config_base[] and sem_offset[] itself (runtime/blackhole/jit
// ttsimeth.go), which is why Blob writes every core type's (Program.Peers).
// The bank tables are not set: ethernet kernels must address memory by
// explicit NoC coordinates (tcc's collectives do).

// Active ethernet L1 addresses of the pinned release (dev_mem_map.h;
// target.BlackholeActiveEth).
const (
	EthMailboxBase      = 0x100  // MEM_AERISC_MAILBOX_BASE
	EthKernelConfigBase = 0xF330 // MEM_AERISC_MAP_END: HalL1MemAddrType::KERNEL_CONFIG of ACTIVE_ETH
	EthKernelConfigSize = 0x6400 // MEM_ERISC_KERNEL_CONFIG_SIZE
)

// ethRegions is l with the active-erisc mailbox and kernel config ring of
// a, and the active-erisc mailbox's core_info and profiler offsets.
func ethRegions(l *target.Layout, a *target.ActiveEthLayout) *target.Layout {
	e := *l
	e.Mailbox = target.Region{Name: "active erisc mailbox", Base: a.MailboxBase, Size: l.Mailbox.Size, Phase: target.Always}
	e.KernelConfig = target.Region{Name: "active erisc kernel config ring", Base: a.KernelConfigBase, Size: a.KernelConfigSize, Phase: target.Running}
	e.Unreserved = (e.KernelConfig.End() - 1) | 63 + 1
	e.Msg.CoreInfo, e.Msg.Profiler = a.CoreInfo, a.Profiler
	return &e
}

// CardEthLayout returns the layout launches on a card's active ethernet
// cores use, read by the active-erisc firmware the runtime loads
// (firmware.BootEth): the pinned release's launch message (l.Launch, three
// programmable core types) with the ACTIVE_ETH entries of
// kernel_config_base[] and sem_offset[], in the active-erisc mailbox, so
// go_messages[0] is at L1 0x490. Postcondition: Launch.KernelConfigBase
// is 4 and Launch.SemOffset is l.Launch.SemOffset + 2; every other field
// of Msg before CoreInfo and of Launch is l's.
func CardEthLayout(l *target.Layout) *target.Layout {
	e := ethRegions(l, target.BlackholeActiveEth())
	e.Launch.KernelConfigBase = l.Launch.KernelConfigBase + 4*CoreActiveEth
	e.Launch.SemOffset = l.Launch.SemOffset + 2*CoreActiveEth
	return e
}

// TTSimEthLayout returns the layout launches on ttsim's active ethernet
// cores use: l (the Tensix layout, for its signals and config strides)
// with the active-erisc mailbox and kernel config ring and ttsim's launch
// message offsets (see above; target.ActiveEthLayout's TTSim* fields).
// Postcondition: Mailbox.Base + Msg.GoMessages is 0x590 and
// Launch.KernelConfigBase, RTAOffset and KernelTextOffset are 4, 28 and 52.
func TTSimEthLayout(l *target.Layout) *target.Layout {
	a := target.BlackholeActiveEth()
	e := *ethRegions(l, a)
	m := e.Msg
	m.Launch, m.LaunchRdPtr, m.LaunchSize, m.GoMessages = 16, 12, a.TTSimLaunchSize, a.TTSimGoMessages
	e.Msg = m
	// kernel_config_msg_t with kernel_config_base[4] and sem_offset[4]:
	// every field after sem_offset moves by 6 B, after mode (the
	// 4-aligned kernel_text_offset on) by 8 B.
	f := l.Launch
	f.KernelConfigBase = 4 // kernel_config_base[ACTIVE_ETH]
	f.SemOffset = 16 + 2   // sem_offset[ACTIVE_ETH]
	f.LocalCBOffset, f.RemoteCBOffset, f.RTAOffset, f.Mode = f.LocalCBOffset+6, f.RemoteCBOffset+6, f.RTAOffset+6, f.Mode+6
	for _, p := range []*int{&f.KernelTextOffset, &f.LocalCBMask, &f.BRISCNoCID, &f.BRISCNoCMode, &f.MinRemoteCBStart,
		&f.HostAssignedID, &f.Enables, &f.WatcherKernelIDs, &f.NCRISCKernelSize16, &f.SubDeviceOriginX, &f.Preload} {
		*p += 8
	}
	f.Size = 144
	e.Launch = f
	return &e
}
