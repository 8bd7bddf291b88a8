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
// (tt_metal/hw/inc/ethernet/dataflow_api.h): each ethernet core has a
// bytes_sent word (erisc_info->channels[0].bytes_sent).
//
//   - eth_send_bytes(src, dst, n) copies n bytes (a multiple of 16) from
//     local L1 src to the peer's L1 dst and adds n to the local word;
//   - eth_wait_for_receiver_done() copies the local word to the peer's and
//     blocks until the peer clears it;
//   - eth_wait_for_bytes(n) blocks until the local word equals n;
//   - eth_receiver_done() clears the local word and the peer's.
//
// So a transfer is: sender eth_send_bytes (any number of times) then
// eth_wait_for_receiver_done; receiver eth_wait_for_bytes(total), use the
// data, eth_receiver_done.
//
// A program that runs on every device of a mesh may differ per device only
// through DeviceID argument values, resolved when the program is loaded on
// a device (kir.DeviceResolver).

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

// EthSendBytes emits eth_send_bytes(src, dst, size).
func (b *Builder) EthSendBytes(src, dst, size Expr) { b.Emit(EthSendBytes{src, dst, size}) }

// EthWaitForReceiverDone emits eth_wait_for_receiver_done().
func (b *Builder) EthWaitForReceiverDone() { b.Emit(EthWaitForReceiverDone{}) }

// EthWaitForBytes emits eth_wait_for_bytes(size).
func (b *Builder) EthWaitForBytes(size Expr) { b.Emit(EthWaitForBytes{size}) }

// EthReceiverDone emits eth_receiver_done().
func (b *Builder) EthReceiverDone() { b.Emit(EthReceiverDone{}) }
