package kexec

import (
	"fmt"

	"github.com/tcc-dev/tcc/codegen/kir"
)

// ethCore is one ethernet core of a device: its L1 and the bytes_sent words
// of handshake channels 0 and 1 (erisc_info->channels[c].bytes_sent), which
// the ethernet calls of a kernel on ERISC c use for their handshake
// (kir.EthChannel).
type ethCore struct {
	mem       *memory
	bytesSent [kir.EthHandshakeChannels]uint32
}

// ethWord is the bytes_sent word of this kernel's handshake channel on e.
func (ks *kstate) ethWord(e *ethCore) *uint32 { return &e.bytesSent[kir.EthChannel(ks.k.Processor)] }

// eth returns ethernet core ch (allocated on first use); ch must be valid.
func (d *Device) eth(ch int) *ethCore {
	if d.ethCores == nil {
		d.ethCores = make([]*ethCore, d.T.Eth.Cores)
	}
	if d.ethCores[ch] == nil {
		d.ethCores[ch] = &ethCore{mem: newGarbageMemory(uint64(d.T.Eth.L1Size))}
	}
	return d.ethCores[ch]
}

// EthSemaphoreBase is the L1 address of semaphore 0 on every ethernet core
// (a simulator convention inside the reserved region below the ethernet
// L1UnreservedBase, as SemaphoreBase for workers).
func (d *Device) EthSemaphoreBase() uint32 {
	return uint32(d.T.Eth.L1UnreservedBase - d.T.MaxSemaphores*SemaphoreStride)
}

func (d *Device) ethChannel(ch int) error {
	if !d.T.InEth(ch) {
		n := 0
		if d.T.Eth != nil {
			n = d.T.Eth.Cores
		}
		return fmt.Errorf("kexec: ethernet channel %d out of range (%d ethernet cores)", ch, n)
	}
	return nil
}

// ReadEthL1 returns n bytes of ethernet core ch's L1 at addr.
func (d *Device) ReadEthL1(ch int, addr uint32, n int) ([]byte, error) {
	if err := d.ethChannel(ch); err != nil {
		return nil, err
	}
	e := d.eth(ch)
	if !e.mem.inBounds(uint64(addr), uint64(n)) {
		return nil, fmt.Errorf("kexec: ethernet L1 read of %d bytes at %#x on channel %d is out of range", n, addr, ch)
	}
	out := make([]byte, n)
	e.mem.read(uint64(addr), out)
	return out, nil
}

// WriteEthL1 writes data to ethernet core ch's L1 at addr.
func (d *Device) WriteEthL1(ch int, addr uint32, data []byte) error {
	if err := d.ethChannel(ch); err != nil {
		return err
	}
	e := d.eth(ch)
	if !e.mem.inBounds(uint64(addr), uint64(len(data))) {
		return fmt.Errorf("kexec: ethernet L1 write of %d bytes at %#x on channel %d is out of range", len(data), addr, ch)
	}
	e.mem.write(uint64(addr), data)
	return nil
}

// ---- the ethernet calls ----

// ethTXQ records that this kernel issues a transmit command (call) on its
// TX queue (Kernel.TXQ) and refuses (RuleEthTXQ) a queue another kernel
// of this ethernet core has sent on in this run: on a card the two ERISCs'
// register writes to one queue would race (kir.EthTXQ).
func (ks *kstate) ethTXQ(call string) error {
	key := [2]int{ks.core.C.X, ks.k.TXQ}
	if ks.k.TXQ < 0 || ks.k.TXQ >= kir.EthTXQs {
		return ks.errf(kir.RuleEthTXQ, kir.NoCB, "%s on TX queue %d: ethernet kernels send on queues 0..%d", call, ks.k.TXQ, kir.EthTXQs-1)
	}
	if ks.r.txq == nil {
		ks.r.txq = map[[2]int]*kstate{}
	}
	first, ok := ks.r.txq[key]
	if !ok {
		ks.r.txq[key] = ks
		return nil
	}
	if first.k.Processor != ks.k.Processor {
		return ks.errf(kir.RuleEthTXQ, kir.NoCB, "%s on TX queue %d of ethernet core %s, which %s on %s also sends on: the two ERISCs' transmit commands would race on a card", call, ks.k.TXQ, ks.core.C, first.k.Name, first.k.Processor)
	}
	return nil
}

// peer returns the ethernet core at the other end of this kernel's link.
func (ks *kstate) peer(call string) (*ethCore, EthEnd, error) {
	here := EthEnd{Device: ks.r.dev, Channel: ks.core.C.X}
	if !ks.core.Eth {
		return nil, here, ks.errf(kir.RuleEthernet, kir.NoCB, "%s runs on worker core %s; ethernet calls run on ethernet cores", call, ks.core.C)
	}
	if ks.r.mesh == nil {
		return nil, here, ks.errf(kir.RuleEthernet, kir.NoCB, "%s on ethernet channel %d: the program runs on a single device, so no link is cabled (run it on a Cluster)", call, here.Channel)
	}
	there, ok := ks.r.mesh.peers[here]
	if !ok {
		return nil, here, ks.errf(kir.RuleEthernet, kir.NoCB, "%s: ethernet channel %d of device %d is not cabled to another device", call, here.Channel, here.Device)
	}
	return ks.r.mesh.devices[there.Device].eth(there.Channel), there, nil
}

// ethSendBytes is eth_send_bytes(src, dst, size, per, words): the data
// lands in the peer's L1 and the local bytes_sent word grows by size. It
// refuses (RuleEthSend) a send whose transmit commands are not per = words
// x 16 bytes covering size exactly, or are more than the fewest possible
// (kir.EthMinCommands): the release's default of one command per 16 bytes
// is refused for any larger transfer.
func (ks *kstate) ethSendBytes(src, dst, size, per, words uint64) error {
	if err := ks.ethPayload("eth_send_bytes", src, dst, size, per, words); err != nil {
		return err
	}
	*ks.ethWord(ks.r.d.eth(ks.core.C.X)) += uint32(size)
	return nil
}

// ethPayload moves the data of an ethernet send (eth_send_bytes and
// eth_send_bytes_over_channel) into the peer's L1 under ethSendBytes's
// rules, leaving the handshake words alone.
func (ks *kstate) ethPayload(call string, src, dst, size, per, words uint64) error {
	pe, there, err := ks.peer(call)
	if err != nil {
		return err
	}
	if err := ks.ethTXQ(call); err != nil {
		return err
	}
	if size%16 != 0 || src%16 != 0 || dst%16 != 0 {
		return ks.errf(kir.RuleEthernet, kir.NoCB, "%s(%#x, %#x, %d): addresses and size must be multiples of 16 bytes", call, src, dst, size)
	}
	maxCmd := uint64(ks.r.t.Eth.MaxCommandBytes)
	switch {
	case words*16 != per:
		return ks.errf(kir.RuleEthSend, kir.NoCB, "%s(.., %d, %d, %d): num_bytes_per_send_word_size is not num_bytes_per_send / 16", call, size, per, words)
	case size > 0 && (per < 16 || per > maxCmd):
		return ks.errf(kir.RuleEthSend, kir.NoCB, "%s of %d bytes in commands of %d bytes: a command is 16..%d bytes", call, size, per, maxCmd)
	case size%max(per, 1) != 0:
		return ks.errf(kir.RuleEthSend, kir.NoCB, "%s of %d bytes in commands of %d bytes: the last command sends %d bytes past the transfer", call, size, per, per-size%per)
	}
	if got, want := kir.EthCommands(size, per), kir.EthMinCommands(size, maxCmd); got != want {
		return ks.errf(kir.RuleEthSend, kir.NoCB, "%s of %d bytes as %d transmit commands of %d bytes; %d would do", call, size, got, per, want)
	}
	if err := ks.checkL1(src, size, call+" source", false); err != nil {
		return err
	}
	lo, hi := ks.r.ethBounds()
	if dst < lo || dst+size > hi {
		return ks.errf(kir.RuleMemory, kir.NoCB, "%s of %d bytes to L1 %#x of device %d eth%d is outside the writable ethernet L1 [%#x, %#x)", call, size, dst, there.Device, there.Channel, lo, hi)
	}
	buf := make([]byte, size)
	ks.core.mem.read(src, buf)
	pe.mem.write(dst, buf)
	ks.r.stats.EthBytes += int64(size)
	ks.r.stats.EthCommands += int64(kir.EthCommands(size, per))
	return nil
}

func (ks *kstate) ethWaitForReceiverDone() (bool, error) {
	const call = "eth_wait_for_receiver_done"
	pe, there, err := ks.peer(call)
	if err != nil {
		return false, err
	}
	me := ks.ethWord(ks.r.d.eth(ks.core.C.X))
	if !ks.ethSignalled {
		if err := ks.ethTXQ(call); err != nil {
			return false, err
		}
		*ks.ethWord(pe) = *me // the word travels to the receiver once per call
		ks.ethSignalled = true
	}
	if *me != 0 {
		ks.block(call, kir.NoCB, -1, "waits for device %d eth%d to acknowledge %d bytes (eth_receiver_done)", there.Device, there.Channel, *me)
		return true, nil
	}
	ks.ethSignalled = false
	return false, nil
}

func (ks *kstate) ethWaitForBytes(n uint64) (bool, error) {
	const call = "eth_wait_for_bytes"
	_, there, err := ks.peer(call)
	if err != nil {
		return false, err
	}
	if n%16 != 0 {
		return false, ks.errf(kir.RuleEthernet, kir.NoCB, "%s(%d): ethernet transfers are whole 16-byte words", call, n)
	}
	me := ks.ethWord(ks.r.d.eth(ks.core.C.X))
	if uint64(*me) != n&0xffffffff {
		ks.block(call, kir.NoCB, -1, "waits for %d bytes from device %d eth%d, has %d", n, there.Device, there.Channel, *me)
		return true, nil
	}
	return false, nil
}

func (ks *kstate) ethReceiverDone() error {
	pe, _, err := ks.peer("eth_receiver_done")
	if err != nil {
		return err
	}
	if err := ks.ethTXQ("eth_receiver_done"); err != nil {
		return err
	}
	*ks.ethWord(ks.r.d.eth(ks.core.C.X)) = 0
	*ks.ethWord(pe) = 0
	return nil
}

// ethBounds is the writable L1 range of an ethernet core: from the
// semaphores up to the top of the kernel region.
func (r *run) ethBounds() (lo, hi uint64) {
	return uint64(r.d.EthSemaphoreBase()), uint64(r.t.Eth.L1Top)
}

// ---- the channel calls ----

// channelWord is handshake channel ch's bytes_sent word on e; it refuses a
// channel past kir.EthHandshakeChannels.
func (ks *kstate) channelWord(e *ethCore, call string, ch uint64) (*uint32, error) {
	if ch >= kir.EthHandshakeChannels {
		return nil, ks.errf(kir.RuleEthernet, kir.NoCB, "%s on handshake channel %d: channels are 0..%d", call, ch, kir.EthHandshakeChannels-1)
	}
	return &e.bytesSent[ch], nil
}

// channelEnds is what a channel call on handshake channel ch works on:
// the peer's ethernet core, the peer's end and this core's word for ch.
func (ks *kstate) channelEnds(call string, ch uint64) (peer *ethCore, there EthEnd, me *uint32, err error) {
	peer, there, err = ks.peer(call)
	if err != nil {
		return nil, there, nil, err
	}
	me, err = ks.channelWord(ks.r.d.eth(ks.core.C.X), call, ch)
	return peer, there, me, err
}

// ethSignalOverChannel is eth_send_payload_complete_signal_over_channel(ch,
// size): channel ch's word set to size here and on the peer (the word
// travels behind the payload sent before); no wait.
func (ks *kstate) ethSignalOverChannel(ch, size uint64) error {
	const call = "eth_send_payload_complete_signal_over_channel"
	pe, _, me, err := ks.channelEnds(call, ch)
	if err != nil {
		return err
	}
	if err := ks.ethTXQ(call); err != nil {
		return err
	}
	*me = uint32(size)
	pe.bytesSent[ch] = uint32(size)
	return nil
}

// ethWaitForReceiverChannelDone blocks until channel ch's word is 0 here.
func (ks *kstate) ethWaitForReceiverChannelDone(ch uint64) (bool, error) {
	const call = "eth_wait_for_receiver_channel_done"
	_, there, me, err := ks.channelEnds(call, ch)
	if err != nil {
		return false, err
	}
	if *me != 0 {
		ks.block(call, kir.NoCB, -1, "waits for device %d eth%d to acknowledge %d bytes on channel %d (eth_receiver_channel_done)", there.Device, there.Channel, *me, ch)
		return true, nil
	}
	return false, nil
}

// ethWaitForBytesOnChannel blocks until channel ch's word equals n here.
func (ks *kstate) ethWaitForBytesOnChannel(n, ch uint64) (bool, error) {
	const call = "eth_wait_for_bytes_on_channel"
	_, there, me, err := ks.channelEnds(call, ch)
	if err != nil {
		return false, err
	}
	if n%16 != 0 {
		return false, ks.errf(kir.RuleEthernet, kir.NoCB, "%s(%d): ethernet transfers are whole 16-byte words", call, n)
	}
	if uint64(*me) != n&0xffffffff {
		ks.block(call, kir.NoCB, -1, "waits for %d bytes on channel %d from device %d eth%d, has %d", n, ch, there.Device, there.Channel, *me)
		return true, nil
	}
	return false, nil
}

// ethReceiverChannelDone clears channel ch's word here and on the peer.
func (ks *kstate) ethReceiverChannelDone(ch uint64) error {
	const call = "eth_receiver_channel_done"
	pe, _, me, err := ks.channelEnds(call, ch)
	if err != nil {
		return err
	}
	if err := ks.ethTXQ(call); err != nil {
		return err
	}
	*me = 0
	pe.bytesSent[ch] = 0
	return nil
}
