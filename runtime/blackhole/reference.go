package blackhole

import (
	"fmt"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/ir"
)

// Memory is the reference device a program's buffers are mirrored from
// and compared with. Package runtime backs it with the simulator's device
// (sim/kexec); this package depends only on this interface.
type Memory interface {
	// Placement returns where device buffer name lives; ok is false when
	// the buffer is not allocated.
	Placement(name string) (p Placement, ok bool)
	// ReadPages returns pages first..first+n-1 of device buffer name,
	// n*PageSize bytes.
	ReadPages(name string, first, n int) ([]byte, error)
}

// Placement is where the pages of a buffer live, at the same addresses on
// the chip as on the reference device: page i is in DRAM bank i%banks at
// Addr+(i/banks)*Stride (DRAMInterleaved; or where Blocks puts it), on core Cores[i%len(Cores)] at
// Addr+(i/len(Cores))*Stride (L1Interleaved), or else (sharded) on core
// Cores[i/PerCore] at Addr+(i%PerCore)*Stride.
type Placement struct {
	Kind     ir.MemKind
	Pages    int
	PageSize int // bytes
	Addr     uint32
	Stride   int
	Cores    []kir.Core // the cores of an L1 buffer, row-major; nil in DRAM
	PerCore  int        // pages per core (L1) or per bank (DRAM)
	// Blocks, when set, places a DRAM buffer's pages in blocks
	// (kir.Buffer.DRAMPage).
	Blocks *kir.BlockLayout
}

// Reference is the memory a program's buffers are mirrored from, with the
// mesh's names for the program's buffers.
type Reference struct {
	Mem     Memory
	Binding map[string]string // program buffer name -> device buffer name
}

// Buffer returns the placement of program buffer name on the reference
// device and its device name; it fails when the buffer is not allocated
// there.
func (r Reference) Buffer(name string) (Placement, string, error) {
	dn := name
	if n, ok := r.Binding[name]; ok {
		dn = n
	}
	b, ok := r.Mem.Placement(dn)
	if !ok {
		return Placement{}, "", fmt.Errorf("buffer %q (%q) is not allocated on the reference device", name, dn)
	}
	return b, dn, nil
}
