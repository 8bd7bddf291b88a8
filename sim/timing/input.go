package timing

import (
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
)

// Build is what Predict needs from a compiled build: the target, the mesh,
// one step's programs in launch order and the device buffers. The model
// needs nothing else of the compiler; sim/timing/fromcodegen makes one of
// a codegen.Build.
type Build struct {
	Target   *target.Target
	Mesh     ir.Mesh
	Programs []Program
	Buffers  []Buffer
}

// Program is one device program of the step: the op it implements and its
// kernels.
type Program struct {
	Op     *ir.Op
	Kernel *kir.Program
}

// Buffer is one device buffer of the step.
type Buffer struct {
	Name string
	// Value is the graph value the buffer holds; for a state, Update is the
	// state's new value, which is written into the same buffer.
	Value, Update   *ir.Value
	Mem             ir.MemoryConfig
	PageSize, Pages int
}

// bufferOf is the buffer holding value v (a state's new value: the
// state's), or nil.
func (b *Build) bufferOf(v *ir.Value) *Buffer {
	for i := range b.Buffers {
		if s := &b.Buffers[i]; s.Update == v {
			return s
		}
	}
	for i := range b.Buffers {
		if s := &b.Buffers[i]; s.Value == v {
			return s
		}
	}
	return nil
}
