package kexec

import (
	"fmt"
	"sort"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/ir/numerics"
	"github.com/tcc-dev/tcc/sim/interp"
)

// DRAMBase is the lowest DRAM address the allocator hands out (address 0
// stays invalid so a missing argument shows up as a memory error).
const DRAMBase = 0x10000

// SemaphoreStride is the L1 distance between consecutive semaphores.
const SemaphoreStride = interp.SemaphoreStride

// Device is a simulated Blackhole card: DRAM banks, worker L1s and the
// buffers allocated in them.
type Device struct {
	T       *target.Target
	dram    []*memory
	l1      []*memory // by y*GridX + x, allocated on first use
	dramA   *allocator
	l1A     *allocator
	buffers map[string]*DeviceBuffer
	// ethCores are the ethernet cores, allocated on first use (eth.go).
	ethCores []*ethCore
}

// DeviceBuffer is an allocated buffer.
type DeviceBuffer struct {
	kir.Buffer
	// Addr is the bank address (DRAM) or per-core L1 address.
	Addr uint32
	// Cores hold the pages of an L1 buffer (row-major), nil for DRAM.
	Cores []kir.Core
	// Stride is the distance between consecutive pages in one bank or core.
	Stride int
	// PerCore is the number of pages per core (L1) or per bank (DRAM).
	PerCore int
}

// NewDevice returns an empty device for t.
func NewDevice(t *target.Target) *Device {
	d := &Device{
		T:       t,
		l1:      make([]*memory, t.GridX*t.GridY),
		dramA:   &allocator{lo: DRAMBase, hi: uint64(t.DRAMBankBytes)},
		l1A:     &allocator{lo: uint64(t.L1UnreservedBase), hi: uint64(t.L1Size), topDown: true},
		buffers: map[string]*DeviceBuffer{},
	}
	for i := 0; i < t.DRAMBanks; i++ {
		d.dram = append(d.dram, newGarbageMemory(uint64(t.DRAMBankBytes)))
	}
	return d
}

// SemaphoreBase is the L1 address of semaphore 0 on every core.
func (d *Device) SemaphoreBase() uint32 {
	return uint32(d.T.L1UnreservedBase - d.T.MaxSemaphores*SemaphoreStride)
}

func (d *Device) coreMem(c kir.Core) *memory {
	i := c.Y*d.T.GridX + c.X
	if d.l1[i] == nil {
		d.l1[i] = newGarbageMemory(uint64(d.T.L1Size))
	}
	return d.l1[i]
}

// Alloc allocates b and returns its address. DRAM buffers must be
// interleaved; L1 buffers may be interleaved (pages round-robin over all
// worker cores) or sharded (consecutive pages per core of the shard grid,
// row-major, PagesPerCore pages each).
func (d *Device) Alloc(b kir.Buffer) (uint32, error) {
	t := d.T
	if b.Name == "" {
		return 0, fmt.Errorf("kexec: buffer has no name")
	}
	if _, dup := d.buffers[b.Name]; dup {
		return 0, fmt.Errorf("kexec: buffer %q is already allocated", b.Name)
	}
	if b.PageSize <= 0 || b.Pages <= 0 {
		return 0, fmt.Errorf("kexec: buffer %q has page size %d and %d pages; both must be positive", b.Name, b.PageSize, b.Pages)
	}
	db := &DeviceBuffer{Buffer: b}
	switch {
	case b.Mem.Kind == ir.DRAMInterleaved:
		if l := b.Blocks; l != nil {
			if err := l.Check(); err != nil || l.Kt*l.Nt != b.Pages || b.Layout != ir.TileLayout {
				return 0, fmt.Errorf("kexec: buffer %q: block layout %+v does not place its %d %s pages: %v", b.Name, *l, b.Pages, b.Layout, err)
			}
		}
		db.Stride = t.DRAMPageSize(b.PageSize)
		db.PerCore = b.DRAMBytesPerBank(t.DRAMBanks, db.Stride) / db.Stride
		a, err := d.dramA.alloc(uint64(db.Stride*db.PerCore), uint64(t.DRAMReadAlign))
		if err != nil {
			return 0, fmt.Errorf("kexec: DRAM buffer %q (%d pages of %d bytes): %v", b.Name, b.Pages, b.PageSize, err)
		}
		db.Addr = uint32(a)
	case b.Mem.Kind.IsDRAM():
		return 0, fmt.Errorf("kexec: buffer %q: memory kind %s is not supported by the simulator", b.Name, b.Mem.Kind)
	default:
		if b.Mem.Kind.IsSharded() && b.Mem.Shard == nil {
			return 0, fmt.Errorf("kexec: buffer %q: %s needs a shard spec", b.Name, b.Mem.Kind)
		}
		db.Cores = b.ShardCores(t.GridX, t.GridY)
		for _, c := range db.Cores {
			if !t.InGrid(c.X, c.Y) {
				return 0, fmt.Errorf("kexec: buffer %q: shard core %s is outside the worker grid", b.Name, c)
			}
		}
		db.Stride = target.AlignUp(b.PageSize, t.L1Align)
		db.PerCore = b.PagesPerCore(t.GridX, t.GridY)
		a, err := d.l1A.alloc(uint64(db.Stride*db.PerCore), uint64(t.DRAMReadAlign))
		if err != nil {
			return 0, fmt.Errorf("kexec: L1 buffer %q (%d pages of %d bytes on %d cores): %v", b.Name, b.Pages, b.PageSize, len(db.Cores), err)
		}
		db.Addr = uint32(a)
	}
	d.buffers[b.Name] = db
	return db.Addr, nil
}

// Free releases the buffer called name.
func (d *Device) Free(name string) error {
	b, ok := d.buffers[name]
	if !ok {
		return fmt.Errorf("kexec: free of unknown buffer %q", name)
	}
	if b.Mem.Kind.IsDRAM() {
		d.dramA.free(uint64(b.Addr))
	} else {
		d.l1A.free(uint64(b.Addr))
	}
	delete(d.buffers, name)
	return nil
}

// Buffer returns the allocated buffer called name.
func (d *Device) Buffer(name string) (*DeviceBuffer, bool) {
	b, ok := d.buffers[name]
	return b, ok
}

// BufferNames lists the allocated buffers in sorted order.
func (d *Device) BufferNames() []string {
	out := make([]string, 0, len(d.buffers))
	for n := range d.buffers {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// pageLoc returns the memory and address of page i of b.
func (d *Device) pageLoc(b *DeviceBuffer, i int) (*memory, uint64) {
	if b.Mem.Kind.IsDRAM() {
		bank, off := b.DRAMPage(i, d.T.DRAMBanks, b.Stride)
		return d.dram[bank], uint64(b.Addr) + uint64(off)
	}
	if b.Mem.Kind == ir.L1Interleaved {
		n := len(b.Cores)
		return d.coreMem(b.Cores[i%n]), uint64(b.Addr) + uint64((i/n)*b.Stride)
	}
	return d.coreMem(b.Cores[i/b.PerCore]), uint64(b.Addr) + uint64((i%b.PerCore)*b.Stride)
}

func (d *Device) pageRange(name string, first, n int) (*DeviceBuffer, error) {
	b, ok := d.buffers[name]
	if !ok {
		return nil, fmt.Errorf("kexec: unknown buffer %q", name)
	}
	if first < 0 || n < 0 || first+n > b.Pages {
		return nil, fmt.Errorf("kexec: pages [%d, %d) are outside buffer %q of %d pages", first, first+n, name, b.Pages)
	}
	return b, nil
}

// WritePages writes len(data)/PageSize whole pages starting at page first.
func (d *Device) WritePages(name string, first int, data []byte) error {
	b, ok := d.buffers[name]
	if !ok {
		return fmt.Errorf("kexec: unknown buffer %q", name)
	}
	if len(data)%b.PageSize != 0 {
		return fmt.Errorf("kexec: write of %d bytes to buffer %q is not whole %d-byte pages", len(data), name, b.PageSize)
	}
	n := len(data) / b.PageSize
	if _, err := d.pageRange(name, first, n); err != nil {
		return err
	}
	for i := 0; i < n; i++ {
		m, a := d.pageLoc(b, first+i)
		m.write(a, data[i*b.PageSize:(i+1)*b.PageSize])
	}
	return nil
}

// ReadPages reads n pages starting at page first.
func (d *Device) ReadPages(name string, first, n int) ([]byte, error) {
	b, err := d.pageRange(name, first, n)
	if err != nil {
		return nil, err
	}
	out := make([]byte, n*b.PageSize)
	for i := 0; i < n; i++ {
		m, a := d.pageLoc(b, first+i)
		m.read(a, out[i*b.PageSize:(i+1)*b.PageSize])
	}
	return out, nil
}

func tileBuffer(b *DeviceBuffer) error {
	if b.Layout != ir.TileLayout || b.PageSize != b.DType.TileBytes() {
		return fmt.Errorf("kexec: buffer %q is not one %s tile per page (layout %s, page size %d)", b.Name, b.DType, b.Layout, b.PageSize)
	}
	return nil
}

// WriteTiles packs tiles (whole tiles in face order, numerics.TileElems
// values each) into the buffer's pages from page 0, in the buffer's dtype.
func (d *Device) WriteTiles(name string, tiles []float32) error {
	b, ok := d.buffers[name]
	if !ok {
		return fmt.Errorf("kexec: unknown buffer %q", name)
	}
	if err := tileBuffer(b); err != nil {
		return err
	}
	if len(tiles)%numerics.TileElems != 0 || len(tiles)/numerics.TileElems > b.Pages {
		return fmt.Errorf("kexec: %d values are not whole tiles fitting buffer %q of %d tiles", len(tiles), name, b.Pages)
	}
	data, err := numerics.PackTiles(b.DType, tiles)
	if err != nil {
		return fmt.Errorf("kexec: buffer %q: %v", name, err)
	}
	return d.WritePages(name, 0, data)
}

// ReadTiles unpacks every page of a tile-layout buffer into float32 tiles in
// face order.
func (d *Device) ReadTiles(name string) ([]float32, error) {
	b, ok := d.buffers[name]
	if !ok {
		return nil, fmt.Errorf("kexec: unknown buffer %q", name)
	}
	if err := tileBuffer(b); err != nil {
		return nil, err
	}
	data, err := d.ReadPages(name, 0, b.Pages)
	if err != nil {
		return nil, err
	}
	return numerics.UnpackTiles(b.DType, data)
}

// ReadL1 returns n bytes of core c's L1 at addr.
func (d *Device) ReadL1(c kir.Core, addr uint32, n int) ([]byte, error) {
	if !d.T.InGrid(c.X, c.Y) || !d.coreMem(c).inBounds(uint64(addr), uint64(n)) {
		return nil, fmt.Errorf("kexec: L1 read of %d bytes at %#x on core %s is out of range", n, addr, c)
	}
	out := make([]byte, n)
	d.coreMem(c).read(uint64(addr), out)
	return out, nil
}

// WriteL1 writes data to core c's L1 at addr.
func (d *Device) WriteL1(c kir.Core, addr uint32, data []byte) error {
	if !d.T.InGrid(c.X, c.Y) || !d.coreMem(c).inBounds(uint64(addr), uint64(len(data))) {
		return fmt.Errorf("kexec: L1 write of %d bytes at %#x on core %s is out of range", len(data), addr, c)
	}
	d.coreMem(c).write(uint64(addr), data)
	return nil
}

// findDRAM returns the DRAM buffer whose bank region holds [addr, addr+n).
func (d *Device) findDRAM(addr, n uint64) *DeviceBuffer {
	for _, b := range d.buffers {
		if !b.Mem.Kind.IsDRAM() {
			continue
		}
		lo, hi := uint64(b.Addr), uint64(b.Addr)+uint64(b.Stride*b.PerCore)
		if addr >= lo && addr+n <= hi {
			return b
		}
	}
	return nil
}
