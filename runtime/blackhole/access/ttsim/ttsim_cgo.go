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

// Sim is an opened ttsim library.
type Sim struct {
	path                     string
	lib                      unsafe.Pointer
	exit, cfgRd, rd, wr, clk unsafe.Pointer
	bar                      [6]uint64
	info                     access.Info
	closed                   bool
}

// Open loads the ttsim library at path (or TT_METAL_SIMULATOR) and
// initialises the simulated chip.
func Open(path string) (*Sim, error) {
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
	lib := C.dlopen(cpath, C.RTLD_NOW|C.RTLD_LOCAL)
	if lib == nil {
		return nil, fmt.Errorf("ttsim: cannot load %s: %s", path, C.GoString(C.tt_dlerror()))
	}
	s := &Sim{path: path, lib: lib}
	syms := []struct {
		name string
		dst  *unsafe.Pointer
	}{
		{"libttsim_init", nil}, {"libttsim_exit", &s.exit}, {"libttsim_pci_config_rd32", &s.cfgRd},
		{"libttsim_pci_mem_rd_bytes", &s.rd}, {"libttsim_pci_mem_wr_bytes", &s.wr}, {"libttsim_clock", &s.clk},
	}
	var initFn unsafe.Pointer
	for _, sy := range syms {
		cs := C.CString(sy.name)
		p := C.dlsym(lib, cs)
		C.free(unsafe.Pointer(cs))
		if p == nil {
			C.dlclose(lib)
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
	id := uint32(C.tt_call_cfg_rd(s.cfgRd, 0, 0))
	s.info = access.Info{Backend: "ttsim", Path: path, VendorID: uint16(id), DeviceID: uint16(id >> 16)}
	for i := 0; i < 6; i += 2 { // BAR0, BAR2, BAR4 are 64-bit BARs
		lo := uint64(C.tt_call_cfg_rd(s.cfgRd, 0, C.uint32_t(0x10+4*i)))
		hi := uint64(C.tt_call_cfg_rd(s.cfgRd, 0, C.uint32_t(0x14+4*i)))
		s.bar[i] = hi<<32 | lo&^0xF
	}
	return s, nil
}

// Info implements access.BAR.
func (s *Sim) Info() access.Info { return s.info }

func (s *Sim) addr(bar int, off uint64, n int) (uint64, error) {
	if s.closed {
		return 0, fmt.Errorf("ttsim: access after Close")
	}
	if bar != 0 && bar != 4 || s.bar[bar] == 0 {
		return 0, fmt.Errorf("ttsim: no BAR%d", bar)
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
	C.tt_call_mem_rd(s.rd, C.uint64_t(a), unsafe.Pointer(&p[0]), C.uint32_t(len(p)))
	return nil
}

// WriteBAR implements access.BAR.
func (s *Sim) WriteBAR(bar int, off uint64, p []byte) error {
	a, err := s.addr(bar, off, len(p))
	if err != nil {
		return err
	}
	C.tt_call_mem_wr(s.wr, C.uint64_t(a), unsafe.Pointer(&p[0]), C.uint32_t(len(p)))
	return nil
}

// Clock implements access.BAR.
func (s *Sim) Clock(n int) {
	if !s.closed && n > 0 {
		C.tt_call_clock(s.clk, C.uint32_t(n))
	}
}

// Close ends the simulation (libttsim_exit). The library stays loaded:
// ttsim cannot be initialised again in this process.
func (s *Sim) Close() error {
	if !s.closed {
		s.closed = true
		C.tt_call_void(s.exit)
	}
	return nil
}
