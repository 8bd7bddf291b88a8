package kir

import (
	"fmt"
	"sort"
	"strings"

	"github.com/tcc-dev/tcc/codegen/target"
)

// CodeEstimate is the estimated size of the binaries of a kernel: the
// images (text and data packed) tt-metal's JIT build makes of it, which
// is what the kernel config ring holds.
type CodeEstimate struct {
	// Bytes is the largest of Binaries: the number checked against the
	// processor's code budget.
	Bytes int
	// Binaries are the estimated images: one for a data-movement kernel;
	// TRISC0 (unpack), TRISC1 (math), TRISC2 (pack) for a compute kernel.
	Binaries []int
	// Terms counts the cost-table entries the kernel uses: "base:dm" or
	// "base:compute" once, "stmt:<call>" (the tt-metal name; let, assign,
	// for, if; "compute" for any compute call) once per statement as
	// printed, "expr:<kind>" once per distinct expression node.
	Terms map[string]int
}

// codeCost is the bytes per term of the code-size estimate (see
// EstimateCode), calibrated against the images tt-metal's JIT flow builds
// from tcc's printed kernels (testdata/codesize.tsv, which says how they
// were measured; TestCodeEstimateCalibration). The costs were fitted per
// group (a NoC transfer, a multicast, an atomic, a CB call, a wait, a
// loop, a simple statement, a getter call, an address, an arithmetic
// node, a compute call) and then raised until the estimate is at least
// the real size of every measured kernel.
var codeCost = map[string]int{
	// Fixed part of one binary: the kernel_main wrapper, the argument and
	// CB interface set-up of the firmware wrapper, startup code.
	"base:dm":      400,
	"base:compute": 1000,

	// Control statements and simple stores.
	"stmt:let":               8,
	"stmt:assign":            8,
	"stmt:if":                8,
	"stmt:l1_write32":        8,
	"stmt:noc_semaphore_set": 8,
	"stmt:for":               24,

	// CB calls (in a compute kernel: wait/pop on TRISC0 only, reserve/push
	// on TRISC2 only, as tt-metal's compute_kernel_api/cb_api.h builds
	// them).
	"stmt:cb_reserve_back": 48,
	"stmt:cb_push_back":    48,
	"stmt:cb_wait_front":   48,
	"stmt:cb_pop_front":    48,

	// NoC and ethernet transfers; the address is an expression term.
	"stmt:noc_async_read":                           28,
	"stmt:noc_async_write":                          28,
	"stmt:eth_send_bytes":                           28,
	"stmt:eth_send_bytes_over_channel_payload_only": 28,
	"stmt:noc_async_write_multicast":                64,
	"stmt:noc_semaphore_set_multicast":              64,
	// The same NoC commands with the loopback flag (tt-metal's
	// dataflow_api.h: the multicast's *_loopback_src forms).
	"stmt:noc_async_write_multicast_loopback_src":   64,
	"stmt:noc_semaphore_set_multicast_loopback_src": 64,
	"stmt:noc_semaphore_inc":                        140,

	// Barriers and waits.
	"stmt:noc_async_read_barrier":  28,
	"stmt:noc_async_write_barrier": 28,
	// A persistent program's phase barriers (codegen/cpp/persist.go): a
	// guess at a call of the core-local barrier plus, for the begin, the
	// CB install and argument-base switch (not measured).
	"stmt:tcc_phase_begin": 64,
	"stmt:tcc_phase_end":   24,
	// A printed persistent kernel (codegen/cpp) shares phase bodies: a
	// call of a body function (the dependency list's address and count,
	// a jump) per phase, the function's prologue and return once per
	// body, and the phase machinery once per binary (the barrier, the CB
	// install's two setup_local_cb_read_write_interfaces loops, the
	// argument-base switch, the dependency wait loop): guesses, not
	// measured.
	"stmt:tcc_phase_body_call": 16,
	// A run of signals to other cores (codegen/cpp's incRun): a call of
	// the shared loop with a constant list, 2 bytes per listed core.
	"stmt:tcc_inc_call":   20,
	"data:tcc_core_index": 2,
	// A run of dependency waits in kernel_main: a call of the shared wait
	// loop with a constant list of done words, 4 bytes each.
	"stmt:tcc_wait_call": 16,
	"data:tcc_done_word": 4,
	// A loop over phases that differ in constants only (codegen/cpp's
	// step groups): a word per row and field of its constant table.
	"data:tcc_step_word":  4,
	"base:tcc_phase_body": 16,
	// The phase machinery of a binary; 768 rather than the first guess,
	// 512, since tiny-mlp's merged pack binaries measured up to 184 bytes
	// above their estimates (codegen/persist/testdata/images.tsv).
	"base:persist": 768,
	// A merged compute kernel's unpack and math binaries beyond the
	// shared terms (on TRISC0 and TRISC1 only): measured on the images
	// the JIT builds (stock GCC, tcc's SFPU code) from the merged
	// kernels of tiny-mlp and the small qwen27b config at 1x1
	// (`tcc build ... --persistent --device-loop`, runtime/blackhole/jit's
	// TestPersistentRealBuild; codegen/persist/testdata/images.tsv): the
	// shared terms alone fell short of the unpack image by up to 4,384
	// bytes (tiny-mlp, persist_compute_2) and of the math image by up to
	// 2,556 (small config, persist_compute_20; they overestimate the
	// pack image and the largest kernels' every image), so these were
	// those shortfalls less the raise of base:persist, rounded up to
	// 128 bytes: 4,224 and 2,560. Row sums by matmul against a ones
	// column (matmul_tiles in place of reduce_tile) then left the images,
	// re-measured, up to 1,040 bytes (unpack, small config
	// persist_compute_20) and 2,032 (math, the same) above those
	// estimates; each is raised by its shortfall, rounded up to 128.
	"base:persist_unpack":             5376,
	"base:persist_math":               4608,
	"stmt:noc_async_writes_flushed":   28,
	"stmt:noc_async_atomic_barrier":   28,
	"stmt:noc_semaphore_wait":         28,
	"stmt:noc_semaphore_wait_min":     28,
	"stmt:eth_wait_for_receiver_done": 28,
	"stmt:eth_wait_for_bytes":         28,
	"stmt:eth_receiver_done":          28,
	// Not in the measured sample (added after it): priced as the other
	// waits that call the firmware's context switch.
	"stmt:eth_noc_semaphore_wait":     28,
	"stmt:eth_noc_semaphore_wait_min": 28,
	// The channel calls (two packets in flight): priced as their
	// channel-0 counterparts.
	"stmt:eth_wait_for_receiver_channel_done":            28,
	"stmt:eth_wait_for_bytes_on_channel":                 28,
	"stmt:eth_receiver_channel_done":                     28,
	"stmt:eth_send_payload_complete_signal_over_channel": 28,

	// The DEST handshake, built on one TRISC each (tt-metal's compute
	// reg_api.h: acquire and commit on math, wait and release on pack).
	"stmt:tile_regs_acquire": 24,
	"stmt:tile_regs_commit":  24,
	"stmt:tile_regs_wait":    24,
	"stmt:tile_regs_release": 24,

	// Any other compute call, on each TRISC. Calibrated on FPU kernels (matmul,
	// eltwise, copy, pack); SFPU calls could not be measured with a stock
	// compiler and get the same cost.
	"stmt:compute": 64,

	// Expression nodes (constants folded, common subexpressions once).
	"expr:var":         4,
	"expr:arg":         4,
	"expr:bin":         4,
	"expr:const":       4,
	"expr:l1-read":     4,
	"expr:divmod":      4,
	"expr:const-large": 4,
	"expr:cb-ptr":      20,
	"expr:semaphore":   20,
	"expr:my-noc":      20,
	"expr:noc-addr":    24,
	"expr:bank-addr":   24,
	"expr:mcast-addr":  64,
	// read_tile_value: not measured (no kernel of testdata/codesize.tsv
	// calls it); priced as a getter call plus the mailbox hand-over to
	// the math and pack threads, which each binary holds one side of.
	"expr:tile-value": 32,
}

// EstimateCode estimates the binaries of k from its kernel IR: a base per
// kernel class plus a cost per statement and per expression node, with
// statements counted as the C++ printer prints them (each once, a loop
// body once however many times it runs), constants folded and repeated
// subexpressions counted once. Postconditions: for a data-movement kernel
// Binaries[0] = Bytes = the sum over Terms of count * codeCost; for a
// compute kernel each TRISC's binary is that sum less the CB and DEST
// handshake calls the TRISC does not build, and Bytes is the largest; the
// same kernel always gives the same estimate.
func EstimateCode(k *Kernel) CodeEstimate {
	terms := map[string]int{}
	if k.Role == RoleCompute {
		terms["base:compute"]++
	} else {
		terms["base:dm"]++
	}
	var expr func(e Expr) (konst bool)
	var arg func(e Expr)
	// seen holds the non-constant subexpressions already counted: the
	// compiler computes a repeated subexpression once (common
	// subexpression elimination), so it is counted once per kernel.
	seen := map[string]bool{}
	// expr counts the terms of e and reports whether e is a constant the
	// compiler folds (constant operands of a folded node cost nothing; a
	// constant used as it is costs an immediate load).
	expr = func(e Expr) bool {
		if k, ok := cseKey(e); ok {
			if seen[k] {
				return false
			}
			seen[k] = true
		}
		switch e := e.(type) {
		case nil:
			return true
		case Const:
			return true
		case Var:
			terms["expr:var"]++
			return false
		case ArgRef:
			terms["expr:arg"]++
			return false
		case Bin:
			kx, ky := expr(e.X), expr(e.Y)
			switch {
			case kx && ky:
				return true
			case (e.Op == OpDiv || e.Op == OpMod) && !powerOfTwo(e.Y):
				terms["expr:divmod"]++
			default:
				terms["expr:bin"]++
			}
			for _, c := range []Expr{e.X, e.Y} {
				if c, ok := c.(Const); ok && !smallImm(c.V) {
					terms["expr:const-large"]++
				}
			}
			return false
		case GetWritePtr, GetReadPtr, GetTileSize:
			terms["expr:cb-ptr"]++
		case GetSemaphore, GetEthSemaphore:
			terms["expr:semaphore"]++
		case NoCAddr:
			terms["expr:noc-addr"]++
		case DRAMBankAddr:
			terms["expr:bank-addr"]++
		case MulticastAddr:
			terms["expr:mcast-addr"]++
		case L1Read32:
			terms["expr:l1-read"]++
		case ReadTileValue:
			terms["expr:tile-value"]++
		case MyNoCX, MyNoCY:
			terms["expr:my-noc"]++
		case NumDRAMBanks:
			return true
		}
		for _, s := range SubExprs(e) {
			arg(s)
		}
		return false
	}
	// arg counts a call argument: a constant argument is an immediate
	// load.
	arg = func(e Expr) {
		if expr(e) {
			if c, ok := e.(Const); ok && !smallImm(c.V) {
				terms["expr:const-large"]++
			} else {
				terms["expr:const"]++
			}
		}
	}
	Inspect(k.Body, func(s Stmt) bool {
		if key := stmtTerm(s); key != "" {
			terms[key]++
		}
		for _, e := range StmtExprs(s) {
			arg(e)
		}
		return true
	})
	return estimateFromTerms(k.Role == RoleCompute, terms)
}

// EstimateTerms prices terms (EstimateCode's Terms, possibly merged from
// several estimates) with the cost table: the estimate of one kernel made
// of them. The same terms always give the same estimate.
func EstimateTerms(compute bool, terms map[string]int) CodeEstimate {
	return estimateFromTerms(compute, terms)
}

// estimateFromTerms prices terms with codeCost (see EstimateCode).
func estimateFromTerms(compute bool, terms map[string]int) CodeEstimate {
	cost := func(keys ...string) int {
		n := 0
		for _, k := range keys {
			n += terms[k] * codeCost[k]
		}
		return n
	}
	all := 0
	for key, c := range terms {
		all += c * codeCost[key]
	}
	if !compute {
		return CodeEstimate{Bytes: all, Binaries: []int{all}, Terms: terms}
	}
	unpack := cost("stmt:cb_wait_front", "stmt:cb_pop_front", "base:persist_unpack")
	math := cost("stmt:tile_regs_acquire", "stmt:tile_regs_commit", "base:persist_math")
	pack := cost("stmt:cb_reserve_back", "stmt:cb_push_back", "stmt:tile_regs_wait", "stmt:tile_regs_release")
	common := all - unpack - math - pack
	bins := []int{common + unpack, common + math, common + pack}
	return CodeEstimate{Bytes: max(bins[0], bins[1], bins[2]), Binaries: bins, Terms: terms}
}

// stmtTerm is the cost-table key of s ("" for a comment).
func stmtTerm(s Stmt) string {
	switch s.(type) {
	case Comment:
		return ""
	case Let:
		return "stmt:let"
	case Assign:
		return "stmt:assign"
	case For:
		return "stmt:for"
	case If:
		return "stmt:if"
	case L1Write32:
		return "stmt:l1_write32"
	case TileRegsAcquire, TileRegsCommit, TileRegsWait, TileRegsRelease:
		return "stmt:" + APIName(s)
	}
	if IsComputeOnly(s) {
		return "stmt:compute"
	}
	return "stmt:" + APIName(s)
}

// smallImm reports whether v fits a 12-bit signed immediate.
func smallImm(v uint32) bool { return int32(v) >= -2048 && int32(v) < 2048 }

// powerOfTwo reports whether e is a constant power of two (a shift or a
// mask, not a division routine). NUM_DRAM_BANKS is 8 on a p150a.
func powerOfTwo(e Expr) bool {
	switch c := e.(type) {
	case Const:
		return c.V != 0 && c.V&(c.V-1) == 0
	case NumDRAMBanks:
		return true
	}
	return false
}

// cseKey is a structural key of a compound expression (a Bin or a call
// with operands), and false for leaves and for expressions that must be
// evaluated each time (L1 reads, which are volatile).
func cseKey(e Expr) (string, bool) {
	switch e.(type) {
	case Bin, NoCAddr, DRAMBankAddr, MulticastAddr, GetSemaphore, GetEthSemaphore, MyNoCX, MyNoCY:
	default:
		return "", false
	}
	var b strings.Builder
	var key func(e Expr) bool
	key = func(e Expr) bool {
		switch e := e.(type) {
		case L1Read32, ReadTileValue:
			return false
		case Const:
			fmt.Fprintf(&b, "%d", e.V)
		case Var:
			b.WriteString(e.Name)
		case ArgRef:
			b.WriteString("$" + e.Name)
		case Bin:
			b.WriteByte('(')
			if !key(e.X) {
				return false
			}
			b.WriteString(e.Op.Symbol())
			if !key(e.Y) {
				return false
			}
			b.WriteByte(')')
		default:
			fmt.Fprintf(&b, "%T(", e)
			for _, s := range SubExprs(e) {
				if !key(s) {
					return false
				}
				b.WriteByte(',')
			}
			b.WriteByte(')')
		}
		return true
	}
	if !key(e) {
		return "", false
	}
	return b.String(), true
}

// codeLimit is the code budget of one binary of k and the processor name
// it is reported under.
func codeLimit(k *Kernel, t *target.Target) (int, string) {
	switch {
	case k.OnEth():
		return t.Code.EthKernelBytes, "ERISC"
	case k.Processor == RISCV0:
		return t.CodeBytes(target.BRISC), target.BRISC.String()
	case k.Processor == RISCV1:
		return t.CodeBytes(target.NCRISC), target.NCRISC.String()
	}
	return t.CodeBytes(target.TRISC), "each TRISC"
}

// ProgramCodeSize is the estimated kernel config ring use of a program on
// Tensix cores, component by component as tt-metal's
// finalize_program_offsets lays it out (target.CodeSize).
type ProgramCodeSize struct {
	RuntimeArgs, CommonArgs, Semaphores, CBConfigs, Images int
	// ImagesCore is a core whose kernel images take Images bytes.
	ImagesCore Core
}

// Total is the ring bytes the program needs: the sum of the components.
func (s ProgramCodeSize) Total() int {
	return s.RuntimeArgs + s.CommonArgs + s.Semaphores + s.CBConfigs + s.Images
}

// EstimateProgramCode estimates the kernel config ring use of p's worker
// cores (ethernet cores have rings of their own and are left out), each
// component the maximum over the program's cores, rounded as tt-metal
// rounds it, with every binary of every kernel at its EstimateCode size
// rounded up to the alignment.
func EstimateProgramCode(p *Program, t *target.Target) ProgramCodeSize {
	return estimateProgramCode(p, t, EstimateCode)
}

// estimateProgramCode is EstimateProgramCode with each kernel's estimate
// from estimate.
func estimateProgramCode(p *Program, t *target.Target, estimate func(*Kernel) CodeEstimate) ProgramCodeSize {
	cs := t.Code
	align := func(n int) int { return target.AlignUp(n, cs.Align) }
	est := map[*Kernel]int{}
	var out ProgramCodeSize
	crta := map[Processor]int{}
	for _, k := range p.Kernels {
		if k.OnEth() {
			continue
		}
		for _, n := range estimate(k).Binaries {
			est[k] += align(n)
		}
		crta[k.Processor] = max(crta[k.Processor], k.numArgs(CommonRuntimeArg))
	}
	for _, n := range crta {
		out.CommonArgs += align(4 * n)
	}
	maxSem := -1
	for _, s := range p.Semaphores {
		for _, r := range s.Cores {
			if !IsEthRange(r) {
				maxSem = max(maxSem, s.ID)
			}
		}
	}
	out.Semaphores = (maxSem + 1) * cs.SemaphoreBytes
	for _, c := range p.Cores() {
		if c.IsEth() {
			continue
		}
		rta, images := 0, 0
		for _, k := range p.Kernels {
			if InRanges(k.Cores, c) {
				rta += 4 * k.numArgs(RuntimeArg)
				images += est[k]
			}
		}
		out.RuntimeArgs = max(out.RuntimeArgs, align(rta))
		if images > out.Images {
			out.Images, out.ImagesCore = images, c
		}
		maxCB := -1
		for _, cb := range p.CBs {
			if InRanges(cb.Cores, c) {
				maxCB = max(maxCB, cb.Index)
			}
		}
		out.CBConfigs = max(out.CBConfigs, (maxCB+1)*cs.CBConfigBytes)
	}
	return out
}

// codeSize checks RuleCodeSize: every kernel's estimated binary within its
// processor's budget, and the program's estimated ring use below the
// kernel config ring.
func (v *validator) codeSize() {
	t := v.t
	ests := make(map[*Kernel]CodeEstimate, len(v.p.Kernels))
	for _, k := range v.p.Kernels {
		e := EstimateCode(k)
		ests[k] = e
		limit, proc := codeLimit(k, t)
		if e.Bytes > limit {
			v.add(RuleCodeSize, k.Name, nil, NoCB, "estimated %d bytes of %s code exceed the %d-byte limit of %s (largest parts: %s); move unrolled statements into loops",
				e.Bytes, k.Role, limit, proc, largestTerms(e.Terms, 3))
		}
	}
	s := estimateProgramCode(v.p, t, func(k *Kernel) CodeEstimate { return ests[k] })
	if s.Total() < t.Code.RingBytes {
		return
	}
	var parts []string
	for _, k := range v.p.KernelsOn(s.ImagesCore) {
		_, proc := codeLimit(k, t)
		parts = append(parts, fmt.Sprintf("%s %d on %s", k.Name, EstimateCode(k).Bytes, proc))
	}
	v.add(RuleCodeSize, "", nil, NoCB, "the kernel config ring needs an estimated %d bytes (runtime args %d, common runtime args %d, semaphores %d, CB configs %d, kernel images %d: %s); the ring holds less than %d",
		s.Total(), s.RuntimeArgs, s.CommonArgs, s.Semaphores, s.CBConfigs, s.Images, strings.Join(parts, ", "), t.Code.RingBytes)
}

// largestTerms names the n terms of an estimate that cost the most.
func largestTerms(terms map[string]int, n int) string {
	type tc struct {
		key   string
		bytes int
	}
	var ts []tc
	for k, c := range terms {
		ts = append(ts, tc{k, c * codeCost[k]})
	}
	sort.Slice(ts, func(i, j int) bool {
		if ts[i].bytes != ts[j].bytes {
			return ts[i].bytes > ts[j].bytes
		}
		return ts[i].key < ts[j].key
	})
	var out []string
	for i := 0; i < len(ts) && i < n; i++ {
		out = append(out, fmt.Sprintf("%d x %s = %d", terms[ts[i].key], strings.TrimPrefix(ts[i].key, "stmt:"), ts[i].bytes))
	}
	return strings.Join(out, ", ")
}
