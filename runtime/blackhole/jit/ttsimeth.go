package jit

import (
	"fmt"

	"github.com/tcc-dev/tcc/codegen/target"
)

// Ethernet kernels on ttsim.
//
// ttsim's bh_x2 runs no active-erisc firmware: on RUN_MSG_GO it jumps
// into the kernel having set only rta_l1_base, crta_l1_base, my_x and
// my_y (README "Two chips on ttsim"). The firmware's other launch-time
// global a collective's ethernet kernels read is sem_l1_base[], which
// firmware_config_init (internal/firmware_common.h) sets from the launch
// message before it calls the kernel: sem_l1_base[t] =
// kernel_config_base[t] + sem_offset[t] for every programmable core type
// t, so get_semaphore<ACTIVE_ETH>(id) finds the core's own semaphores and
// get_semaphore(id) the workers'. A kernel built for ttsim (Env.TTSim)
// does that itself: its kernel_includes.hpp, which active_erisck.cc
// includes just before its _start, ends with ttsimEthLaunch, which wraps
// the kernel_main() call of _start so that the copy runs first. The
// launch message is read in ttsim's layout (launch.TTSimEthLayout, both
// from target.BlackholeActiveEth: the mailbox at TTSimMailbox,
// launch_msg_rd_ptr at +12, launch[] at +16, TTSimLaunchSize bytes each,
// kernel_config_base[4] at +0 and sem_offset[4] at +TTSimSemOffsets). The tree's sources are not
// edited, and builds for a card do not get it (the card's firmware does
// this).
var ttsimEthLaunch = ttsimEthPrologue(target.BlackholeActiveEth())

// ttsimEthPrologue is the prologue for the ttsim launch layout of a
// (target.ActiveEthLayout's TTSim* fields, the table the runtime's
// launch.TTSimEthLayout writes by).
func ttsimEthPrologue(a *target.ActiveEthLayout) string {
	return fmt.Sprintf(`
// tcc JIT (ttsim): sem_l1_base[] as the active-erisc firmware's
// firmware_config_init sets it, and rta_l1_base / crta_l1_base (ttsim
// sets ERISC0's, not ERISC1's), from the launch message in ttsim's layout;
// on ERISC1 first noc_init.
static inline void tcc_ttsim_eth_launch() {
#if PROCESSOR_INDEX == 1
    // ERISC1's command buffers (the NCRISC ones), which the active-erisc
    // firmware's noc_init sets up on a card.
    noc_init(MEM_NOC_ATOMIC_RET_VAL_ADDR);
#endif
    volatile tt_l1_ptr uint8_t* mb = reinterpret_cast<volatile tt_l1_ptr uint8_t*>(%#x);
    uint32_t rd = *reinterpret_cast<volatile tt_l1_ptr uint32_t*>(mb + 12);
    volatile tt_l1_ptr uint8_t* msg = mb + 16 + rd * %du;
    for (uint32_t t = 0; t < ProgrammableCoreType::COUNT; t++) {
        uint32_t base = *reinterpret_cast<volatile tt_l1_ptr uint32_t*>(msg + 4 * t);
        uint32_t off = *reinterpret_cast<volatile tt_l1_ptr uint16_t*>(msg + %d + 2 * t);
        sem_l1_base[t] = reinterpret_cast<uint32_t tt_l1_ptr*>(base + off);
    }
    uint32_t kcb = *reinterpret_cast<volatile tt_l1_ptr uint32_t*>(msg + 4 * ProgrammableCoreType::ACTIVE_ETH);
    volatile tt_l1_ptr uint16_t* rta = reinterpret_cast<volatile tt_l1_ptr uint16_t*>(msg + %d + 4 * PROCESSOR_INDEX);
    rta_l1_base = reinterpret_cast<uint32_t tt_l1_ptr*>(kcb + rta[0]);
    crta_l1_base = reinterpret_cast<uint32_t tt_l1_ptr*>(kcb + rta[1]);
}
#define kernel_main() (tcc_ttsim_eth_launch(), kernel_main())
`, a.TTSimMailbox, a.TTSimLaunchSize, a.TTSimSemOffsets, a.TTSimRTAOffsets)
}
