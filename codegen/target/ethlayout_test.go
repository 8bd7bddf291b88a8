package target

import "testing"

// TestActiveEthMatchesRelease checks the active ethernet map against
// values computed independently of this package: the MEM_* macros and
// offsetof(mailboxes_t, ...) of the pinned release's dev_mem_map.h and
// dev_msgs.h compiled with -DCOMPILE_FOR_ERISC -DERISC -DKERNEL_BUILD
// -DARCH_BLACKHOLE (the same program without the ERISC defines gives the
// Tensix mailbox's core_info 2264 and profiler 2528, Layout.Msg).
func TestActiveEthMatchesRelease(t *testing.T) {
	e := BlackholeActiveEth()
	for _, c := range []struct {
		name      string
		got, want uint32
	}{
		{"MEM_AERISC_MAILBOX_BASE", e.MailboxBase, 0x100},
		{"offsetof(mailboxes_t, core_info)", uint32(e.CoreInfo), 1648},
		{"offsetof(mailboxes_t, profiler)", uint32(e.Profiler), 1904},
		{"MEM_AERISC_FIRMWARE_BASE", e.FirmwareBase[0], 0x3330},
		{"MEM_SUBORDINATE_AERISC_FIRMWARE_BASE", e.FirmwareBase[1], 0x9330},
		{"MEM_AERISC_MAP_END", e.KernelConfigBase, 0xF330},
		{"MEM_AERISC_INIT_LOCAL_L1_BASE_SCRATCH", e.InitScratch[0], 0xF330},
		{"MEM_SUBORDINATE_AERISC_INIT_LOCAL_L1_BASE_SCRATCH", e.InitScratch[1], 0x10C30},
		{"MEM_AERISC_BANK_TO_NOC_SCRATCH", e.BankToNoC, 0x12C30},
		{"MEM_SYSENG_ETH_MAILBOX_ADDR", e.FWMailbox, 0x7D000},
		{"ETH_MSG_CALL | ETH_MSG_RELEASE_CORE", e.MsgCall | e.MsgReleaseCore, 0xCA110002},
		{"ttsim go_messages[0]", e.TTSimMailbox + uint32(e.TTSimGoMessages), 0x590},
	} {
		if c.got != c.want {
			t.Errorf("%s = %#x, want %#x", c.name, c.got, c.want)
		}
	}
	l := BlackholeLayout()
	if e.CoreInfo+l.Msg.CoreInfoSize > e.Profiler {
		t.Errorf("core_info [%d, %d) overlaps profiler at %d", e.CoreInfo, e.CoreInfo+l.Msg.CoreInfoSize, e.Profiler)
	}
}
