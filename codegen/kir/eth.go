package kir

import (
	"fmt"

	"github.com/tcc-dev/tcc/ir"
)

// Ethernet cores and multi-card programs.
//
// Ethernet core (channel) ch is the logical core Core{X: ch, Y: EthRow}: a
// row of its own below the worker grid, so one Core value names either a
// worker or an ethernet core. Kernels and semaphores may be placed on
// ethernet cores (a kernel's cores are all workers or all ethernet cores);
// CBs may not. An ethernet kernel is a reader or writer on RISCV0 or RISCV1
// (the two ERISCs of a Blackhole ethernet core; tt-metal's EthernetConfig
// processor) and may use every data-movement call plus the ethernet calls
// below, which move bytes from its L1 to the L1 of the ethernet core its
// link is cabled to on another card.
//
// The ethernet calls model tt-metal's channel-0 handshake
// (tt_metal/hw/inc/internal/ethernet/dataflow_api.h): each ethernet core has a
// bytes_sent word (erisc_info->channels[0].bytes_sent).
//
//   - eth_send_bytes(src, dst, n, per, per/16) copies n bytes (a multiple
//     of 16) from local L1 src to the peer's L1 dst as ceil(n/per) transmit
//     commands of per bytes and adds n to the local word. Each command
//     (internal_::eth_send_packet, internal/ethernet/tunneling.h:81-95)
//     polls the TX queue, context-switching to the base firmware while it
//     is busy: with the release's default per = 16 a 124 KB send is 7,760
//     commands, so tcc always passes the whole transfer (EthMinCommands);
//   - eth_wait_for_receiver_done() copies the local word to the peer's and
//     blocks until the peer clears it;
//   - eth_wait_for_bytes(n) blocks until the local word equals n;
//   - eth_receiver_done() clears the local word and the peer's.
//
// # Handshake channels
//
// The calls above use one handshake word per kernel: a kernel on ERISC c
// (Processor RISCV0: c = 0, RISCV1: c = 1) uses erisc_info->channels[c]
// (EthChannel). With c = 0 they are tt-metal's channel-0 calls; with c = 1
// the printer emits the same handshake on channel 1 (codegen/cpp). So one
// full-duplex link carries a transfer each way at once: a sender and its
// receiver on ERISC0 of the link's two ends, another pair on ERISC1, each
// pair with its own word on both ends.
//
// So a transfer is: sender eth_send_bytes (any number of times) then
// eth_wait_for_receiver_done; receiver eth_wait_for_bytes(total), use the
// data, eth_receiver_done.
//
// In the default 2-ERISC mode a kernel on ERISC0 shares the core with the
// base firmware, which runs only when the kernel calls run_routing: the
// ethernet calls above do (internal/ethernet/dataflow_api.h:288-304,
// 413-424), and so do eth_noc_semaphore_wait / _wait_min (:68-110), but
// the plain noc_semaphore_wait / _wait_min spin without it. Ethernet
// kernels therefore wait on semaphores with the eth_ forms only
// (RuleEthWait).
//
// A program that runs on every device of a mesh may differ per device only
// through DeviceID argument values, resolved when the program is loaded on
// a device (kir.DeviceResolver).

// EthHandshakeChannels is the number of handshake channels the ethernet
// calls use: erisc_info's channels, MAX_NUM_CONCURRENT_TRANSACTIONS = 8 on
// Blackhole (MEM_MAX_NUM_CONCURRENT_TRANSACTIONS, dev_mem_map.h). The
// channel-0 style calls use one per ERISC of an ethernet core (EthChannel),
// and the channel calls (EthSendPayloadCompleteSignalOverChannel and its
// kin) name any of them.
const EthHandshakeChannels = 8

// EthChannel is the handshake channel (erisc_info->channels[c]) of the
// ethernet calls of a kernel on processor p: 1 on RISCV1, else 0.
func EthChannel(p Processor) int {
	if p == RISCV1 {
		return 1
	}
	return 0
}

// # TX queues and NoCs of the two ERISCs
//
// Every transmit command (internal_::eth_send_packet(q, ...),
// internal/ethernet/tunneling.h) polls TX queue q's busy bit and then
// writes four of its registers (ETH_TXQ_TRANSFER_START_ADDR, _DEST_ADDR,
// _TRANSFER_SIZE_BYTES, _CMD; tt_eth_ss_regs.h). The release's ethernet
// calls (internal/ethernet/dataflow_api.h) all pass q = 0, so two ERISCs
// of one core using them would interleave those writes on one queue: a
// command lost or garbled, a hang or corruption on a card. Blackhole has
// three queues (NUM_ETH_QUEUES); the release's fabric, in 2-ERISC mode,
// sends ERISC1's traffic on TXQ 1 (receiver_txq_id = 1,
// tt_metal/fabric/erisc_datamover_builder.cpp; its router refuses any other
// pair than 0 and 1) after setting the queue up with eth_enable_packet_mode
// (fabric/hw/inc/edm_fabric/fabric_txq_setup.h). tcc does the same: a
// kernel's Kernel.TXQ names its queue, ERISC c's kernels get EthTXQ(c),
// and no two kernels of one ethernet core send on one queue (RuleEthTXQ).
//
// In 2-ERISC mode tt-metal refuses an ethernet kernel on a dedicated NoC
// other than its ERISC's (tt_metal/tt_metal.cpp, "In dual ERISC mode,
// ERISC0 in dedicated mode must use NOC0", "ERISC1 ... must use NOC1"):
// ERISC0's kernel shares its core, and NoC 0, with the base firmware,
// which uses NoC 0 for link health whenever the kernel yields
// (run_routing); ERISC1 on NoC 0 would issue NoC commands on the same
// NIU command buffers at any time. So ERISC c's kernel uses NoC EthNoC(c)
// (RuleEthNoC).

// EthTXQs is the number of TX queues ethernet kernels may send on: 0 and
// 1 (the release's fabric uses no other).
const EthTXQs = 2

// EthTXQ is the TX queue of the kernels on ERISC p: 1 on RISCV1, else 0.
func EthTXQ(p Processor) int {
	if p == RISCV1 {
		return 1
	}
	return 0
}

// EthNoC is the NoC of the kernels on ERISC p: 1 on RISCV1, else 0.
func EthNoC(p Processor) int { return EthTXQ(p) }

// EthSends reports whether s issues transmit commands (each an
// internal_::eth_send_packet on the kernel's TX queue): the sends, and the
// handshake calls that send a bytes_sent word to the peer.
func EthSends(s Stmt) bool {
	switch s.(type) {
	case EthSendBytes, EthWaitForReceiverDone, EthReceiverDone, EthSendBytesOverChannelPayloadOnly,
		EthSendPayloadCompleteSignalOverChannel, EthReceiverChannelDone:
		return true
	}
	return false
}

// KernelSends reports whether k's body issues transmit commands (EthSends).
func KernelSends(k *Kernel) bool {
	sends := false
	Inspect(k.Body, func(s Stmt) bool {
		sends = sends || EthSends(s)
		return !sends
	})
	return sends
}

// EthRow is the logical row of the ethernet cores.
const EthRow = -1

// EthCore is the logical core of ethernet channel ch.
func EthCore(ch int) Core { return Core{X: ch, Y: EthRow} }

// IsEth reports whether c is an ethernet core.
func (c Core) IsEth() bool { return c.Y == EthRow }

// EthRange is the core range of ethernet channels ch0..ch1.
func EthRange(ch0, ch1 int) ir.CoreRange {
	return ir.CoreRange{X0: ch0, Y0: EthRow, X1: ch1, Y1: EthRow}
}

// IsEthRange reports whether r lies in the ethernet row.
func IsEthRange(r ir.CoreRange) bool { return r.Y0 == EthRow && r.Y1 == EthRow }

// OnEth reports whether k runs on ethernet cores (its first range is in the
// ethernet row; Validate checks that all are).
func (k *Kernel) OnEth() bool { return len(k.Cores) > 0 && IsEthRange(k.Cores[0]) }

// GetEthSemaphore is get_semaphore<ProgrammableCoreType::ACTIVE_ETH>(ID):
// the L1 address of semaphore ID on ethernet cores. Ethernet kernels use it
// for their own semaphores, worker kernels to address an ethernet core's
// semaphore through get_noc_addr.
type GetEthSemaphore struct{ ID Expr }

func (GetEthSemaphore) isExpr() {}

// DeviceID is the argument value that resolves to the index of the device
// the program is loaded on (0..N-1 in the mesh row).
func DeviceID() ArgValue { return ArgValue{Kind: ValDeviceID} }

// DeviceResolver is implemented by resolvers that load a program on one
// device of a mesh; ArgValue.Resolve uses it for DeviceID values.
type DeviceResolver interface {
	// DeviceID is the index of the device the program is loaded on.
	DeviceID() (int, error)
}

func resolveDevice(r Resolver) (uint32, error) {
	dr, ok := r.(DeviceResolver)
	if !ok {
		return 0, fmt.Errorf("device_id is only known when the program is loaded on a device of a mesh")
	}
	d, err := dr.DeviceID()
	if err != nil {
		return 0, err
	}
	return uint32(d), nil
}

// EthSendBytes emits eth_send_bytes(src, dst, size, size, size >> 4): the
// whole transfer as one transmit command (size must fit
// target.Ethernet.MaxCommandBytes, which every ethernet L1 buffer does).
// A constant size prints its word count as a constant.
func (b *Builder) EthSendBytes(src, dst, size Expr) {
	words := Shr(size, C(4))
	if c, ok := size.(Const); ok {
		words = C(c.V >> 4)
	}
	b.Emit(EthSendBytes{Src: src, Dst: dst, Size: size, PerSend: size, PerSendWords: words})
}

// EthCommands is the number of transmit commands eth_send_bytes(.., size,
// perSend, ..) issues: its loop sends perSend bytes while fewer than size
// have been sent, so ceil(size / perSend) (0 for size 0; a last command
// past size sends perSend bytes all the same). It returns 0 for perSend 0,
// a loop that never ends on the card (RuleEthSend refuses it).
func EthCommands(size, perSend uint64) uint64 {
	if size == 0 || perSend == 0 {
		return 0
	}
	return (size + perSend - 1) / perSend
}

// EthMinCommands is the fewest commands a send of size bytes (a multiple of
// 16) can be split into when every command is the same whole number of
// 16-byte words, at most maxCommand bytes, and the commands cover exactly
// size bytes: the least k >= ceil(size / maxCommand) dividing size / 16.
// It is 1 for any size up to maxCommand.
func EthMinCommands(size, maxCommand uint64) uint64 {
	words := size / 16
	if words == 0 {
		return 0
	}
	k := max(EthCommands(size, maxCommand/16*16), 1)
	for words%k != 0 {
		k++
	}
	return k
}

// EthWaitForReceiverDone emits eth_wait_for_receiver_done().
func (b *Builder) EthWaitForReceiverDone() { b.Emit(EthWaitForReceiverDone{}) }

// EthWaitForBytes emits eth_wait_for_bytes(size).
func (b *Builder) EthWaitForBytes(size Expr) { b.Emit(EthWaitForBytes{size}) }

// EthReceiverDone emits eth_receiver_done().
func (b *Builder) EthReceiverDone() { b.Emit(EthReceiverDone{}) }

// EthNoCSemaphoreWait emits eth_noc_semaphore_wait(addr, value), the
// semaphore wait of kernels on ethernet cores.
func (b *Builder) EthNoCSemaphoreWait(addr, value Expr) { b.Emit(EthNoCSemaphoreWait{addr, value}) }

// EthNoCSemaphoreWaitMin emits eth_noc_semaphore_wait_min(addr, value).
func (b *Builder) EthNoCSemaphoreWaitMin(addr, value Expr) {
	b.Emit(EthNoCSemaphoreWaitMin{addr, value})
}

// EthSendBytesOverChannelPayloadOnly emits
// eth_send_bytes_over_channel_payload_only(src, dst, size, size, size >> 4):
// the whole transfer as one transmit command, no handshake word.
func (b *Builder) EthSendBytesOverChannelPayloadOnly(src, dst, size Expr) {
	words := Shr(size, C(4))
	if c, ok := size.(Const); ok {
		words = C(c.V >> 4)
	}
	b.Emit(EthSendBytesOverChannelPayloadOnly{Src: src, Dst: dst, Size: size, PerSend: size, PerSendWords: words})
}

// EthSendPayloadCompleteSignalOverChannel emits
// eth_send_payload_complete_signal_over_channel(ch, size).
func (b *Builder) EthSendPayloadCompleteSignalOverChannel(ch, size Expr) {
	b.Emit(EthSendPayloadCompleteSignalOverChannel{Channel: ch, Size: size})
}

// EthWaitForReceiverChannelDone emits eth_wait_for_receiver_channel_done(ch).
func (b *Builder) EthWaitForReceiverChannelDone(ch Expr) {
	b.Emit(EthWaitForReceiverChannelDone{Channel: ch})
}

// EthWaitForBytesOnChannel emits eth_wait_for_bytes_on_channel(size, ch).
func (b *Builder) EthWaitForBytesOnChannel(size, ch Expr) {
	b.Emit(EthWaitForBytesOnChannel{Size: size, Channel: ch})
}

// EthReceiverChannelDone emits eth_receiver_channel_done(ch).
func (b *Builder) EthReceiverChannelDone(ch Expr) { b.Emit(EthReceiverChannelDone{Channel: ch}) }
