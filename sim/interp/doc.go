// Package interp is the kernel-IR interpreter core that the kernel
// executor (sim/kexec) and the timing model (sim/timing) are built on, so
// that a kernel means the same to both: one place compiles a kernel's
// statements, evaluates its expressions and arguments and keeps the books
// of its circular buffers and semaphores; the two differ only in what an
// instruction does.
//
// # Compiling
//
// Compile flattens a kernel body into a list of instructions (Code):
// loops and branches become jumps (an If always ends its then-branch with
// a jump, so both machines run the same instruction count), variables
// become slots, expressions become closures. Every instruction statement
// (a tt-metal call) gets its operands compiled in kir.StmtExprs order and
// asks the Machine for its part, an Op: the simulator's effect
// (sim/kexec) or the timing model's cost (sim/timing). A new instruction
// therefore needs exactly one case in each machine, and the machines'
// tests (TestEveryInstructionExecutes, TestEveryInstructionHasCost) name
// an instruction that lacks one.
//
// # Running
//
// A Thread is one kernel on one core: its program counter, variable
// slots, resolved arguments (ResolveArgs), its Core, a clock and the
// machine's own state S. Thread.Step runs one instruction; an instruction
// returns the next program counter, Blocked when the thread must wait
// (it is then retried, the machine having been told what it waits for)
// or Failed with Thread.Err set. Scheduling the threads is the machine's
// business: the simulator runs them round-robin, the timing model in clock
// order.
//
// Every control statement (an assignment, a loop test, a branch) adds
// Config.ScalarCycles to the thread's Clock: the timing model's cost of
// scalar code, zero in the simulator. An instruction's own cost or effect
// is its Op.
//
// # Books the core keeps
//
//   - Expressions: unsigned C++ arithmetic in the expression's type
//     (kir.TypeOf), division by zero a fault; get_noc_addr and friends use
//     the NoC address encoding of this package (NoCAddress); L1 loads and
//     a compute kernel's read_tile_value (a word of a CB page it waited
//     for, from the read pointer: the page must be waited for and not
//     popped) read through Machine.ReadL1, so the simulator returns the
//     data and the timing model what it knows of it.
//   - Circular buffers (CB): the ring of each CB on each core, its write
//     and read positions and the pages filled, reserved, waited for and
//     packed. cb_reserve_back and cb_wait_front block until enough pages
//     are free or filled; all four CB calls check the hardware's flow rules
//     (kir.RuleCBFlow). The machine's Op runs once the core's part passed.
//   - Semaphores: which ids exist on which core and where they live
//     (Config.SemaphoreBase + SemaphoreStride*id on workers,
//     Config.EthSemaphoreBase on ethernet cores); get_semaphore checks the
//     id; noc_semaphore_wait(_min) and their eth_ forms read the word
//     through Machine.ReadL1 and block until it holds.
//
// Ethernet cables between the devices of a mesh are Links (RingLinks,
// LineLinks), by which both machines find an ethernet core's peer.
//
// Errors the core finds at run time are a *Fault (a kir.Rule and a
// message), which the machine completes with its program, kernel and core.
package interp
