package target

import "fmt"

// Ethernet describes the ethernet cores of a chip: the cores that carry
// traffic between cards. Each is a RISC-V with its own L1 and a link to one
// ethernet core of another chip (when cabled); kernels on it move data with
// the NoC calls and with the ethernet calls of tt-metal's
// tt_metal/hw/inc/ethernet/dataflow_api.h (eth_send_bytes,
// eth_wait_for_receiver_done, eth_wait_for_bytes, eth_receiver_done).
type Ethernet struct {
	// Cores is the number of ethernet cores (channels 0..Cores-1).
	Cores int
	// L1Size is the L1 of one ethernet core; L1UnreservedBase the first
	// byte kernels may use and L1Top the end of the kernel-usable region
	// (above it: fabric, sync info and system reserved areas).
	L1Size, L1UnreservedBase, L1Top int
	// RingEast and RingWest are the ring's logical channels: ring link l
	// connects channel RingEast[l] of card d to channel RingWest[l] of card
	// d+1 (mod N). They are chip 0's physical channels of the topology the
	// target was derived for (topology.go, WithTopology; Blackhole(): the
	// DefaultTopology's); Ports maps them to each chip's physical ones.
	RingEast, RingWest []int
	// LinkBytesPerCycle is the sustained payload rate of one link in bytes
	// per Tensix cycle; LinkLatencyCycles is the one-way latency of a
	// packet including the bytes_sent handshake. Both are the ring
	// planner's estimates (codegen/lower PlanRing), not measurements; the
	// timing model fits its own on the measured rows (sim/timing: 17.6
	// B/cycle, 69.5 cycles per transmit command, 533 cycles one way, so a
	// packet's handshake - data, bytes_sent word, receiver_done - costs
	// about 3 x 70 + 2 x 533 = 1,276 cycles besides the bytes).
	LinkBytesPerCycle, LinkLatencyCycles int
	// MaxCommandBytes is the largest transmit command: one
	// internal_::eth_send_packet writes the transfer size in bytes to the
	// TX queue's ETH_TXQ_TRANSFER_SIZE_BYTES register (multiple of 16;
	// tt_eth_ss_regs.h:72) and the MAC splits it into ethernet packets
	// itself (ETH_TXQ_MAX_PKT_SIZE_BYTES, :68). eth_send_bytes' per-command
	// size (num_bytes_per_send) has the valid range 16..1MB
	// (internal/ethernet/dataflow_api.h:186), more than an ethernet core's
	// L1, so any transfer a kernel can hold is one command. (tt-metal's own
	// direct-send test, tests/tt_metal/tt_metal/eth/test_erisc_app_direct_send.cpp:930,
	// sweeps commands of 16 B to 64 KiB.)
	MaxCommandBytes int
	// Topology names the cabling the ring was derived from (see
	// topology.go; DefaultTopology in Blackhole()); Links are its physical
	// links on the mesh row and Ports each chip's physical ring channels
	// (nil: every chip uses RingEast/RingWest themselves). Set by
	// Target.WithTopology.
	Topology string
	Links    []EthLink
	Ports    []RingPorts
	// noc is the NoC coordinate of each channel.
	noc [][2]int
}

// blackholeEthernet is the p150a description: 14 ethernet cores on NoC row
// 1 (channel -> NoC x from tt-metal's blackhole_140_arch.yaml), 512 KiB of
// L1 each, the kernel-usable region from ERISC_L1_UNRESERVED_BASE (87,872 =
// the active-erisc firmware map end plus the 25 KiB kernel-config area,
// 64-byte aligned; tt_metal/hw/inc/internal/tt-1xx/blackhole/dev_mem_map.h
// of the pinned release TTMetalRelease, default 2-ERISC mode; its HAL
// agrees) to the fabric-router reserved base (455,264). Two ring links use the four
// QSFP-DD ports. A Blackhole link is 400 Gb/s (50 GB/s, 37 B/cycle); the
// model assumes 20 B/cycle of payload after packet and handshake overheads
// and ~1 us per handshake round trip.
func blackholeEthernet() *Ethernet {
	xs := []int{1, 16, 2, 15, 3, 14, 4, 13, 5, 12, 6, 11, 7, 10}
	e := &Ethernet{
		Cores:             len(xs),
		L1Size:            512 << 10,
		L1UnreservedBase:  87_872,
		L1Top:             455_264,
		RingEast:          []int{0, 2},
		RingWest:          []int{1, 3},
		LinkBytesPerCycle: 20,
		LinkLatencyCycles: 1350,
		MaxCommandBytes:   1 << 20,
		Topology:          DefaultTopology,
	}
	for _, x := range xs {
		e.noc = append(e.noc, [2]int{x, 1})
	}
	return e
}

// InEth reports whether ch is an ethernet channel of t.
func (t *Target) InEth(ch int) bool { return t.Eth != nil && ch >= 0 && ch < t.Eth.Cores }

// EthNoC is the NoC coordinate of ethernet channel ch.
func (t *Target) EthNoC(ch int) (nx, ny int, err error) {
	if !t.InEth(ch) {
		n := 0
		if t.Eth != nil {
			n = t.Eth.Cores
		}
		return 0, 0, fmt.Errorf("ethernet channel %d is out of range (the chip has %d ethernet cores)", ch, n)
	}
	return t.Eth.noc[ch][0], t.Eth.noc[ch][1], nil
}

// EthAt is the inverse of EthNoC; ok is false when (nx, ny) is not an
// ethernet core.
func (t *Target) EthAt(nx, ny int) (ch int, ok bool) {
	if t.Eth == nil {
		return -1, false
	}
	for i, c := range t.Eth.noc {
		if c[0] == nx && c[1] == ny {
			return i, true
		}
	}
	return -1, false
}

// EthL1Budget is the kernel-usable L1 of an ethernet core: L1Top -
// L1UnreservedBase (0 without ethernet).
func (t *Target) EthL1Budget() int {
	if t.Eth == nil {
		return 0
	}
	return t.Eth.L1Top - t.Eth.L1UnreservedBase
}
