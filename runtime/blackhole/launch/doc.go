// Package launch runs one program on Blackhole Tensix cores by tt-metal's
// slow (host) dispatch, on cores whose firmware has booted:
//
//  1. Plan lays out the kernel config blob every core of the program gets
//     in the kernel config ring (target.Layout.KernelConfig): per processor
//     its runtime args, then its common runtime args, the semaphores, the
//     local CB configs (4 words per CB index up to the highest used), then
//     each processor's kernel image, 16-byte aligned. A processor may run
//     different kernels on disjoint cores (each tt-metal kernel has its own
//     core range); its slots are sized for the largest, and each core's
//     blob holds the image and args of the kernel that runs there. Two
//     kernels of one processor on one core are an error. The JIT links each
//     image at the address Plan gives it (Plan.TextAddr), so nothing is
//     relocated at load time.
//  2. Run writes, per core, the blob and the launch message (host dispatch
//     mode, enabled processors, offsets, local CB mask), then the go signal
//     RUN_MSG_GO, and polls every core for RUN_MSG_DONE.
//  3. A core that does not finish in time is reported by the watchdog
//     (StallError): its coordinates, the processors still running (the
//     subordinate sync bytes), and the tiles-received/acked stream counters
//     of its CBs, instead of a hang.
//
// A persistent program (kir.Persist, as codegen/cpp prints it) is launched
// once (persist.go): PersistentPlan places each core's merged kernel
// images back to back in the images buffer (kir.TextBuffer) and, in the
// kernel config ring, each RISC's two ring arguments (the control block's
// and the tables buffer's addresses, kir.RingCommonArgs), refusing a core
// whose images do not fit with a *kir.RuleError naming the core and the
// bytes; Start writes the rings, images, each core's tables page
// (kir.Tables.Page, built by the caller) and launch messages and sends the
// go signals without waiting (the host drives the steps:
// runtime/blackhole.Session).
package launch
