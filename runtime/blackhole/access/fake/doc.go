// Package fake is an in-process Blackhole chip for the runtime's tests. It
// implements access.BAR: it decodes the window registers the host programs,
// keeps each NoC endpoint's memory (Tensix L1 and core-local registers,
// DRAM banks), and plays the device side of tt-metal's slow-dispatch
// protocol against the pinned release's layout (target.BlackholeLayout):
//
//   - releasing BRISC from soft reset boots the core when L1 address 0
//     holds a jal to the BRISC firmware base and the go message says
//     RUN_MSG_INIT; the core then reports RUN_MSG_DONE, as firmware does
//     once every processor is initialised;
//   - writing RUN_MSG_GO to a booted core's go message decodes its launch
//     message and kernel config blob (Launch), runs the test's Program hook
//     and, Delay clock cycles later, reports RUN_MSG_DONE.
//
// NewChips makes the chips of a multi-chip system (each with its own
// memory and clock); Cable connects an ethernet channel of one to a
// channel of another by writing both ethernet cores' base-firmware boot
// results (port up, local and remote chip_info), as ttsim's multi-chip
// libraries do. Ethernet cores hold memory only: nothing runs on them.
//
// Hang makes a core never finish, with the subordinate sync bytes showing
// which processors are still running, so that watchdogs can be tested.
//
// In persistent mode (SetPersistent, persist.go) a launch runs until the
// host stops it: each doorbell the host rings in the step leader's control
// block plays the steps it allows (a hook writes each step's effect), sets
// the cores' finished words and, Delay cycles later, the leader's done
// word; HangIn makes a core stop in a given phase of a step.
package fake
