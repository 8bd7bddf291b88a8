// Package blackhole is tcc's thin runtime for Blackhole chips: real cards
// through the tt-kmd driver and Tenstorrent's ttsim chip model, in layers
// (each its own package):
//
//	access    host view of one chip: TLB windows, BAR reads/writes
//	          (implementations: kmd, ttsim, fake)
//	chip      NoC reads/writes/multicast, soft reset, coordinates, bank tables
//	firmware  the pinned release's firmware ELFs and their init protocol
//	jit       kernel compile per processor, execute-in-place images
//	launch    slow-dispatch launch of one program, watchdog
//
// Every address, message layout and register of the pinned tt-metal
// release comes from one table, codegen/target.BlackholeLayout.
//
// This package ties the layers together. Open opens a chip, OpenAll every
// chip of a backend (each host-visible chip of a multi-chip ttsim library:
// bh_x2, a P300, has two; Device.ID is the chip's index and the value of
// its kernels' device-id arguments). EthLinks reads the ethernet links
// between opened chips from their ethernet cores' base-firmware boot
// results (tt-metal's blackhole eth_fw_api.h boot_results_t; ttsim fills
// them from its peer table) and CheckLinks checks a program's links
// against them. The JIT builds ethernet kernels (ERISC0 or ERISC1 of an
// active ethernet core, against the active-erisc firmware of that ERISC:
// jit.EthFirmware). WriteProgram writes a program's worker kernels and its
// ethernet kernels (on the physical channels a topology maps its logical
// ones to: on a card, Options.CardEth, after loading the active-erisc
// firmware, firmware.BootEth, in the pinned layout, launch.CardEthLayout;
// on ttsim the way bh_x2 launches them without firmware,
// launch.TTSimEthLayout, ERISC0 only) to one chip's cores
// without starting them; a collective is written on
// every chip, then every chip's go messages are sent (Written.Go), and
// only then is each waited for (Written.Wait), because the chips' kernels
// signal each other over the links. Every launch message carries both
// core types' kernel config bases and semaphore offsets (launch.Peer), so
// workers find the ethernet cores' semaphores and the other way round; on
// ttsim an ethernet kernel sets the firmware's sem_l1_base[] from them
// itself (jit ttsimeth.go, from target.BlackholeActiveEth). RunProgram (WriteProgram, Go, Wait on one
// chip) skips programs with ethernet kernels. A Device boots
// firmware on the cores programs use, and RunProgram runs one program of a
// tcc build given a reference device's memory (Reference, over the small
// Memory interface; package runtime backs it with the simulator, sim/kexec,
// which this package does not import): it copies the program's buffers to
// the chip at the reference's addresses, launches, and copies them back, so
// that the caller can compare the chip with the simulator program by
// program.
//
// LaunchPersistent launches a multi-step persistent program
// (codegen/persist.BuildLoop) once and returns a Session that drives it by
// the step protocol (kir.StepProtocol): Ring writes the step leader's
// doorbell, WaitStep polls its done word (a step that does not finish in
// time is a *PersistentStallError naming every stalled core, its NoC
// coordinate, and the phase each data-movement RISC is in), ReadHistory
// reads a step's tokens while the device runs, Stop ends the launch. Its
// merged kernels' images come from a Builder that also implements
// PersistentBuilder (the JIT does not: the C++ printer does not print
// persistent kernels yet; tests use the fake chip).
package blackhole
