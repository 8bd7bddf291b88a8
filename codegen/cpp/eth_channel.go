package cpp

import (
	"bytes"
	"fmt"

	"github.com/tcc-dev/tcc/codegen/kir"
)

// Ethernet handshake channels and TX queues (kir/eth.go, "Handshake
// channels" and "TX queues and NoCs of the two ERISCs").
//
// A kernel on TX queue 0 (Kernel.TXQ) prints the release's calls, which
// all send on TXQ 0: on ERISC0 the channel-0 calls themselves, on ERISC1
// the channel-1 helpers below, which do what the channel-0 calls do on
// erisc_info->channels[1] with the release's channel calls
// (internal/ethernet/dataflow_api.h: eth_send_bytes_over_channel_payload_only
// :191, eth_wait_for_receiver_channel_done :356, eth_wait_for_bytes_on_channel
// :482, eth_receiver_channel_done :531).
//
// A kernel on TX queue 1 prints every call that sends (kir.EthSends) as a
// queue-1 helper: the same loops and handshake words, each transmit command
// an internal_::eth_send_packet(1, ...) (tunneling.h). Its kernel_main first
// sets the queue up as the release's fabric does before it sends on TXQ 1
// (eth_enable_packet_mode(1), fabric/hw/inc/edm_fabric/fabric_txq_setup.h,
// called by fabric_erisc_router.cpp's initialize_state_for_txq1_active_mode).

// ethChannel1Names maps a channel-0 ethernet call to its channel-1 helper
// (TX queue 0).
var ethChannel1Names = map[string]string{
	"eth_send_bytes":             "tcc_eth_send_bytes_ch1",
	"eth_wait_for_receiver_done": "tcc_eth_wait_for_receiver_done_ch1",
	"eth_wait_for_bytes":         "tcc_eth_wait_for_bytes_ch1",
	"eth_receiver_done":          "tcc_eth_receiver_done_ch1",
}

// ethTXQ1Names maps an ethernet call that sends to its queue-1 helper; the
// channel-0 calls' helpers take the kernel's handshake channel as a
// template argument (printed by ethChannelName).
var ethTXQ1Names = map[string]string{
	"eth_send_bytes":                                "tcc_eth_send_bytes_txq1",
	"eth_wait_for_receiver_done":                    "tcc_eth_wait_for_receiver_done_txq1",
	"eth_receiver_done":                             "tcc_eth_receiver_done_txq1",
	"eth_send_bytes_over_channel_payload_only":      "tcc_eth_send_bytes_over_channel_payload_only_txq1",
	"eth_send_payload_complete_signal_over_channel": "tcc_eth_send_payload_complete_signal_over_channel_txq1",
	"eth_receiver_channel_done":                     "tcc_eth_receiver_channel_done_txq1",
}

// ethChannelTemplated are the queue-1 helpers that take the handshake
// channel as a template argument.
var ethChannelTemplated = map[string]bool{"eth_send_bytes": true, "eth_wait_for_receiver_done": true, "eth_receiver_done": true}

// ethChannel1Helpers defines the helpers of ethChannel1Names.
const ethChannel1Helpers = `// Handshake channel 1 (erisc_info->channels[1]): this kernel runs on ERISC1
// while a transfer the other way over the same link uses channel 0 on ERISC0.
inline void tcc_eth_send_bytes_ch1(
    uint32_t src_addr, uint32_t dst_addr, uint32_t num_bytes, uint32_t num_bytes_per_send, uint32_t num_bytes_per_send_word_size) {
    eth_send_bytes_over_channel_payload_only(src_addr, dst_addr, num_bytes, num_bytes_per_send, num_bytes_per_send_word_size);
    erisc_info->channels[1].bytes_sent += num_bytes;
}
inline void tcc_eth_wait_for_receiver_done_ch1() {
    const uint32_t word = ((uint32_t)(uintptr_t)(&(erisc_info->channels[1].bytes_sent))) >> 4;
    internal_::eth_send_packet(0, word, word, 1);
    eth_wait_for_receiver_channel_done(1);
}
inline void tcc_eth_wait_for_bytes_ch1(uint32_t num_bytes) { eth_wait_for_bytes_on_channel(num_bytes, 1); }
inline void tcc_eth_receiver_done_ch1() { eth_receiver_channel_done(1); }
`

// ethTXQ1Helpers defines the helpers of ethTXQ1Names.
const ethTXQ1Helpers = `// TX queue 1: every transmit command of this kernel goes to TXQ 1, while
// the other ERISC of this ethernet core sends on TXQ 0 (two ERISCs writing
// one queue's registers would race).
inline void tcc_eth_send_bytes_over_channel_payload_only_txq1(
    uint32_t src_addr, uint32_t dst_addr, uint32_t num_bytes, uint32_t num_bytes_per_send, uint32_t num_bytes_per_send_word_size) {
    for (uint32_t sent = 0; sent < num_bytes; sent += num_bytes_per_send) {
        internal_::eth_send_packet(1, (sent + src_addr) >> 4, (sent + dst_addr) >> 4, num_bytes_per_send_word_size);
    }
}
inline void tcc_eth_send_word_txq1(uint32_t channel) {
    const uint32_t word = ((uint32_t)(uintptr_t)(&(erisc_info->channels[channel].bytes_sent))) >> 4;
    internal_::eth_send_packet(1, word, word, 1);
}
inline void tcc_eth_send_payload_complete_signal_over_channel_txq1(uint32_t channel, uint32_t num_bytes) {
    erisc_info->channels[channel].bytes_sent = num_bytes;
    erisc_info->channels[channel].receiver_ack = 0;
    tcc_eth_send_word_txq1(channel);
}
inline void tcc_eth_receiver_channel_done_txq1(uint32_t channel) {
    erisc_info->channels[channel].bytes_sent = 0;
    erisc_info->channels[channel].receiver_ack = 0;
    tcc_eth_send_word_txq1(channel);
}
template <uint32_t channel>
inline void tcc_eth_send_bytes_txq1(
    uint32_t src_addr, uint32_t dst_addr, uint32_t num_bytes, uint32_t num_bytes_per_send, uint32_t num_bytes_per_send_word_size) {
    tcc_eth_send_bytes_over_channel_payload_only_txq1(src_addr, dst_addr, num_bytes, num_bytes_per_send, num_bytes_per_send_word_size);
    erisc_info->channels[channel].bytes_sent += num_bytes;
}
template <uint32_t channel>
inline void tcc_eth_wait_for_receiver_done_txq1() {
    tcc_eth_send_word_txq1(channel);
    eth_wait_for_receiver_channel_done(channel);
}
template <uint32_t channel>
inline void tcc_eth_receiver_done_txq1() { tcc_eth_receiver_channel_done_txq1(channel); }
`

// ethTXQSetupHeader is the release's header of eth_enable_packet_mode.
const ethTXQSetupHeader = "tt_metal/fabric/hw/inc/edm_fabric/fabric_txq_setup.h"

// ethTXQ1 reports whether the kernel sends on TX queue 1.
func (pr *printer) ethTXQ1() bool { return pr.k.OnEth() && pr.k.TXQ == 1 }

// ethChannelName is the printed name of ethernet call name in this kernel:
// on TX queue 1 the queue-1 helper of a call that sends, on ERISC1 (queue
// 0) the channel-1 helper; else name. Helpers used are recorded for
// ethChannelDecls.
func (pr *printer) ethChannelName(name string) string {
	if !pr.k.OnEth() {
		return name
	}
	ch := kir.EthChannel(pr.k.Processor)
	if h, ok := ethTXQ1Names[name]; ok && pr.ethTXQ1() {
		pr.ethQ1 = true
		pr.headers[ethTXQSetupHeader] = true
		if ethChannelTemplated[name] {
			return fmt.Sprintf("%s<%d>", h, ch)
		}
		return h
	}
	if h, ok := ethChannel1Names[name]; ok && ch == 1 {
		pr.ethCh1 = true
		return h
	}
	return name
}

// ethChannelDecls writes the helpers the kernel uses.
func (pr *printer) ethChannelDecls(out *bytes.Buffer) {
	if pr.ethCh1 {
		out.WriteString(ethChannel1Helpers)
		out.WriteByte('\n')
	}
	if pr.ethQ1 {
		out.WriteString(ethTXQ1Helpers)
		out.WriteByte('\n')
	}
}

// ethTXQSetup writes kernel_main's first line when the kernel sends on TX
// queue 1: the queue's setup.
func (pr *printer) ethTXQSetup(out *bytes.Buffer) {
	if pr.ethQ1 {
		out.WriteString("    eth_enable_packet_mode(1);  // set up TX queue 1 as the release's fabric does (fabric_txq_setup.h)\n")
	}
}
