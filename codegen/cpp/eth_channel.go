package cpp

import (
	"bytes"

	"github.com/tcc-dev/tcc/codegen/kir"
)

// Ethernet handshake channels (kir/eth.go, "Handshake channels"): the
// ethernet calls of a kernel on ERISC0 are tt-metal's channel-0 calls; a
// kernel on ERISC1 uses erisc_info->channels[1], through the helpers
// below, which do what the channel-0 calls do on that channel's word with
// the release's channel calls (internal/ethernet/dataflow_api.h:
// eth_send_bytes_over_channel_payload_only :191,
// eth_wait_for_receiver_channel_done :356, eth_wait_for_bytes_on_channel
// :482, eth_receiver_channel_done :531).

// ethChannel1Names maps a channel-0 ethernet call to its channel-1 helper.
var ethChannel1Names = map[string]string{
	"eth_send_bytes":             "tcc_eth_send_bytes_ch1",
	"eth_wait_for_receiver_done": "tcc_eth_wait_for_receiver_done_ch1",
	"eth_wait_for_bytes":         "tcc_eth_wait_for_bytes_ch1",
	"eth_receiver_done":          "tcc_eth_receiver_done_ch1",
}

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

// ethChannelName is the printed name of ethernet call name in this kernel:
// the channel-1 helper on ERISC1 (recorded for assemble), else name.
func (pr *printer) ethChannelName(name string) string {
	h, ok := ethChannel1Names[name]
	if !ok || !pr.k.OnEth() || kir.EthChannel(pr.k.Processor) != 1 {
		return name
	}
	pr.ethCh1 = true
	return h
}

// ethChannelDecls writes the channel-1 helpers when the kernel uses them.
func (pr *printer) ethChannelDecls(out *bytes.Buffer) {
	if pr.ethCh1 {
		out.WriteString(ethChannel1Helpers)
		out.WriteByte('\n')
	}
}
