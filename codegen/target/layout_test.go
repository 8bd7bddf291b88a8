package target

import (
	"strings"
	"testing"
)

// The bases below were computed independently of this package: offsetof and
// the MEM_* macros compiled with riscv64-unknown-elf-g++ -march=rv32im
// -mabi=ilp32 -DKERNEL_BUILD -DARCH_BLACKHOLE against the pinned release's
// dev_mem_map.h and dev_msgs.h.
func TestBlackholeLayoutMatchesRelease(t *testing.T) {
	l := BlackholeLayout()
	for _, c := range []struct {
		name string
		got  uint32
		want uint32
	}{
		{"MEM_ZEROS_BASE", l.Zeros.Base, 12992},
		{"MEM_LLK_DEBUG_BASE", l.LLKDebug.Base, 13504},
		{"MEM_BRISC_FIRMWARE_BASE", l.Firmware[0].Base, 14528},
		{"MEM_NCRISC_FIRMWARE_BASE", l.Firmware[1].Base, 23232},
		{"MEM_TRISC0_FIRMWARE_BASE", l.Firmware[2].Base, 25792},
		{"MEM_TRISC2_FIRMWARE_BASE", l.Firmware[4].Base, 30912},
		{"MEM_NOC_COUNTER_BASE", l.NoCCounters.Base, 33472},
		{"MEM_FABRIC_COUNTER_BASE", l.FabricCounters.Base, 33552},
		{"MEM_FABRIC_CONNECTION_LOCK_BASE", l.FabricLock.Base, 33584},
		{"MEM_TENSIX_ROUTING_TABLE_BASE", l.RoutingTable.Base, 33728},
		{"MEM_TENSIX_FABRIC_CONNECTIONS_BASE", l.FabricConns.Base, 36304},
		{"MEM_PACKET_HEADER_POOL_BASE", l.PacketHeaders.Base, 36960},
		{"MEM_MAP_END", l.PacketHeaders.End(), 40416},
		{"MEM_BRISC_INIT_LOCAL_L1_BASE_SCRATCH", l.InitScratch[0].Base, 40416},
		{"MEM_NCRISC_INIT_LOCAL_L1_BASE_SCRATCH", l.InitScratch[1].Base, 48608},
		{"MEM_TRISC0_INIT_LOCAL_L1_BASE_SCRATCH", l.InitScratch[2].Base, 56800},
		{"MEM_TRISC2_INIT_LOCAL_L1_BASE_SCRATCH", l.InitScratch[4].Base, 64992},
		{"MEM_NCRISC_INIT_IRAM_L1_BASE_SCRATCH", l.NCRISCIRAMScratch.Base, 69088},
		{"MEM_BANK_TO_NOC_SCRATCH", l.BankToNoC.Base, 77280},
		{"MEM_LOGICAL_TO_VIRTUAL_SCRATCH", l.LogicalToVirtual.Base, 79328},
		{"KERNEL_CONFIG", l.KernelConfig.Base, 40416},
		{"DEFAULT_UNRESERVED", l.Unreserved, 111104},
		{"RISCV_DEBUG_REG_SOFT_RESET_0", l.SoftReset, 0xFFB121B0},
		{"soft reset: all held", l.ResetAll, 0x47800},
		{"soft reset: all but BRISC held", l.ResetAll &^ l.ResetBRISC, 0x47000},
	} {
		if c.got != c.want {
			t.Errorf("%s = %d (%#x), want %d (%#x)", c.name, c.got, c.got, c.want, c.want)
		}
	}
	if got := Blackhole().L1UnreservedBase; got != int(l.Unreserved) {
		t.Errorf("Blackhole().L1UnreservedBase = %d, want the layout's %d", got, l.Unreserved)
	}
}

func TestLayoutHasNoOverlaps(t *testing.T) {
	if err := BlackholeLayout().CheckOverlaps(); err != nil {
		t.Fatal(err)
	}
}

// Each case moves one region onto a live neighbour; CheckOverlaps must name both.
func TestLayoutOverlapDetected(t *testing.T) {
	for _, c := range []struct {
		name  string
		edit  func(l *Layout)
		names []string
	}{
		{"firmware into mailbox", func(l *Layout) { l.Firmware[0].Base = l.Mailbox.End() - 4 }, []string{"mailbox", "firmware brisc"}},
		{"two init scratch areas", func(l *Layout) { l.InitScratch[1].Base -= 16 }, []string{"init scratch brisc", "init scratch ncrisc"}},
		{"kernel config past unreserved", func(l *Layout) { l.KernelConfig.Size += 4096 }, []string{"kernel config ring", "unreserved"}},
		{"launch ring into go messages", func(l *Layout) { l.Msg.LaunchEntries = 9 }, []string{"launch ring", "go_messages"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := BlackholeLayout()
			c.edit(l)
			err := l.CheckOverlaps()
			if err == nil {
				t.Fatal("no error")
			}
			for _, n := range c.names {
				if !strings.Contains(err.Error(), n) {
					t.Errorf("error %q does not name %q", err, n)
				}
			}
		})
	}
}
