// Package persist builds a persistent program: a device's whole decode step
// as ONE kir.Program (kir.Persist) instead of one program per graph op.
//
// Each program of a codegen.Build is a phase (its index in Build.Programs).
// Every core taking part in any phase runs one merged kernel per RISC
// (BRISC, NCRISC, compute; the RISCs an ethernet core's phases use) that
// executes, in phase order, the phases the core takes part in:
//
//	tcc_phase_begin(p)                       (core-local barrier)
//	phase p's kernel body, or nothing        (args renamed "p<P>_<name>"),
//	  with wait done[q] for every q in deps(p) (data-movement RISCs) just
//	  before its first top-level statement that may touch a buffer other
//	  than a weight, or after the body when none does
//	noc_async_write_barrier()                (data-movement RISCs)
//	tcc_phase_end(p)                         (core-local barrier)
//	count[p]++ on the phase's leader         (BRISC, or the ethernet RISC)
//	leader: wait count[p] == participants, then set done[p] on every core
//	        with a phase that depends on p: one noc_semaphore_set_multicast
//	        per NoC-contiguous rectangle of the worker dependents' bounding
//	        box (the count's value, at least 1; other cores in it never
//	        read done[p]), an increment on itself and on ethernet cores
//
// A core takes part in a phase when any kernel of the phase runs on it; its
// RISCs without a kernel in the phase still run the barriers. Cores with
// the same phase sequence (and leader roles) share a merged kernel.
//
// # Dataflow, no global barrier
//
// deps(p) come from the phases' buffer sets by buffer name (Build.BufferOf,
// so views and in-place state updates alias): every buffer a program
// declares is read, its op's results' buffers are written; p depends on the
// last writer of what it reads or writes (RAW, WAW) and on the readers
// since that write of what it writes (WAR). Dependencies implied by others
// (q reaches p through another dependency) are dropped.
//
// The waits are lazy (lazy.go): the statements before them read only
// weights, which no phase of the step writes, so a matmul's weight reader
// streams its first blocks (as many as its weight CB holds) while the
// phases it depends on still run, once its core finished its own previous
// phase. Every data-movement RISC waits for every dependency before the
// phase ends on its core, so done[p] still implies that p's dependencies
// are done. A phase with a CB backed by a non-weight buffer, and every
// phase on an ethernet core, waits before tcc_phase_begin.
//
// # Early begins
//
// A matmul's weight reader may begin its phase before its core's other
// RISCs end the phase before (early.go, kir.EarlyBegin): its NCRISC only
// arrives at tcc_phase_end of the phase before and at its own
// tcc_phase_begin, which installs the CBs it names at once (renumbered
// away from the CBs the core's still-running kernels name, placed above
// their L1, rings three times deeper when the L1 allows), so its weights
// stream while the GDN recurrence, a norm or the gate/up matmul still runs
// on the core; the other RISCs begin the phase as before, keeping those
// CBs. The simulator, the runtime and the timing model count each phase
// barrier (begin, end) of a core apart. The early CBs also leave the L1
// the card's tables and images buffers take (Prepare adds them): Build
// plans again with that L1 reserved when they would reach it, so the
// program the simulator runs is the one codegen/cpp prints.
//
// The control block is an L1 buffer the runtime allocates on every worker
// core (Ctl, so each phase's CBs are placed below it) and the top of the
// ethernet cores' kernel L1: one done word per phase, one count word per
// phase (used on the leader) and the phases' semaphores, re-homed so that
// no two phases share a semaphore word (get_semaphore(id) of phase p reads
// control word SemSlot(p)+id). The host writes the block (zeros and the
// semaphores' initial values) before each launch; one launch runs one step
// (Build), or many (BuildLoop).
//
// # Many steps per launch
//
// BuildLoop wraps every merged kernel's phases in a step loop (StepVar, up
// to the common argument StepsArg) for a graph whose steps need no host
// input (a device loop: the argmax writes the next step's tokens, the
// position advances on the device). The done, count and semaphore words
// are not counted across steps: a step barrier of the cores' signaling
// RISCs (arrive on the step leader, the first worker core; go words it
// increments on every core) starts every step, once the host rang the
// step's doorbell, and another ends it: the leader appends the step's
// tokens (page 0 of the tokens' one-page DRAM buffer) to page s of
// HistoryBuffer and sets its done word to s+1, and every core resets its
// words (zeros, then its phases' semaphores' initial values) before the
// next start barrier. The end barrier makes the reset safe (no increment
// of the step can still arrive); the next start barrier keeps the next
// step's increments from landing before a reset. The arrive, go, scratch
// and protocol words lie after the reset words (barrier rounds 2s+1,
// 2s+2).
//
// The host<->device step protocol (kir.StepProtocol, Persist.Loop): the
// host writes the leader's doorbell (steps allowed; the stop flag after
// the last, which the leader waits for before its kernel exits) and polls
// its done word, and reads page s of the history as soon as done reaches
// s+1, while the device runs the next step (runtime/blackhole.Session on
// a chip, the fake chip's persistent mode in tests). Each core's signaling
// RISC writes its finished-steps word, each data-movement RISC its phase
// word (phase started, phase ended), for the host's watchdog. The built-in
// simulator runs a launch to its end, so it rings every step and the stop
// at the launch.
//
// # Per-phase state
//
// tcc_phase_begin(p) is a core-local barrier of the core's threads; when
// all arrived the core's CBs become phase p's (placed exactly as the
// simulator places the standalone program's: kir.CBPlaceOrder and
// kir.FirstFit from L1UnreservedBase; a phase with early begins places its
// early CBs from its CBBase first, kir.PlaceCBs) and the compute thread
// takes the phase kernel's configuration (fidelity, fp32 DEST, ...) with
// its state reinitialised. sim/interp keeps these books for sim/kexec and sim/timing.
// On the card this is tt-metal's setup_local_cb_read_write_interfaces run
// from a per-phase CB table in L1, with rta_l1_base / crta_l1_base moved to
// the phase's argument tables (get_arg_val reads through them), and the
// compute kernel's hw-startup / init calls re-run at the phase boundary.
// The tables are the tables buffer (kir.TablesBuffer, below): the
// runtime writes each core's page as kir.Tables.Page lays it out, the
// one layout the printed kernels read (runtime/blackhole.LaunchPersistent).
//
// # Limits
//
// Every phase's CBs must end below the lowest L1 buffer, the control
// buffer included (checked when the program is loaded: a *kir.RuleError
// naming the phase, the core and the bytes); runtime arguments are counted
// per phase and kernel (at most kir's per-kernel limit, since on the card
// each phase's arguments are a table of their own).
//
// # On the card
//
// codegen/cpp prints a merged kernel with the device side of the phase
// machinery (its persist.go says how; the machinery itself is one header
// written beside the kernels, kernels/tcc_persist.h): tcc_phase_begin /
// tcc_phase_end are core-local barriers over one L1 word per RISC, the
// begin installs the phase's CBs from its record in the tables buffer
// (kir.TablesBuffer, kir.Tables) with the firmware's
// setup_local_cb_read_write_interfaces (tt-metal's
// internal/circular_buffer_init.h:18: <read, write, init_wr_tile_ptr,
// shift_mask>(cb_l1_base, start_cb_index, local_cb_mask), called for
// indices 0..31 and, unshifted, 32..63 as trisc.cc does) and moves
// rta_l1_base / crta_l1_base to the phase's slices of the kernel's
// argument vectors, which lie in the tables buffer too (the kernel config
// ring holds only each worker merged kernel's persist_ctl and
// persist_tables: kir.RingCommonArgs, kir.PersistentRing); a phase's body
// is a function shared by every phase whose body prints the same (the
// layers), and the signals to other cores are one loop over constant core
// lists. Prepare adds what the card
// needs to a program of Build or BuildLoop: the tables buffer, the images
// buffer (kir.TextBuffer: the merged kernels do not fit the kernel config
// ring, so their images execute in place from L1; kir.ValidatePersistentCode)
// and the kernels' arguments and defines; MergeComputeConfigs gives each
// merged compute kernel the one configuration its binaries are compiled
// with (the highest math fidelity), and refuses phases that disagree in
// fp32_dest_acc_en, math_approx_mode or dst_full_sync_en. Build runs every
// phase of a merged compute kernel whose phases disagree in
// fp32_dest_acc_en with fp32 DEST (destmode.go: the ring all-reduce's bf16
// adders, bit for bit the same sums), in the phase's kernel, which the
// simulator and the timing model read too. CB indices are renamed per phase
// (kir.Persist.CBMap) so that each index of a merged binary has one data
// format and one unpack-to-DEST mode. `tcc build --persistent` writes the
// kernels and programs.json with the persistent section (hostcfg.Persistent).
//
// # The barrier protocol on the card
//
// Every RISC of a worker core (BRISC, NCRISC, TRISC0-2) runs the same
// sequence of barriers: a begin and an end per phase of the core, in
// phase order (the RISCs without a kernel in a phase run them too). RISC r
// counts the barriers it has arrived at, n_r, and stores n_r in its own
// barrier word of the tables buffer. At tcc_phase_begin / tcc_phase_end it
// arrives (n_r++, stores it) and waits until every RISC's word is at least
// n_r; since barrier n is the same barrier on every RISC, a RISC that is
// ahead satisfies the wait. This is the simulator's ordering (sim/interp:
// each (phase, begin/end) barrier of a core counted apart, completed by
// its last arrival).
//
// An early begin (kir.EarlyBegin: phase M, the phase Prev before it on the
// core, RISC NCRISC) prints, on exactly the NCRISC kernels of its cores:
//
//	tcc_phase_end_arrive(Prev)    arrive at Prev's end, do not wait
//	tcc_phase_begin_early(M, record, rta, crta, lo, hi)
//	                              arrive at M's begin, do not wait; install
//	                              only the CBs of M's record whose merged
//	                              index (kir.Persist.CBMap) is one of M's
//	                              early CBs (kir.Phase.EarlyCBs: masks lo,
//	                              hi), on NCRISC's own CB interface; move
//	                              rta_l1_base / crta_l1_base to M's slices
//	M's body                      (its dependency waits are lazy)
//	tcc_phase_end(M)              a full barrier again
//
// while BRISC and the TRISCs print tcc_phase_end(Prev) and
// tcc_phase_begin(M): they wait for the NCRISC's count (already there) and
// each other's, then install all of M's CBs on their own interfaces. Each
// RISC has its own copy of the CB interfaces, so the NCRISC's early
// install moves nothing the others use; its CBs are indices no kernel
// still running on the core names (so their stream registers are idle and
// drained) and lie in L1 above every CB those kernels use (CBBase). The
// NCRISC never installs M's other CBs: its kernel names none of them.
// tt-metal's setup zeroes a RISC's copies of the page counters
// (tiles_acked, tiles_received); TRISC0 and TRISC2, which count with them,
// reload them from the stream registers after every install (having
// waited for their own register writes, tensix_sync, before arriving), so
// the pages the NCRISC pushed before the unpacker installed M's CBs count
// as received. done[M] still implies that M ended on every RISC of its
// cores: M's end is a full barrier.
package persist
