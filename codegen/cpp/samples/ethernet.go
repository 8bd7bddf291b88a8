package samples

import (
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
)

// Cards returns the samples that run on every card of a mesh and use the
// ethernet cores (they are also in All, so the printer goldens, the host
// config goldens and the g++ syntax check cover them).
func Cards() []Sample {
	return []Sample{{"eth_link", EthLink()}, {"eth_ring_shift", EthRingShift()}, {"eth_ring_shift_channels", EthRingShiftChannels()}}
}

// EthStagingAddr is the first kernel-usable byte of a Blackhole ethernet
// core's L1, from the target table of the pinned release.
var EthStagingAddr = uint32(target.Blackhole().Eth.L1UnreservedBase)

// Ethernet channels and semaphores of EthLink.
const (
	EthSendChannel = 0
	EthRecvChannel = 1
	// SemEthFree is the semaphore on the receiving ethernet core the worker
	// increments when it has copied the tile out; SemTileReady the worker
	// semaphore the ethernet core increments when a tile has arrived.
	SemEthFree   = 0
	SemTileReady = 0
)

// EthLink moves one bf16 tile from card d to card d+1 over ethernet; each
// card runs the same program. Ethernet core 0 reads tile "src" from DRAM
// into its L1 and sends it to the ethernet core its link reaches (channel 1
// of the next card) with eth_send_bytes + eth_wait_for_receiver_done.
// Ethernet core 1 waits for the bytes, tells worker (0,0) through its
// semaphore, waits for the worker's acknowledgement on its own ethernet
// semaphore (get_semaphore<ProgrammableCoreType::ACTIVE_ETH>, eth_noc_semaphore_wait) and releases
// the sender with eth_receiver_done. The worker's reader copies the tile
// from the ethernet core's L1 into c_16 and its writer stores it to "dst".
// In a ring of cards, "dst" of card d+1 ends up holding "src" of card d.
func EthLink() *kir.Program {
	tile := ir.BF16.TileBytes()
	worker := kir.Core{X: 0, Y: 0}
	send, recv := kir.EthCore(EthSendChannel), kir.EthCore(EthRecvChannel)
	p := kir.NewProgram("eth_link")
	p.AddBuffer(dramTiles("src", 1))
	p.AddBuffer(dramTiles("dst", 1))
	p.AddCB(kir.CB{Index: CBOut, PageSize: tile, Pages: 1, Format: ir.BF16, Cores: rangeOf(worker), Name: "received"})
	p.AddSemaphore(kir.Semaphore{ID: SemEthFree, Cores: rangeOf(recv)})
	p.AddSemaphore(kir.Semaphore{ID: SemTileReady, Cores: rangeOf(worker)})

	// Sender: DRAM -> ethernet L1 -> the next card.
	es := p.AddKernel(&kir.Kernel{Name: "eth_sender", Role: kir.RoleReader, Processor: kir.RISCV0, NoC: 0, Cores: rangeOf(send)})
	staging := es.CompileArg("staging_addr", EthStagingAddr)
	src := es.CommonArg("src_addr", kir.BufferAddr("src", 0))
	b := es.Builder()
	b.NoCAsyncRead(kir.DRAMBankAddr{Bank: kir.C(0), Offset: src}, staging, kir.Ci(tile))
	b.NoCAsyncReadBarrier()
	b.EthSendBytes(staging, staging, kir.Ci(tile))
	b.EthWaitForReceiverDone()

	// Receiver: wait for the tile, hand it to the worker, release the sender.
	er := p.AddKernel(&kir.Kernel{Name: "eth_receiver", Role: kir.RoleWriter, Processor: kir.RISCV0, NoC: 0, Cores: rangeOf(recv)})
	wx, wy := er.CommonArg("worker_x", kir.NoCX(worker)), er.CommonArg("worker_y", kir.NoCY(worker))
	b = er.Builder()
	b.EthWaitForBytes(kir.Ci(tile))
	b.NoCSemaphoreInc(kir.NoCAddr{X: wx, Y: wy, Addr: kir.GetSemaphore{ID: kir.C(SemTileReady)}}, kir.C(1))
	free := b.Let("free_sem", kir.GetEthSemaphore{ID: kir.C(SemEthFree)})
	b.EthNoCSemaphoreWait(free, kir.C(1))
	b.NoCSemaphoreSet(free, kir.C(0))
	b.EthReceiverDone()

	// Worker reader: ethernet L1 -> c_16, then acknowledge.
	rd := p.AddKernel(&kir.Kernel{Name: "reader", Role: kir.RoleReader, Processor: kir.RISCV1, NoC: 1, Cores: rangeOf(worker)})
	ex, ey := rd.CommonArg("eth_x", kir.NoCX(recv)), rd.CommonArg("eth_y", kir.NoCY(recv))
	rstaging := rd.CompileArg("staging_addr", EthStagingAddr)
	b = rd.Builder()
	ready := b.Let("ready_sem", kir.GetSemaphore{ID: kir.C(SemTileReady)})
	b.NoCSemaphoreWait(ready, kir.C(1))
	b.CBReserveBack(CBOut, kir.C(1))
	b.NoCAsyncRead(kir.NoCAddr{X: ex, Y: ey, Addr: rstaging}, kir.GetWritePtr{CB: CBOut}, kir.Ci(tile))
	b.NoCAsyncReadBarrier()
	b.CBPushBack(CBOut, kir.C(1))
	b.NoCSemaphoreInc(kir.NoCAddr{X: ex, Y: ey, Addr: kir.GetEthSemaphore{ID: kir.C(SemEthFree)}}, kir.C(1))

	// Worker writer: c_16 -> DRAM.
	wr := p.AddKernel(&kir.Kernel{Name: "writer", Role: kir.RoleWriter, Processor: kir.RISCV0, NoC: 0, Cores: rangeOf(worker)})
	dst := wr.CommonArg("dst_addr", kir.BufferAddr("dst", 0))
	b = wr.Builder()
	b.CBWaitFront(CBOut, kir.C(1))
	b.NoCAsyncWrite(kir.GetReadPtr{CB: CBOut}, kir.DRAMBankAddr{Bank: kir.C(0), Offset: dst}, kir.Ci(tile))
	b.NoCAsyncWriteBarrier()
	b.CBPopFront(CBOut, kir.C(1))
	return finish(p)
}

// EthRingShiftPages is the page count of EthRingShift's buffers: the
// largest ring it serves.
const EthRingShiftPages = 8

// SemRingDone is EthRingShift's semaphore on both ethernet cores; the
// sender's copy counts the tiles its card's receiver has stored.
const SemRingDone = 0

// EthRingShift moves one bf16 tile per card one step around a ring of up
// to EthRingShiftPages cards, using only ethernet cores and the device
// index: card d's sender (ethernet core 0) reads page device_id of "src"
// into its L1 and sends it to the next card; card d's receiver (ethernet
// core 1) waits for the tile, writes it to page device_id of "dst",
// increments its own card's sender's semaphore and releases the previous
// card's sender. The sender finishes once its card has received too. In a
// ring of N cards, page d of "dst" on card d ends up holding page
// e = (d-1) mod N of "src" on card e; the other pages of "dst" are not
// written.
func EthRingShift() *kir.Program { return ethRingShift("eth_ring_shift", false) }

// EthRingShiftHandshake is the handshake channel EthRingShiftChannels uses.
const EthRingShiftHandshake = 2

// EthRingShiftChannels is EthRingShift with the channel calls on handshake
// channel EthRingShiftHandshake: the sender's
// eth_send_bytes_over_channel_payload_only, then
// eth_send_payload_complete_signal_over_channel and
// eth_wait_for_receiver_channel_done; the receiver's
// eth_wait_for_bytes_on_channel and eth_receiver_channel_done.
func EthRingShiftChannels() *kir.Program {
	return ethRingShift("eth_ring_shift_channels", true)
}

func ethRingShift(name string, channels bool) *kir.Program {
	tile := ir.BF16.TileBytes()
	send, recv := kir.EthCore(EthSendChannel), kir.EthCore(EthRecvChannel)
	ch := kir.C(EthRingShiftHandshake)
	p := kir.NewProgram(name)
	p.AddBuffer(dramTiles("src", EthRingShiftPages))
	p.AddBuffer(dramTiles("dst", EthRingShiftPages))
	p.AddSemaphore(kir.Semaphore{ID: SemRingDone, Cores: []ir.CoreRange{kir.EthRange(EthSendChannel, EthRecvChannel)}})

	es := p.AddKernel(&kir.Kernel{Name: "eth_sender", Role: kir.RoleReader, Processor: kir.RISCV0, NoC: 0, Cores: rangeOf(send)})
	staging := es.CompileArg("staging_addr", EthStagingAddr)
	dev := es.CommonArg("device_id", kir.DeviceID())
	src := es.CommonArg("src_addr", kir.BufferAddr("src", 0))
	b := es.Builder()
	b.NoCAsyncRead(kir.InterleavedPageAddr(src, dev, stride), staging, kir.Ci(tile))
	b.NoCAsyncReadBarrier()
	if channels {
		b.EthSendBytesOverChannelPayloadOnly(staging, staging, kir.Ci(tile))
		b.EthSendPayloadCompleteSignalOverChannel(ch, kir.Ci(tile))
		b.EthWaitForReceiverChannelDone(ch)
	} else {
		b.EthSendBytes(staging, staging, kir.Ci(tile))
		b.EthWaitForReceiverDone()
	}
	done := b.Let("done_sem", kir.GetEthSemaphore{ID: kir.C(SemRingDone)})
	b.EthNoCSemaphoreWaitMin(done, kir.C(1))

	er := p.AddKernel(&kir.Kernel{Name: "eth_receiver", Role: kir.RoleWriter, Processor: kir.RISCV0, NoC: 0, Cores: rangeOf(recv)})
	rstaging := er.CompileArg("staging_addr", EthStagingAddr)
	rdev := er.CommonArg("device_id", kir.DeviceID())
	dst := er.CommonArg("dst_addr", kir.BufferAddr("dst", 0))
	sx, sy := er.CommonArg("sender_x", kir.NoCX(send)), er.CommonArg("sender_y", kir.NoCY(send))
	b = er.Builder()
	if channels {
		b.EthWaitForBytesOnChannel(kir.Ci(tile), ch)
	} else {
		b.EthWaitForBytes(kir.Ci(tile))
	}
	b.NoCAsyncWrite(rstaging, kir.InterleavedPageAddr(dst, rdev, stride), kir.Ci(tile))
	b.NoCAsyncWriteBarrier()
	b.NoCSemaphoreInc(kir.NoCAddr{X: sx, Y: sy, Addr: kir.GetEthSemaphore{ID: kir.C(SemRingDone)}}, kir.C(1))
	if channels {
		b.EthReceiverChannelDone(ch)
	} else {
		b.EthReceiverDone()
	}
	return finish(p)
}
