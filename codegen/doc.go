// Package codegen turns a fused, placed graph into device programs.
//
// Compile lowers every op of an ir.Graph, in execution order, to one kernel
// IR program (package codegen/lower) and lists the device buffers the
// programs share: one BufferSpec per value that lives on the device (graph
// inputs, weights, states and op results), named as the programs'
// kir.BufferAddr arguments name them, with the page size and page count the
// runtime allocates. The result, a Build, is what the C++ printer, the host
// program configs and the runtime consume; writing it to files is not this
// package's job.
//
// Before it lowers anything, Compile checks that the buffers fit one
// device's DRAM (rule dram-capacity): GraphMemory counts them from the
// graph as the allocator places them (per bank, at the DRAM page stride),
// by kind: weights, KV caches (KVCaches: the states ops read as their
// cache operands), the other state, and everything else; a graph over the
// target's capacity is a *DRAMError with the numbers. PositionInputs are
// the inputs holding the step's position (the ops' "pos" operand).
//
// Subpackages include target (the chip description), kir (the kernel IR)
// and lower (the lowering of each op class to kernel IR).
package codegen
