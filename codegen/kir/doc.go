// Package kir is tcc's kernel IR: level 2 of the three levels in DESIGN.md.
//
// A Program says how one device program computes one (fused) op on
// Blackhole: which cores run it, which circular buffers (CBs) exist on them
// (index, page size, page count, data format), which semaphores, which
// kernels (reader, writer, compute) run on which RISC-V with which
// configuration, the argument table of every kernel, the per-core argument
// values, and the body of every kernel as structured statements whose
// instructions are one Go type per tt-metal API call.
//
// Two consumers read this level: the C++ printer (every instruction prints as
// one tt-metal call; the kernel's argument table prints both the
// get_arg_val/get_compile_time_arg_val/get_common_arg_val indices in the C++
// and the argument vectors of the host config) and the kernel executor
// sim/kexec (which interprets the very same statements). So the code that
// runs in the simulator is the code that is printed.
//
// Argument values are symbolic where the host only knows them at load time:
// an ArgValue is a constant, a buffer's address plus an offset, or the NoC
// coordinate of a logical core; the runtime resolves them (Resolve).
//
// Programs that span the cards of a mesh (collectives) place kernels and
// semaphores on ethernet cores (EthCore, the EthRow of logical cores), use
// the ethernet calls of eth.go to move bytes to the cabled card, and read
// the card's index from DeviceID argument values, so one program serves
// every card.
//
// Validate checks a program against every hardware rule of DESIGN.md and
// reports each violation as a *RuleError with a named Rule, so a broken
// program is a compile error rather than a hang on the card. Rules that
// depend on values only known while running (dynamic DEST indices, CB ring
// straddling, DRAM page alignment) are checked again by sim/kexec, which
// reports them with the same Rule names.
//
// The instructions (every statement but Let, Assign, For, If and Comment)
// are declared once, in the instruction table codegen/internal/insnspec:
// Go type and fields, tt-metal call (or call family), header, C++
// arguments, kernel class, operands, FPU-read CBs, init/uninit pairing and
// tt_api.h declaration. `go generate ./codegen/kir` writes stmt_gen.go (the
// types, APIName, IsComputeOnly, IsDataMovementOnly, IsEthOnly, StmtExprs'
// operand lists, CBsOf, InitOf, UninitOf, Instructions) and
// codegen/cpp/insn_gen.go from it; TestStmtGenFresh fails while either is
// stale. The SFPU ops are one instruction pair (SFPUInit, SFPU) whose
// names, headers, declarations, costs and semantics are SFPUTable's
// (ir/sfpu's Table; this package names the ops the lowerings use).
package kir

//go:generate go run ../internal/cmd/insngen -kir stmt_gen.go -cpp ../cpp/insn_gen.go
