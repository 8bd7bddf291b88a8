package samples

import (
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/ir"
)

// Cards returns the samples that run on every card of a mesh and use the
// ethernet cores. They are not in All: their host configs need ethernet
// kernels and device-dependent values, which codegen/hostcfg does not
// describe yet; the C++ printer tests cover them.
func Cards() []Sample {
	return []Sample{{"eth_link", EthLink()}}
}

// Ethernet channels, L1 address and semaphores of EthLink.
const (
	EthSendChannel = 0
	EthRecvChannel = 1
	// EthStagingAddr is the first kernel-usable byte of a Blackhole
	// ethernet core's L1 (target.Ethernet.L1UnreservedBase).
	EthStagingAddr = 87_872
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
// semaphore (get_semaphore<ProgrammableCoreType::ACTIVE_ETH>) and releases
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
	b.NoCSemaphoreWait(free, kir.C(1))
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
	return p
}
