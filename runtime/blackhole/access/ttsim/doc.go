// Package ttsim opens Tenstorrent's ttsim chip model (a libttsim.so the
// user names) as an access.BAR: the library is loaded with dlopen (cgo),
// its PCI config space gives the BAR bases, and BAR reads and writes go
// through libttsim_pci_mem_rd_bytes / libttsim_pci_mem_wr_bytes. The
// simulated chip runs only inside libttsim_clock, which Clock calls.
//
// ttsim ends the process on any contract violation, so everything is
// checked on the Go side first (window registers take 4-byte writes, a
// window access must not cross the window), and the library may be
// initialised once per process.
package ttsim

import "errors"

// EnvLibrary is the environment variable tt-metal uses to name the
// simulator library; Open falls back to it when no path is given.
const EnvLibrary = "TT_METAL_SIMULATOR"

// ErrNoPath is returned when neither a path nor TT_METAL_SIMULATOR names a library.
var ErrNoPath = errors.New("ttsim: no simulator library named: pass --ttsim PATH (a libttsim.so built from github.com/tenstorrent/ttsim) or set TT_METAL_SIMULATOR")
