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
	// Step, when set, is the position of the step predicted: the
	// position buffers' Words hold it, and the floor counts the KV caches
	// up to its last position. Nil: no position (a position buffer's word
	// reads 0, and the floor counts every KV cache in full).
	Step *Step
	// Memory, when set, is what the build's buffers occupy in each
	// device's DRAM (the report's Memory).
	Memory *Memory
}

// Step is the positions a step writes: Tokens per user from Pos (decode:
// one, the position it writes and attends up to; prefill: Pos ..
// Pos+Tokens-1).
type Step struct {
	Pos, Tokens int
	// Users, when set (decode), is each user's position, Pos their
	// largest: a position buffer of one word per user holds them and the
	// floor counts each user's KV cache rows up to its own. Nil: every
	// user at Pos.
	Users []int
}

// Last is the last position the step writes.
func (s Step) Last() int { return s.Pos + max(s.Tokens, 1) - 1 }

// Memory is one device's DRAM as a build's buffers occupy it, in bytes:
// weights, KV caches, the other persistent state, everything else
// (inputs, activations, scratch), their total, the device's capacity and
// what is free (negative: over).
type Memory struct {
	Weights  int64 `json:"weights"`
	KV       int64 `json:"kv"`
	State    int64 `json:"state"`
	Other    int64 `json:"other"`
	Total    int64 `json:"total"`
	Capacity int64 `json:"capacity"`
	Free     int64 `json:"free"`
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
	// KV: the buffer is a KV cache [B, kv heads, L, D] (L rows, one per
	// position); the floor counts the rows up to the step's last position.
	KV bool
	// Words, when set, are the buffer's known contents (Options.Contents):
	// the position buffer's word holds the step's position.
	Words []uint32
}
