package interp

import (
	"fmt"

	"github.com/tcc-dev/tcc/codegen/target"
)

// EthEnd is one end of an ethernet cable: an ethernet channel of a device.
type EthEnd struct{ Device, Channel int }

func (e EthEnd) String() string { return fmt.Sprintf("device %d eth%d", e.Device, e.Channel) }

// Link is an ethernet cable between two ethernet cores of different
// devices. Links are full duplex: either end may send.
type Link struct{ A, B EthEnd }

// TargetLinks are the links t's topology cables a row of n devices with,
// in the logical channels the programs' ethernet kernels use
// (target.Target.MeshLinks): the simulator's peer lookup and the timing
// model's links derive from the topology's one table.
func TargetLinks(t *target.Target, n int) ([]Link, error) {
	ls, err := t.MeshLinks(n)
	if err != nil {
		return nil, err
	}
	out := make([]Link, 0, len(ls))
	for _, l := range ls {
		out = append(out, Link{EthEnd{l.A.Chip, l.A.Channel}, EthEnd{l.B.Chip, l.B.Channel}})
	}
	return out, nil
}

// RingLinks cables n devices as a ring: for every l, channel east[l] of
// device d to channel west[l] of device (d+1) mod n. For n == 2 that is two
// cables per l between the pair (0 east to 1 west and 1 east to 0 west);
// for n == 1 there are none. east and west must have the same length.
func RingLinks(n int, east, west []int) []Link {
	if n < 2 {
		return nil
	}
	var ls []Link
	for d := 0; d < n; d++ {
		for l := range east {
			ls = append(ls, Link{EthEnd{d, east[l]}, EthEnd{(d + 1) % n, west[l]}})
		}
	}
	return ls
}

// LineLinks cables n devices as a line: as RingLinks without the cable
// from device n-1 back to device 0.
func LineLinks(n int, east, west []int) []Link {
	var ls []Link
	for d := 0; d+1 < n; d++ {
		for l := range east {
			ls = append(ls, Link{EthEnd{d, east[l]}, EthEnd{d + 1, west[l]}})
		}
	}
	return ls
}
