// Package kmd opens a Tenstorrent card through the tt-kmd kernel driver
// (/dev/tenstorrent/N) as an access.Device: TLB windows are allocated and
// configured by the driver's ioctls (ALLOCATE_TLB, CONFIGURE_TLB,
// FREE_TLB; tt-kmd ioctl.h) and mapped into this process with mmap
// (uncached), so reads and writes are plain loads and stores.
package kmd

// DevDir is where the driver creates its device nodes.
const DevDir = "/dev/tenstorrent"

// Install says what to install when no device node exists.
const Install = "install the tt-kmd driver (tenstorrent-dkms, github.com/tenstorrent/tt-kmd) on a machine with a Tenstorrent card; without one, use --backend sim or --backend ttsim --ttsim PATH"
