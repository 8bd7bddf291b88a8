//go:build linux && cgo

package ttsim

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>

typedef void (*tt_void_fn)(void);
typedef uint32_t (*tt_cfg_rd_fn)(uint32_t, uint32_t);
typedef void (*tt_mem_rd_fn)(uint64_t, void*, uint32_t);
typedef void (*tt_mem_wr_fn)(uint64_t, const void*, uint32_t);
typedef void (*tt_clock_fn)(uint32_t);

static void tt_call_void(void* f) { ((tt_void_fn)f)(); }
static uint32_t tt_call_cfg_rd(void* f, uint32_t bdf, uint32_t off) { return ((tt_cfg_rd_fn)f)(bdf, off); }
static void tt_call_mem_rd(void* f, uint64_t a, void* p, uint32_t n) { ((tt_mem_rd_fn)f)(a, p, n); }
static void tt_call_mem_wr(void* f, uint64_t a, const void* p, uint32_t n) { ((tt_mem_wr_fn)f)(a, p, n); }
static void tt_call_clock(void* f, uint32_t n) { ((tt_clock_fn)f)(n); }
static const char* tt_dlerror(void) { const char* e = dlerror(); return e ? e : "unknown dlopen error"; }
*/
import "C"

import (
	"fmt"
	"os"
	"sync"
	"unsafe"

	"github.com/tcc-dev/tcc/runtime/blackhole/access"
)

var (
	openMu sync.Mutex
	opened bool
)

// MaxChips bounds the PCI devices OpenAll enumerates (PCI device numbers
// are 5 bits).
const MaxChips = 32

// lib is a loaded ttsim library: one simulation, one clock for all its
// chips.
type lib struct {
	path                     string
	handle                   unsafe.Pointer
	exit, cfgRd, rd, wr, clk unsafe.Pointer
	mu                       sync.Mutex
	open                     int // chips not closed
	exited                   bool
}

// Sim is one host-visible chip of an opened ttsim library.
type Sim struct {
	lib    *lib
	chip   int
	bar    [6]uint64
	info   access.Info
	closed bool
}

// Open loads the ttsim library at path (or TT_METAL_SIMULATOR),
// initialises the simulation and returns its chip 0; the library's other
// chips, if any, are not used (OpenAll returns them all).
func Open(path string) (*Sim, error) {
	chips, err := OpenAll(path)
	if err != nil {
		return nil, err
	}
	for _, c := range chips[1:] {
		c.Close()
	}
	return chips[0], nil
}

// OpenAll loads the ttsim library at path (or TT_METAL_SIMULATOR),
// initialises the simulation and returns every host-visible chip it
// models, in PCI device order (bus 0, device N is chip N; ttsim's bh_x2,
// a P300, has two). Chip N's BARs are those its PCI config space gives
// (ttsim puts them at N x 64 GiB). The chips share one clock: Clock on any
// of them advances all. libttsim_exit runs when the last of them is
// closed.
func OpenAll(path string) ([]*Sim, error) {
	if path == "" {
		path = os.Getenv(EnvLibrary)
	}
	if path == "" {
		return nil, ErrNoPath
	}
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("ttsim: %w", err)
	}
	openMu.Lock()
	defer openMu.Unlock()
	if opened {
		return nil, fmt.Errorf("ttsim: %s: the simulator is already open in this process (ttsim initialises once per process)", path)
	}
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	handle := C.dlopen(cpath, C.RTLD_NOW|C.RTLD_LOCAL)
	if handle == nil {
		return nil, fmt.Errorf("ttsim: cannot load %s: %s", path, C.GoString(C.tt_dlerror()))
	}
	l := &lib{path: path, handle: handle}
	syms := []struct {
		name string
		dst  *unsafe.Pointer
	}{
		{"libttsim_init", nil}, {"libttsim_exit", &l.exit}, {"libttsim_pci_config_rd32", &l.cfgRd},
		{"libttsim_pci_mem_rd_bytes", &l.rd}, {"libttsim_pci_mem_wr_bytes", &l.wr}, {"libttsim_clock", &l.clk},
	}
	var initFn unsafe.Pointer
	for _, sy := range syms {
		cs := C.CString(sy.name)
		p := C.dlsym(handle, cs)
		C.free(unsafe.Pointer(cs))
		if p == nil {
			C.dlclose(handle)
			return nil, fmt.Errorf("ttsim: %s is not a ttsim library: it has no %s (build libttsim.so from github.com/tenstorrent/ttsim)", path, sy.name)
		}
		if sy.dst == nil {
			initFn = p
		} else {
			*sy.dst = p
		}
	}
	C.tt_call_void(initFn)
	opened = true
	var chips []*Sim
	for dev := 0; dev < MaxChips; dev++ {
		bdf := C.uint32_t(dev << 3) // bus 0, device dev, function 0
		id := uint32(C.tt_call_cfg_rd(l.cfgRd, bdf, 0))
		if id == 0xFFFFFFFF { // no such device: enumeration ends
			break
		}
		s := &Sim{lib: l, chip: dev}
		s.info = access.Info{Backend: "ttsim", Path: path, Chip: dev, VendorID: uint16(id), DeviceID: uint16(id >> 16)}
		for i := 0; i < 6; i += 2 { // BAR0, BAR2, BAR4 are 64-bit BARs
			lo := uint64(C.tt_call_cfg_rd(l.cfgRd, bdf, C.uint32_t(0x10+4*i)))
			hi := uint64(C.tt_call_cfg_rd(l.cfgRd, bdf, C.uint32_t(0x14+4*i)))
			s.bar[i] = hi<<32 | lo&^0xF
		}
		chips = append(chips, s)
	}
	if len(chips) == 0 {
		C.tt_call_void(l.exit)
		return nil, fmt.Errorf("ttsim: %s: no chip answers PCI config reads at bus 0 device 0", path)
	}
	for _, s := range chips {
		s.info.Chips = len(chips)
	}
	l.open = len(chips)
	return chips, nil
}

// Info implements access.BAR.
func (s *Sim) Info() access.Info { return s.info }

func (s *Sim) addr(bar int, off uint64, n int) (uint64, error) {
	if s.closed {
		return 0, fmt.Errorf("ttsim: chip %d: access after Close", s.chip)
	}
	if bar != 0 && bar != 4 || s.bar[bar] == 0 {
		return 0, fmt.Errorf("ttsim: chip %d: no BAR%d", s.chip, bar)
	}
	if n <= 0 || n > 1<<30 {
		return 0, fmt.Errorf("ttsim: BAR%d access of %d bytes", bar, n)
	}
	return s.bar[bar] + off, nil
}

// ReadBAR implements access.BAR.
func (s *Sim) ReadBAR(bar int, off uint64, p []byte) error {
	a, err := s.addr(bar, off, len(p))
	if err != nil {
		return err
	}
	C.tt_call_mem_rd(s.lib.rd, C.uint64_t(a), unsafe.Pointer(&p[0]), C.uint32_t(len(p)))
	return nil
}

// WriteBAR implements access.BAR.
func (s *Sim) WriteBAR(bar int, off uint64, p []byte) error {
	a, err := s.addr(bar, off, len(p))
	if err != nil {
		return err
	}
	C.tt_call_mem_wr(s.lib.wr, C.uint64_t(a), unsafe.Pointer(&p[0]), C.uint32_t(len(p)))
	return nil
}

// Clock implements access.BAR: it advances the simulation, every chip of
// the library, by n cycles.
func (s *Sim) Clock(n int) {
	if !s.closed && n > 0 {
		C.tt_call_clock(s.lib.clk, C.uint32_t(n))
	}
}

// Close closes the chip; closing the library's last open chip ends the
// simulation (libttsim_exit). The library stays loaded: ttsim cannot be
// initialised again in this process.
func (s *Sim) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	l := s.lib
	l.mu.Lock()
	defer l.mu.Unlock()
	l.open--
	if l.open == 0 && !l.exited {
		l.exited = true
		C.tt_call_void(l.exit)
	}
	return nil
}
