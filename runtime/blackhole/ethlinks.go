package blackhole

import (
	"encoding/binary"
	"fmt"
	"sort"
	"strings"

	"github.com/tcc-dev/tcc/runtime/blackhole/chip"
)

// Ethernet links, read from the chips.
//
// Blackhole's ethernet base firmware reports each channel's link in its
// boot results (tt-metal tt_metal/hw/inc/internal/tt-1xx/blackhole/
// eth_fw_api.h boot_results_t, at MEM_SYSENG_BOOT_RESULTS_BASE of the
// ethernet core's L1): the port status, and for a trained link the
// local and the remote chip_info (board id, ASIC location on the board,
// ethernet channel). tt-umd's topology discovery reads the same words;
// ttsim's multi-chip libraries fill them from their peer table (tile.cpp
// bh_eth_link_init: on bh_x2 chip 0 channel 2 <-> chip 1 channel 9 and
// chip 0 channel 3 <-> chip 1 channel 8).

// Boot-results offsets in an ethernet core's L1 (eth_fw_api.h).
const (
	BootResultsBase = 0x7CC00
	bootPortStatus  = BootResultsBase + 4
	bootLocalInfo   = BootResultsBase + 0x3C0
	bootRemoteInfo  = BootResultsBase + 0x3E0
	// chip_info fields: asic_location +1, eth_id +2, board_id_hi +4, board_id_lo +8.
	chipInfoSize = 32
)

// Port statuses of boot_results_t.eth_status.port_status.
const (
	PortUnknown = 0
	PortUp      = 1
	PortDown    = 2
	PortUnused  = 3
)

// BoardChip names a chip by its board and its ASIC location on the board
// (a P300 carries two chips, locations 0 and 1).
type BoardChip struct {
	BoardID      uint64
	ASICLocation int
}

func (b BoardChip) String() string {
	return fmt.Sprintf("board %#x asic %d", b.BoardID, b.ASICLocation)
}

// EthPort is one ethernet channel's link as its base firmware reports it.
// Local and Remote (with RemoteChannel) are set only when Up.
type EthPort struct {
	Channel       int
	Status        int
	Up            bool
	Local, Remote BoardChip
	RemoteChannel int
}

// EthPorts reads the boot results of every ethernet channel of the chip
// (the chip is not changed).
func (d *Device) EthPorts() ([]EthPort, error) {
	t := d.Chip.Target
	if t.Eth == nil {
		return nil, nil
	}
	var out []EthPort
	for ch := 0; ch < t.Eth.Cores; ch++ {
		x, y, err := t.EthNoC(ch)
		if err != nil {
			return nil, err
		}
		at := chip.XY{X: x, Y: y}
		st, err := d.Chip.Read32(at, bootPortStatus)
		if err != nil {
			return nil, fmt.Errorf("ethernet channel %d %s: %w", ch, at, err)
		}
		p := EthPort{Channel: ch, Status: int(st), Up: st == PortUp, RemoteChannel: -1}
		if p.Up {
			var info [2 * chipInfoSize]byte
			if err := d.Chip.Read(at, bootLocalInfo, info[:]); err != nil {
				return nil, fmt.Errorf("ethernet channel %d %s: %w", ch, at, err)
			}
			p.Local, p.Remote = chipInfo(info[:chipInfoSize]), chipInfo(info[chipInfoSize:])
			p.RemoteChannel = int(info[chipInfoSize+2])
		}
		out = append(out, p)
	}
	return out, nil
}

func chipInfo(b []byte) BoardChip {
	hi, lo := binary.LittleEndian.Uint32(b[4:]), binary.LittleEndian.Uint32(b[8:])
	return BoardChip{BoardID: uint64(hi)<<32 | uint64(lo), ASICLocation: int(b[1])}
}

// EthEnd is ethernet channel Channel of chip Chip (a Device's ID, or a
// mesh device).
type EthEnd struct{ Chip, Channel int }

func (e EthEnd) String() string { return fmt.Sprintf("chip %d channel %d", e.Chip, e.Channel) }

// EthLink is a cable between two ethernet channels; A < B.
type EthLink struct{ A, B EthEnd }

func (l EthLink) String() string { return l.A.String() + " <-> " + l.B.String() }

func less(a, b EthEnd) bool { return a.Chip < b.Chip || a.Chip == b.Chip && a.Channel < b.Channel }

// NewEthLink is the link between a and b, its ends ordered.
func NewEthLink(a, b EthEnd) EthLink {
	if less(b, a) {
		a, b = b, a
	}
	return EthLink{a, b}
}

// EthLinks returns the links between the chips ds (by their IDs) that
// their base firmware reports up, each once, sorted. A chip is known by
// the local chip_info of its up ports; a port whose remote chip is none
// of ds (a cable to a chip not opened) is left out. Two ends that do not
// name each other are an error naming both.
func EthLinks(ds []*Device) ([]EthLink, error) {
	ports := make([][]EthPort, len(ds))
	byBoard := map[BoardChip]int{}
	for i, d := range ds {
		ps, err := d.EthPorts()
		if err != nil {
			return nil, fmt.Errorf("chip %d: %w", d.ID, err)
		}
		ports[i] = ps
		for _, p := range ps {
			if !p.Up {
				continue
			}
			if j, ok := byBoard[p.Local]; ok && j != i {
				return nil, fmt.Errorf("chips %d and %d both report themselves as %s", ds[j].ID, d.ID, p.Local)
			}
			byBoard[p.Local] = i
		}
	}
	seen := map[EthLink]int{}
	for i, ps := range ports {
		for _, p := range ps {
			if !p.Up {
				continue
			}
			j, ok := byBoard[p.Remote]
			if !ok {
				continue
			}
			seen[NewEthLink(EthEnd{ds[i].ID, p.Channel}, EthEnd{ds[j].ID, p.RemoteChannel})]++
		}
	}
	var out []EthLink
	for l, n := range seen {
		if n != 2 {
			return nil, fmt.Errorf("ethernet link %s is reported by one end only", l)
		}
		out = append(out, l)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		return less(a.A, b.A) || a.A == b.A && less(a.B, b.B)
	})
	return out, nil
}

// CheckLinks returns nil when every link program uses (want, in mesh
// devices mapped to chips one to one) is one of the chips' links (have),
// else an error naming the program, the first missing link, what its ends
// are cabled to instead, and the links the chips have.
func CheckLinks(program string, want, have []EthLink) error {
	ok := map[EthLink]bool{}
	peer := map[EthEnd]EthEnd{}
	for _, l := range have {
		ok[l] = true
		peer[l.A], peer[l.B] = l.B, l.A
	}
	for _, l := range want {
		l = NewEthLink(l.A, l.B)
		if ok[l] {
			continue
		}
		var why []string
		for _, e := range []EthEnd{l.A, l.B} {
			if p, cabled := peer[e]; cabled {
				why = append(why, fmt.Sprintf("%s is cabled to %s", e, p))
			} else {
				why = append(why, fmt.Sprintf("%s has no link to an opened chip", e))
			}
		}
		names := make([]string, len(have))
		for i, h := range have {
			names[i] = h.String()
		}
		if len(names) == 0 {
			names = []string{"none"}
		}
		return fmt.Errorf("program %s uses the ethernet link %s, which the chips do not have (%s); their links: %s",
			program, l, strings.Join(why, "; "), strings.Join(names, ", "))
	}
	return nil
}
