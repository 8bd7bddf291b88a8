//go:build linux

package kmd

import (
	"encoding/binary"
	"fmt"
	"os"
	"runtime"
	"syscall"
	"unsafe"

	"github.com/tcc-dev/tcc/runtime/blackhole/access"
)

// ioctl numbers: _IO(0xFA, nr) (tt-kmd ioctl.h).
const (
	ioctlGetDeviceInfo = 0xFA << 8 // nr 0
	ioctlAllocateTLB   = 0xFA<<8 | 11
	ioctlFreeTLB       = 0xFA<<8 | 12
	ioctlConfigureTLB  = 0xFA<<8 | 13
)

// Card is an opened device node.
type Card struct {
	f    *os.File
	info access.Info
}

// Open opens the device node path (e.g. /dev/tenstorrent/0).
func Open(path string) (*Card, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, fmt.Errorf("no %s device exists: %s", path, Install)
		}
		return nil, fmt.Errorf("kmd: %w", err)
	}
	// struct tenstorrent_get_device_info: in {u32 output_size_bytes}, out {u32 size; u16 vendor, device, ...}.
	var buf [4 + 20]byte
	binary.LittleEndian.PutUint32(buf[0:], 20)
	if err := ioctl(f, ioctlGetDeviceInfo, unsafe.Pointer(&buf[0])); err != nil {
		f.Close()
		return nil, fmt.Errorf("kmd: %s: GET_DEVICE_INFO: %w", path, err)
	}
	c := &Card{f: f, info: access.Info{Backend: "kmd", Path: path,
		VendorID: binary.LittleEndian.Uint16(buf[8:]), DeviceID: binary.LittleEndian.Uint16(buf[10:])}}
	return c, nil
}

func ioctl(f *os.File, req uintptr, arg unsafe.Pointer) error {
	_, _, e := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), req, uintptr(arg))
	runtime.KeepAlive(f)
	if e != 0 {
		return e
	}
	return nil
}

// Info implements access.Device.
func (c *Card) Info() access.Info { return c.info }

// Advance implements access.Device: a card runs by itself; yield briefly.
func (c *Card) Advance(int) { runtime.Gosched() }

// Close implements access.Device.
func (c *Card) Close() error { return c.f.Close() }

// OpenWindow implements access.Device: ALLOCATE_TLB, then an uncached mmap.
func (c *Card) OpenWindow(size uint64) (access.Window, error) {
	// struct tenstorrent_allocate_tlb: in {u64 size, reserved}, out {u32 id, pad; u64 mmap_offset_uc, mmap_offset_wc, reserved}.
	var buf [16 + 32]byte
	binary.LittleEndian.PutUint64(buf[0:], size)
	if err := ioctl(c.f, ioctlAllocateTLB, unsafe.Pointer(&buf[0])); err != nil {
		return nil, fmt.Errorf("kmd: %s: ALLOCATE_TLB of %d B: %w", c.info.Path, size, err)
	}
	id := binary.LittleEndian.Uint32(buf[16:])
	off := int64(binary.LittleEndian.Uint64(buf[24:]))
	mem, err := syscall.Mmap(int(c.f.Fd()), off, int(size), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		c.free(id)
		return nil, fmt.Errorf("kmd: %s: mapping TLB window %d: %w", c.info.Path, id, err)
	}
	return &window{c: c, id: id, mem: mem}, nil
}

func (c *Card) free(id uint32) {
	var buf [4]byte
	binary.LittleEndian.PutUint32(buf[:], id)
	_ = ioctl(c.f, ioctlFreeTLB, unsafe.Pointer(&buf[0]))
}

type window struct {
	c   *Card
	id  uint32
	mem []byte
}

func (w *window) Size() uint64 { return uint64(len(w.mem)) }

func (w *window) Configure(cfg access.TLBConfig) error {
	// struct tenstorrent_configure_tlb: in {u32 id; tenstorrent_noc_tlb_config {u64 addr; u16 x_end, y_end, x_start, y_start; u8 noc, mcast, ordering, linked, static_vc; u8 reserved0[3]; u32 reserved1[2]}}, out {u64}.
	var buf [8 + 32 + 8]byte
	le := binary.LittleEndian
	le.PutUint32(buf[0:], w.id)
	le.PutUint64(buf[8:], cfg.Addr)
	le.PutUint16(buf[16:], uint16(cfg.XEnd))
	le.PutUint16(buf[18:], uint16(cfg.YEnd))
	le.PutUint16(buf[20:], uint16(cfg.XStart))
	le.PutUint16(buf[22:], uint16(cfg.YStart))
	buf[24] = byte(cfg.NoC)
	if cfg.Multicast {
		buf[25] = 1
	}
	buf[26] = byte(cfg.Ordering)
	if err := ioctl(w.c.f, ioctlConfigureTLB, unsafe.Pointer(&buf[0])); err != nil {
		return fmt.Errorf("kmd: CONFIGURE_TLB %s: %w", cfg, err)
	}
	return nil
}

func (w *window) check(off uint64, n int) error {
	if off+uint64(n) > uint64(len(w.mem)) {
		return fmt.Errorf("kmd: access [%#x, %#x) past the %d B window", off, off+uint64(n), len(w.mem))
	}
	return nil
}

// Read and Write copy 32-bit words where aligned (device memory through an
// uncached mapping), bytes otherwise.
func (w *window) Read(off uint64, p []byte) error {
	if err := w.check(off, len(p)); err != nil {
		return err
	}
	copyWords(p, w.mem[off:off+uint64(len(p))])
	return nil
}

func (w *window) Write(off uint64, p []byte) error {
	if err := w.check(off, len(p)); err != nil {
		return err
	}
	copyWords(w.mem[off:off+uint64(len(p))], p)
	return nil
}

func copyWords(dst, src []byte) {
	if len(src) == 0 {
		return
	}
	i := 0
	if uintptr(unsafe.Pointer(&dst[0]))%4 == 0 && uintptr(unsafe.Pointer(&src[0]))%4 == 0 {
		for ; i+4 <= len(src); i += 4 {
			*(*uint32)(unsafe.Pointer(&dst[i])) = *(*uint32)(unsafe.Pointer(&src[i]))
		}
	}
	copy(dst[i:], src[i:])
}

func (w *window) Close() error {
	err := syscall.Munmap(w.mem)
	w.c.free(w.id)
	return err
}
