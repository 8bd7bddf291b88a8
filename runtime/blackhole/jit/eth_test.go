package jit

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tcc-dev/tcc/codegen/hostcfg"
)

// TestEthCommandLines pins what makes an ethernet build one: the
// processor a kernel with an Ethernet config gets (RISCV_0: ERISC0,
// RISCV_1: ERISC1), its compile command (active_erisck.cc for both, the
// 2-ERISC-mode defines with PHYSICAL_AERISC_ID 0 or 1, the ethernet
// include directory, ERISC0's static stack limit, -Os) and its link
// command (main_aerisc.ld's or subordinate_aerisc.ld's kernel script, the
// ERISC's firmware symbols, no noc.o), and each firmware's link (ERISC0:
// both sources, no tmu-crt0.o, picolibc's libc.a for setjmp with stock
// GCC; ERISC1: subordinate_erisc.o after tmu-crt0.o).
func TestEthCommandLines(t *testing.T) {
	e := &Env{TTMetalHome: "/tt", Toolchain: &Toolchain{Kind: Stock, GXX: "/bin/riscv64-unknown-elf-g++", LibGCC: "/lib/libgcc.a",
		SysIncludes: []string{"/inc/c++", "/usr/lib/picolibc/riscv64-unknown-elf/include"}}}
	ps, err := kernelProcs(&hostcfg.KernelConfig{Processor: "RISCV_0", Ethernet: &hostcfg.EthernetConfig{Processor: "RISCV_0"}})
	require.NoError(t, err)
	require.Len(t, ps, 1)
	require.True(t, ps[0].eth, "an ethernet kernel builds for ERISC0")
	ps, err = kernelProcs(&hostcfg.KernelConfig{Processor: "RISCV_1", Ethernet: &hostcfg.EthernetConfig{Processor: "RISCV_1"}})
	require.NoError(t, err)
	require.Len(t, ps, 1)
	require.Equal(t, Eth1Image, ps[0].index, "an ethernet kernel on RISCV_1 builds for ERISC1")
	_, err = kernelProcs(&hostcfg.KernelConfig{Processor: "RISCV_2", Ethernet: &hostcfg.EthernetConfig{Processor: "RISCV_2"}})
	require.ErrorContains(t, err, "ethernet kernel on processor RISCV_2")

	compile := strings.Join(e.kernelCompileCmd(ethProc, "/k", "/src", "", nil, "", map[string]string{"D": "1"}, 0, nil).Args, " ")
	link := strings.Join(e.kernelLinkCmd(ethProc, "/k", "/fw").Args, " ")
	fw := strings.Join(e.ethFwLinkCmd(ethProc, "/d", "/fw").Args, " ")
	compile1 := strings.Join(e.kernelCompileCmd(eth1Proc, "/k", "/src", "", nil, "", map[string]string{"D": "1"}, 1, nil).Args, " ")
	link1 := strings.Join(e.kernelLinkCmd(eth1Proc, "/k", "/fw").Args, " ")
	fw1 := strings.Join(e.ethFwLinkCmd(eth1Proc, "/d", "/fw").Args, " ")
	tests := []struct {
		name, cmd string
		want      []string
		not       []string
	}{
		{"kernel compile", compile, []string{
			"/bin/riscv64-unknown-elf-g++ -Os ",
			" -Werror=stack-usage=1912 ",
			" -I/tt/tt_metal/hw/inc/ethernet -I/tt/tt_metal/hw/firmware/src/tt-1xx ",
			" -c -o /k/active_erisck.o /tt/tt_metal/hw/firmware/src/tt-1xx/active_erisck.cc ",
			" -DPROCESSOR_INDEX=0 -DCOMPILE_FOR_ERISC -DERISC -DRISC_B0_HW -DCOMPILE_FOR_AERISC=0 -DPROGRAMMABLE_CORE_TYPE=1 -DENABLE_2_ERISC_MODE -DPHYSICAL_AERISC_ID=0 -DARCH_BLACKHOLE ",
			" -DKERNEL_BUILD -DD=1 -DNOC_INDEX=0 -DNOC_MODE=0",
		}, []string{"COMPILE_FOR_BRISC"}},
		{"kernel link", link, []string{
			"-Wl,--just-symbols=/fw/active_erisc/active_erisc_weakened.elf ",
			" -T/fw/ld/kernel_active_erisc.ld -Wl,--emit-relocs /fw/lib/substitutes.o /k/active_erisck.o /lib/libgcc.a -o /k/active_erisc.elf",
		}, []string{"noc.o", "tmu-crt0.o"}},
		{"firmware link", fw, []string{
			" -T/fw/ld/firmware_active_erisc.ld /fw/lib/substitutes.o /d/active_erisc.o /d/active_erisc-crt0.o " +
				"/usr/lib/picolibc/riscv64-unknown-elf/lib/release/rv32im/ilp32/libc.a /lib/libgcc.a -o /d/active_erisc.elf",
		}, []string{"noc.o", "tmu-crt0.o"}},
		{"ERISC1 kernel compile", compile1, []string{
			"/bin/riscv64-unknown-elf-g++ -Os ",
			" -I/tt/tt_metal/hw/inc/ethernet -I/tt/tt_metal/hw/firmware/src/tt-1xx ",
			" -c -o /k/subordinate_erisck.o /tt/tt_metal/hw/firmware/src/tt-1xx/active_erisck.cc ",
			" -DPROCESSOR_INDEX=1 -DCOMPILE_FOR_ERISC -DERISC -DRISC_B0_HW -DCOMPILE_FOR_AERISC=1 -DPROGRAMMABLE_CORE_TYPE=1 -DENABLE_2_ERISC_MODE -DPHYSICAL_AERISC_ID=1 -DARCH_BLACKHOLE ",
			" -DKERNEL_BUILD -DD=1 -DNOC_INDEX=1 -DNOC_MODE=0",
		}, []string{"COMPILE_FOR_NCRISC", "stack-usage", "PHYSICAL_AERISC_ID=0", "COMPILE_FOR_AERISC=0"}},
		{"ERISC1 kernel link", link1, []string{
			"-Wl,--just-symbols=/fw/subordinate_erisc/subordinate_erisc_weakened.elf ",
			" -T/fw/ld/kernel_subordinate_erisc.ld -Wl,--emit-relocs /fw/lib/substitutes.o /k/subordinate_erisck.o /lib/libgcc.a -o /k/subordinate_erisc.elf",
		}, []string{"noc.o", "tmu-crt0.o", "stack-usage"}},
		{"ERISC1 firmware link", fw1, []string{
			" -T/fw/ld/firmware_subordinate_erisc.ld /fw/lib/tmu-crt0.o /fw/lib/substitutes.o /d/subordinate_erisc.o /usr/lib/picolibc",
		}, []string{"noc.o", "active_erisc"}},
		{"ERISC1 linker script", strings.Join(e.ldScriptCmd("kernel", eth1Proc, "/fw/ld/kernel_subordinate_erisc.ld").Args, " "), []string{
			" -DTYPE_KERNEL -DCOMPILE_FOR_SUBORDINATE_AERISC ",
		}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, w := range tc.want {
				if !strings.Contains(tc.cmd, w) {
					t.Errorf("command does not contain %q:\n%s", w, tc.cmd)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(tc.cmd, n) {
					t.Errorf("command contains %q:\n%s", n, tc.cmd)
				}
			}
		})
	}
}

// TestTTSimEthKernelIncludes checks the kernel_includes.hpp of an
// ethernet kernel: built for ttsim it ends with the prologue that sets
// sem_l1_base[], rta_l1_base and crta_l1_base from the launch message
// (ttsim runs no active-erisc firmware) and on ERISC1 first runs noc_init,
// and wraps _start's kernel_main() call in it; built for a card
// (whose firmware sets sem_l1_base) and for a worker kernel on ttsim it
// only includes the source.
func TestTTSimEthKernelIncludes(t *testing.T) {
	eth := &hostcfg.KernelConfig{Name: "e", Processor: "RISCV_0", Ethernet: &hostcfg.EthernetConfig{Processor: "RISCV_0"}}
	worker := &hostcfg.KernelConfig{Name: "w", Processor: "RISCV_0"}
	prologue := []string{"sem_l1_base[t] = ", "#define kernel_main() (tcc_ttsim_eth_launch(), kernel_main())", "(0x100)", "rd * 144u", "msg + 16 + 2 * t",
		"rta_l1_base = ", "crta_l1_base = ", "msg + 28 + 4 * PROCESSOR_INDEX", "#if PROCESSOR_INDEX == 1\n    // ERISC1's command buffers", "noc_init(MEM_NOC_ATOMIC_RET_VAL_ADDR);"}
	tests := []struct {
		name  string
		k     *hostcfg.KernelConfig
		ttsim bool
		want  bool
	}{{"ethernet on ttsim", eth, true, true}, {"ethernet on a card", eth, false, false}, {"worker on ttsim", worker, true, false}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			files, err := genFiles(&hostcfg.ProgramConfig{Program: "p"}, tc.k, "/src/k.cpp", "void kernel_main() {}\n", tc.ttsim)
			require.NoError(t, err)
			inc := files["kernel_includes.hpp"]
			require.True(t, strings.HasPrefix(inc, "#include \"/src/k.cpp\"\n"), "kernel_includes.hpp:\n%s", inc)
			for _, s := range prologue {
				if got := strings.Contains(inc, s); got != tc.want {
					t.Errorf("kernel_includes.hpp contains %q: %v, want %v:\n%s", s, got, tc.want, inc)
				}
			}
		})
	}
}
