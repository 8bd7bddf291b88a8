package access

import (
	"fmt"
	"sync"
)

// BAR is a chip whose PCIe BARs the host reaches directly: BAR 0 holds the
// 2 MiB windows and the window registers, BAR 4 the 4 GiB windows.
type BAR interface {
	Info() Info
	ReadBAR(bar int, off uint64, p []byte) error
	WriteBAR(bar int, off uint64, p []byte) error
	// Clock advances the chip by n cycles (a card: no-op).
	Clock(n int)
	Close() error
}

// NewBARDevice returns a Device whose windows are allocated by this process
// and configured by writing their registers in b's BAR0, as tt-kmd does
// (window 201 is left to the driver, as on a card).
func NewBARDevice(b BAR) Device {
	return &barDevice{bar: b, used2M: make([]bool, KernelWindow), used4G: make([]bool, Windows4G)}
}

type barDevice struct {
	bar    BAR
	mu     sync.Mutex
	used2M []bool
	used4G []bool
}

func (d *barDevice) Info() Info    { return d.bar.Info() }
func (d *barDevice) Advance(n int) { d.bar.Clock(n) }
func (d *barDevice) Close() error  { return d.bar.Close() }

func (d *barDevice) OpenWindow(size uint64) (Window, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	used, base := d.used2M, 0
	switch size {
	case Window2M:
	case Window4G:
		used, base = d.used4G, Windows2M
	default:
		_, _, err := layoutFor(size)
		return nil, err
	}
	for i, u := range used {
		if !u {
			used[i] = true
			return &barWindow{d: d, size: size, index: i, reg: base + i}, nil
		}
	}
	return nil, fmt.Errorf("%s: all %d windows of %d B are open: %w", d.Info().Backend, len(used), size, ErrNoWindow)
}

type barWindow struct {
	d      *barDevice
	size   uint64
	index  int // within its size class
	reg    int // register index
	cfg    *TLBConfig
	closed bool
}

func (w *barWindow) Size() uint64 { return w.size }

func (w *barWindow) Configure(c TLBConfig) error {
	b, err := EncodeTLB(w.size, c)
	if err != nil {
		return err
	}
	// The registers take 32-bit writes only (ttsim rejects others; a card
	// splits them anyway).
	for i := 0; i < TLBRegSize; i += 4 {
		if err := w.d.bar.WriteBAR(0, TLBRegs+uint64(w.reg)*TLBRegSize+uint64(i), b[i:i+4]); err != nil {
			return err
		}
	}
	w.cfg = &c
	return nil
}

// locate maps a window offset to its BAR and BAR offset.
func (w *barWindow) locate(off uint64, n int) (int, uint64, error) {
	if w.closed {
		return 0, 0, fmt.Errorf("TLB window %d is closed", w.reg)
	}
	if w.cfg == nil {
		return 0, 0, fmt.Errorf("TLB window %d is not configured", w.reg)
	}
	if off+uint64(n) > w.size {
		return 0, 0, fmt.Errorf("access [%#x, %#x) past the end of a %d B window (%s)", off, off+uint64(n), w.size, w.cfg)
	}
	if w.size == Window2M {
		return 0, uint64(w.index)*Window2M + off, nil
	}
	return 4, uint64(w.index)*Window4G + off, nil
}

func (w *barWindow) Read(off uint64, p []byte) error {
	bar, o, err := w.locate(off, len(p))
	if err != nil {
		return err
	}
	return w.d.bar.ReadBAR(bar, o, p)
}

func (w *barWindow) Write(off uint64, p []byte) error {
	bar, o, err := w.locate(off, len(p))
	if err != nil {
		return err
	}
	return w.d.bar.WriteBAR(bar, o, p)
}

func (w *barWindow) Close() error {
	w.d.mu.Lock()
	defer w.d.mu.Unlock()
	if w.closed {
		return nil
	}
	w.closed = true
	if w.size == Window2M {
		w.d.used2M[w.index] = false
	} else {
		w.d.used4G[w.index] = false
	}
	return nil
}
