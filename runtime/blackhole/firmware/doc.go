// Package firmware loads the pinned tt-metal release's Tensix firmware
// (one ELF per processor: BRISC, NCRISC, TRISC0..2) onto Blackhole cores
// and runs its init protocol:
//
//  1. hold every processor of the core in soft reset;
//  2. write each ELF's loadable segments: those linked in L1 at their
//     addresses (which must fall in the processor's firmware region of
//     target.Layout), those linked in core-local memory (0xFFB00000 and up)
//     to the processor's init scratch area, from which the firmware copies
//     them at boot (do_crt1);
//  3. write a jal to the BRISC firmware at BRISC's reset PC (address 0),
//     the bank-to-NoC tables, the worker logical-to-NoC maps, the core info
//     and a go message saying RUN_MSG_INIT;
//  4. release BRISC; its firmware releases the other processors, waits for
//     them and writes RUN_MSG_DONE, which Boot polls for.
package firmware
