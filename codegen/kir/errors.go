package kir

import (
	"errors"
	"fmt"
	"strings"
)

// Rule names one hardware or structural rule a program can break.
type Rule uint8

const (
	// RuleMalformed: the IR itself is inconsistent (undeclared variable,
	// unknown argument, duplicate names, an instruction on the wrong kind of
	// kernel, a missing operand).
	RuleMalformed Rule = iota + 1
	// RuleGrid: a core range is empty or outside the worker grid.
	RuleGrid
	// RuleProcessor: two kernels share a RISC-V on one core, or a kernel's
	// role and processor disagree, or a NoC index is not 0 or 1.
	RuleProcessor
	// RuleCBCount: a CB index outside 0..31, a CB index configured twice on a
	// core, more than 32 CBs on a core, or a kernel using a CB that is not
	// configured on one of its cores.
	RuleCBCount
	// RuleCBConfig: a CB with a non-positive page size or page count, an
	// invalid data format, a bad backing buffer, or a CB used by compute
	// whose page size is not one tile of its format.
	RuleCBConfig
	// RuleCBProducer: a CB on a core does not have exactly one producer
	// kernel (one that reserves/pushes or packs into it).
	RuleCBProducer
	// RuleCBConsumer: a CB on a core does not have exactly one consumer
	// kernel (one that waits/pops or unpacks from it).
	RuleCBConsumer
	// RuleCBOperands: a two-input compute op reads both operands from the
	// same CB.
	RuleCBOperands
	// RuleCBFlow: CB page counts in reserve/push/wait/pop exceed the CB, or
	// the pages moved per loop iteration do not divide the ring (see
	// Validate), or (in the simulator) a block straddles the ring's end.
	RuleCBFlow
	// RuleL1Budget: CBs plus L1 buffers on a core exceed the L1 budget.
	RuleL1Budget
	// RuleDEST: a compute op addresses a DEST tile beyond the capacity of
	// the kernel's sync mode and DEST width.
	RuleDEST
	// RuleDRAMAlign: a DRAM read not 64-byte aligned or not whole pages, or a
	// DRAM write not 16-byte aligned.
	RuleDRAMAlign
	// RuleNoCPacket: a NoC transfer larger than the maximum packet (16 KiB).
	RuleNoCPacket
	// RuleRuntimeArgs: more than 341 runtime (unique + common) args for a
	// kernel on a core.
	RuleRuntimeArgs
	// RuleArgTable: the argument table is inconsistent (duplicate or sparse
	// indices, non-constant compile-time values, missing or extra per-core
	// values, unknown buffers).
	RuleArgTable
	// RuleSemaphore: a semaphore id out of range or duplicated on a core.
	RuleSemaphore
	// RuleTileRegs: (simulator) DEST handshake out of order: math outside
	// tile_regs_acquire..commit or pack outside tile_regs_wait..release.
	RuleTileRegs
	// RuleInit: (simulator) a compute op without its init, or before
	// compute_kernel_hw_startup.
	RuleInit
	// RuleDataFormat: (simulator) an unpack from a CB whose data format is
	// not the one the unpacker is configured for (missing reconfig).
	RuleDataFormat
	// RuleMemory: (simulator) an access outside L1, DRAM or a buffer, or to
	// an unknown NoC endpoint.
	RuleMemory
	// RuleEthernet: an ethernet call outside an ethernet kernel, a transfer
	// that is not a whole number of 16-byte words or does not fit the
	// ethernet L1, or (simulator) a send on a channel with no cable or over
	// an unacknowledged transfer.
	RuleEthernet
	// RuleDefines: a kernel lacks a preprocessor define the tt-metal headers
	// it includes need (REDUCE_OP / REDUCE_DIM for api/compute/reduce.h,
	// the default template arguments of reduce_init / reduce_tile).
	RuleDefines
	// RuleAtomicBarrier: (simulator) a kernel ends with non-posted
	// noc_semaphore_inc atomics not yet waited for by
	// noc_async_atomic_barrier.
	RuleAtomicBarrier
	// RuleUnpackMode: a CB in a compute kernel's UnpackToDestFP32 list is
	// not Float32, is not configured, or is read through the FPU source
	// registers (only copy_tile may read a CB unpacked straight to DEST).
	RuleUnpackMode
	// RuleMcastRange: a multicast rectangle whose corners are
	// not in the order of the NoC it is issued on (start <= end on NoC 0,
	// start >= end on NoC 1; see McastCorners): on a card it reaches other
	// cores than the ones named, and tt-metal's watcher refuses it.
	RuleMcastRange
	// RuleEthWait: a kernel on an ethernet core waits on a semaphore with
	// noc_semaphore_wait / noc_semaphore_wait_min, which spin without
	// run_routing, so the base firmware that shares ERISC0 in the default
	// 2-ERISC mode never runs; eth_noc_semaphore_wait / _wait_min do (kir
	// eth.go).
	RuleEthWait
	// RuleEthSend: an eth_send_bytes whose per-command size is not 16-byte
	// words (PerSendWords != PerSend / 16), is outside 16..MaxCommandBytes,
	// does not cover its size exactly, or issues more transmit commands than
	// the fewest possible (EthMinCommands): e.g. the release's default of one
	// command per 16 bytes. The validator checks what it can prove (the
	// per-command size is the transfer size, or constants); the simulator
	// checks every send.
	RuleEthSend
	// RuleCodeSize: a kernel's estimated binary (EstimateCode) exceeds its
	// processor's code budget, or the program's estimated kernel config
	// ring use (EstimateProgramCode: runtime args, semaphores, CB configs
	// and every binary) does not fit the ring (target.CodeSize).
	RuleCodeSize
	// RuleEthTXQ: two kernels of one ethernet core issue transmit commands
	// on one TX queue (their Kernel.TXQ), so their register writes race on
	// a card; or a TXQ outside 0..EthTXQs-1, or set on a worker kernel
	// (kir eth.go, "TX queues and NoCs of the two ERISCs").
	RuleEthTXQ
	// RuleEthNoC: a kernel on ERISC c of an ethernet core uses a NoC other
	// than EthNoC(c), which tt-metal refuses in 2-ERISC mode: ERISC1 on
	// NoC 0 would share NoC 0's command buffers with ERISC0's kernel and
	// base firmware.
	RuleEthNoC
)

var ruleNames = [...]string{
	RuleMalformed: "malformed", RuleGrid: "grid", RuleProcessor: "processor", RuleCBCount: "cb-count",
	RuleCBConfig: "cb-config", RuleCBProducer: "cb-producer", RuleCBConsumer: "cb-consumer",
	RuleCBOperands: "cb-operands", RuleCBFlow: "cb-flow", RuleL1Budget: "l1-budget", RuleDEST: "dest",
	RuleDRAMAlign: "dram-align", RuleNoCPacket: "noc-packet", RuleRuntimeArgs: "runtime-args",
	RuleArgTable: "arg-table", RuleSemaphore: "semaphore", RuleTileRegs: "tile-regs", RuleInit: "init", RuleDefines: "defines", RuleAtomicBarrier: "atomic-barrier", RuleUnpackMode: "unpack-mode",
	RuleEthWait: "eth-wait", RuleEthSend: "eth-send", RuleMcastRange: "mcast-range", RuleCodeSize: "code-size", RuleEthTXQ: "eth-txq", RuleEthNoC: "eth-noc",
	RuleDataFormat: "data-format", RuleMemory: "memory", RuleEthernet: "ethernet",
}

func (r Rule) String() string {
	if int(r) < len(ruleNames) && ruleNames[r] != "" {
		return ruleNames[r]
	}
	return fmt.Sprintf("rule(%d)", int(r))
}

// NoCB is RuleError.CB when no CB is involved.
const NoCB = -1

// RuleError is one broken rule, with where it was broken.
type RuleError struct {
	Rule    Rule
	Program string
	Kernel  string // "" when not about one kernel
	Core    *Core  // nil when not about one core
	CB      int    // NoCB when not about one CB
	Msg     string
}

func (e *RuleError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "program %q", e.Program)
	if e.Kernel != "" {
		fmt.Fprintf(&b, ", kernel %q", e.Kernel)
	}
	if e.Core != nil {
		fmt.Fprintf(&b, ", core %s", *e.Core)
	}
	if e.CB != NoCB {
		fmt.Fprintf(&b, ", CB c_%d", e.CB)
	}
	fmt.Fprintf(&b, ": %s [rule %s]", e.Msg, e.Rule)
	return b.String()
}

// Errors is a list of rule violations; Validate returns it (or nil).
type Errors []*RuleError

func (es Errors) Error() string {
	msgs := make([]string, len(es))
	for i, e := range es {
		msgs[i] = e.Error()
	}
	if len(es) == 1 {
		return msgs[0]
	}
	return fmt.Sprintf("%d rule violations:\n  %s", len(es), strings.Join(msgs, "\n  "))
}

// Rules lists the rules broken, one entry per error, in order.
func (es Errors) Rules() []Rule {
	out := make([]Rule, len(es))
	for i, e := range es {
		out[i] = e.Rule
	}
	return out
}

// RulesOf extracts the rules from an error returned by Validate or by the
// simulator (an Errors, a *RuleError, or an error wrapping one).
func RulesOf(err error) []Rule {
	var es Errors
	if errors.As(err, &es) {
		return es.Rules()
	}
	var re *RuleError
	if errors.As(err, &re) {
		return []Rule{re.Rule}
	}
	return nil
}

// HasRule reports whether err contains a violation of r.
func HasRule(err error, r Rule) bool {
	for _, x := range RulesOf(err) {
		if x == r {
			return true
		}
	}
	return false
}
