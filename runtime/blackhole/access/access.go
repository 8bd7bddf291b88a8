package access

import (
	"errors"
	"fmt"
)

// Ordering is a TLB window's PCIe transaction ordering mode.
type Ordering uint8

// Orderings of TLBConfig.Ordering (tt-kmd ioctl.h tenstorrent_noc_tlb_config).
const (
	Relaxed Ordering = 0
	Strict  Ordering = 1
	Posted  Ordering = 2
)

// TLBConfig points a window at NoC endpoint (XEnd, YEnd), or at the
// multicast rectangle (XStart, YStart)..(XEnd, YEnd) when Multicast is set,
// starting at Addr (a multiple of the window size) in each endpoint's
// address space.
type TLBConfig struct {
	Addr                       uint64
	XStart, YStart, XEnd, YEnd int
	NoC                        int
	Multicast                  bool
	Ordering                   Ordering
}

func (c TLBConfig) String() string {
	if c.Multicast {
		return fmt.Sprintf("mcast (%d,%d)-(%d,%d) noc%d @%#x", c.XStart, c.YStart, c.XEnd, c.YEnd, c.NoC, c.Addr)
	}
	return fmt.Sprintf("(%d,%d) noc%d @%#x", c.XEnd, c.YEnd, c.NoC, c.Addr)
}

// Window sizes of Blackhole's TLBs (tt-kmd blackhole.c).
const (
	Window2M = 1 << 21
	Window4G = 1 << 32
)

// Window is one TLB window. Offsets are relative to the configured Addr
// and must stay below Size.
type Window interface {
	Size() uint64
	Configure(c TLBConfig) error
	Read(off uint64, p []byte) error
	Write(off uint64, p []byte) error
	// Close returns the window to the device.
	Close() error
}

// Info describes an opened chip.
type Info struct {
	// Backend is "kmd", "ttsim" or "fake".
	Backend string
	// Path is the device node or the library the chip was opened from.
	Path string
	// Chip is the chip's index among the Chips host-visible chips its
	// backend opened together (ttsim's multi-chip configurations: bh_x2
	// is two); a card or a single-chip library is chip 0 of 1.
	Chip, Chips        int
	VendorID, DeviceID uint16
}

// Arch is the chip architecture named by the PCI device id.
func (i Info) Arch() string {
	if i.VendorID != VendorTenstorrent {
		return fmt.Sprintf("not a Tenstorrent device (vendor %#04x)", i.VendorID)
	}
	switch i.DeviceID {
	case DeviceBlackhole:
		return "blackhole"
	case DeviceWormhole:
		return "wormhole_b0"
	}
	return fmt.Sprintf("unknown Tenstorrent device %#04x", i.DeviceID)
}

// PCI ids (tt-kmd enumerate.c, ttsim's PCI config space).
const (
	VendorTenstorrent = 0x1E52
	DeviceWormhole    = 0x401E
	DeviceBlackhole   = 0xB140
)

// Device is one opened chip.
type Device interface {
	Info() Info
	// OpenWindow allocates a TLB window of size Window2M or Window4G.
	OpenWindow(size uint64) (Window, error)
	// Advance lets the chip run for about n of its clock cycles.
	Advance(n int)
	Close() error
}

// ErrNoWindow is returned when every window of a size is in use.
var ErrNoWindow = errors.New("no free TLB window")

// CheckArch returns an error unless d is a Blackhole.
func CheckArch(d Device) error {
	if a := d.Info().Arch(); a != "blackhole" {
		return fmt.Errorf("%s %s: the chip is %s; tcc's runtime drives Blackhole only", d.Info().Backend, d.Info().Path, a)
	}
	return nil
}
