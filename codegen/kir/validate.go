package kir

import (
	"fmt"
	"reflect"
	"regexp"
	"strings"

	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
)

// Validate checks p against the hardware rules of t and returns every
// violation as an Errors value (nil when p is valid). The rules:
//
//   - RuleGrid, RuleProcessor: core ranges lie in the worker grid; at most one
//     kernel per RISC-V class per core; compute kernels run on ComputeProc,
//     data-movement kernels on RISCV0/RISCV1 with NoC 0 or 1.
//   - RuleCBCount: CB indices in 0..MaxCBs-1, each index configured at most
//     once per core (so at most 32 CBs per core), and every CB a kernel names
//     configured on each of the kernel's cores.
//   - RuleCBConfig: positive page size and page count, a valid data format,
//     a backing buffer that exists, is L1 sharded and holds the ring, and a
//     page size of exactly one tile for CBs that compute unpacks or packs.
//   - RuleCBProducer / RuleCBConsumer: on every core, every configured CB has
//     exactly one producer kernel (cb_reserve_back / cb_push_back /
//     pack_tile) and exactly one consumer kernel (cb_wait_front /
//     cb_pop_front / an unpacking compute op); the two may be the same
//     compute kernel (an intermediate CB).
//   - RuleCBOperands: add/sub/mul (plain and broadcast), matmul and
//     reconfig_data_format read two different CBs.
//   - RuleCBFlow: every statically known page count n of cb_reserve_back,
//     cb_push_back, cb_wait_front and cb_pop_front satisfies 1 <= n <= pages.
//     And the cycle rule: a CB's read and write pointers wrap only when they
//     reach the ring's end exactly, so a multi-page block must never straddle
//     the end. Therefore, in every loop body that reserves (waits for) more
//     than one page of a CB at once, the pages the kernel pushes (pops) per
//     iteration, where statically known, must divide the page count: a whole
//     number of iterations then fills the ring exactly and every cycle of the
//     ring ends at an iteration boundary. Single-page traffic cannot
//     straddle and is not constrained. The simulator checks the actual ring
//     positions of every block at run time.
//   - RuleL1Budget: per core, the sum of the CBs (16-byte aligned; CBs backed
//     by a buffer excluded) and of the L1 buffers' per-core pages fits in
//     t.L1Budget().
//   - RuleCodeSize: every kernel's estimated binary (EstimateCode, from
//     the statements as printed) is within its processor's budget
//     (t.CodeBytes, t.Code.EthKernelBytes on ethernet cores), and the
//     program's estimated kernel config ring use (EstimateProgramCode) is
//     below t.Code.RingBytes.
//   - RuleDEST: every statically known DEST index (copy_tile, eltwise,
//     broadcast, matmul, matmul_block's whole output block, reduce,
//     transpose, SFPU, pack_tile) is below t.DestTiles(full sync, fp32 DEST)
//     of the kernel's config; dynamic indices are checked by the simulator.
//   - RuleDRAMAlign: a noc_async_read whose source is traceable to a DRAM bank
//     address must have an offset known not to be misaligned to 64 bytes
//     (a provably misaligned offset is an error); writes to DRAM the same for
//     16 bytes. Whole-page reads are checked by the simulator.
//   - RuleNoCPacket: statically known NoC transfer sizes are at most
//     t.MaxNoCPacket.
//   - RuleRuntimeArgs: runtime plus common runtime args of a kernel on a core
//     are at most t.MaxRuntimeArgs.
//   - RuleArgTable, RuleSemaphore, RuleMalformed: the tables and bodies are
//     consistent (see the Rule docs).
//   - Ethernet cores: kernels and semaphores may sit on ethernet channels
//     that exist (a kernel on one kind of core only, no compute kernel, one
//     kernel per ERISC), CBs may not (RuleGrid); ethernet calls appear only
//     in kernels on ethernet cores and statically known transfer sizes are
//     whole 16-byte words within the ethernet L1 (RuleEthernet); kernels on
//     ethernet cores wait on semaphores with eth_noc_semaphore_wait*, not
//     noc_semaphore_wait* (RuleEthWait); eth_send_bytes issues the fewest
//     transmit commands (RuleEthSend, see EthSendBytes); no two kernels of
//     one ethernet core send on one TX queue, and only ethernet kernels
//     name a queue, 0 or 1 (RuleEthTXQ); a kernel on ERISC c uses NoC c
//     (RuleEthNoC; eth.go, "TX queues and NoCs of the two ERISCs").
//   - RuleMcastRange: a multicast rectangle whose corners are arguments
//     known at build time is in the order of the kernel's NoC
//     (McastCorners); the simulator checks every multicast it executes.
//
// Errors are ordered by program part (CBs, semaphores, kernels, then cores
// row-major), so the output is deterministic.
func Validate(p *Program, t *target.Target) error {
	if p == nil || t == nil {
		return Errors{{Rule: RuleMalformed, CB: NoCB, Msg: "nil program or target"}}
	}
	for i, k := range p.Kernels {
		if k == nil {
			return Errors{{Rule: RuleMalformed, Program: p.Name, CB: NoCB, Msg: fmt.Sprintf("kernel %d is nil", i)}}
		}
	}
	v := &validator{p: p, t: t}
	v.program()
	if len(v.errs) == 0 {
		return nil
	}
	return v.errs
}

type validator struct {
	p    *Program
	t    *target.Target
	errs Errors
}

func (v *validator) add(rule Rule, kernel string, core *Core, cb int, format string, args ...any) {
	var c *Core
	if core != nil {
		cc := *core
		c = &cc
	}
	v.errs = append(v.errs, &RuleError{Rule: rule, Program: v.p.Name, Kernel: kernel, Core: c, CB: cb, Msg: fmt.Sprintf(format, args...)})
}

func (v *validator) ranges(what, kernel string, cb int, rs []ir.CoreRange, allowEth bool) {
	if len(rs) == 0 {
		v.add(RuleGrid, kernel, nil, cb, "%s has no core ranges", what)
	}
	eth := 0
	for _, r := range rs {
		switch {
		case IsEthRange(r) && !allowEth:
			v.add(RuleGrid, kernel, nil, cb, "%s core range %s is on ethernet cores, which have no circular buffers", what, r)
		case IsEthRange(r):
			eth++
			if r.X0 > r.X1 || !v.t.InEth(r.X0) || !v.t.InEth(r.X1) {
				n := 0
				if v.t.Eth != nil {
					n = v.t.Eth.Cores
				}
				v.add(RuleGrid, kernel, nil, cb, "%s ethernet range %s is empty or outside channels 0..%d", what, r, n-1)
			}
		case !v.t.RangeInGrid(r):
			v.add(RuleGrid, kernel, nil, cb, "%s core range %s is empty or outside the %dx%d worker grid", what, r, v.t.GridX, v.t.GridY)
		}
	}
	if eth > 0 && eth < len(rs) {
		v.add(RuleGrid, kernel, nil, cb, "%s mixes ethernet and worker core ranges; place it on one kind", what)
	}
}

var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func (v *validator) program() {
	p, t := v.p, v.t
	// Buffers.
	bufNames := map[string]bool{}
	for _, b := range p.Buffers {
		if b.Name == "" || bufNames[b.Name] {
			v.add(RuleMalformed, "", nil, NoCB, "buffer name %q is empty or duplicated", b.Name)
		}
		bufNames[b.Name] = true
		if b.PageSize <= 0 || b.Pages <= 0 {
			v.add(RuleMalformed, "", nil, NoCB, "buffer %q has page size %d and %d pages; both must be positive", b.Name, b.PageSize, b.Pages)
		}
		if b.Mem.Kind.IsSharded() != (b.Mem.Shard != nil) {
			v.add(RuleMalformed, "", nil, NoCB, "buffer %q: memory %s needs a shard spec exactly when sharded", b.Name, b.Mem)
		}
		if b.Mem.Shard != nil && !t.RangeInGrid(b.Mem.Shard.Grid) {
			v.add(RuleGrid, "", nil, NoCB, "buffer %q shard grid %s is outside the worker grid", b.Name, b.Mem.Shard.Grid)
		}
	}
	// CBs.
	for _, cb := range p.CBs {
		what := fmt.Sprintf("CB c_%d", cb.Index)
		if cb.Index < 0 || cb.Index >= t.MaxCBs {
			v.add(RuleCBCount, "", nil, cb.Index, "CB index %d is outside 0..%d", cb.Index, t.MaxCBs-1)
		}
		v.ranges(what, "", cb.Index, cb.Cores, false)
		if cb.PageSize <= 0 || cb.Pages <= 0 {
			v.add(RuleCBConfig, "", nil, cb.Index, "page size %d and page count %d must be positive", cb.PageSize, cb.Pages)
		}
		if _, err := target.DataFormatOf(cb.Format); err != nil {
			v.add(RuleCBConfig, "", nil, cb.Index, "data format: %v", err)
		}
		if cb.Backing != "" {
			b := p.Buffer(cb.Backing)
			switch {
			case b == nil:
				v.add(RuleCBConfig, "", nil, cb.Index, "backing buffer %q is not declared", cb.Backing)
			case b.Mem.Kind.IsDRAM():
				v.add(RuleCBConfig, "", nil, cb.Index, "backing buffer %q is in DRAM; a CB can only be backed by L1", cb.Backing)
			default:
				have := b.PagesPerCore(t.GridX, t.GridY) * b.PageSize
				if cb.Bytes() > have {
					v.add(RuleCBConfig, "", nil, cb.Index, "ring of %d bytes exceeds the %d bytes per core of backing buffer %q", cb.Bytes(), have, cb.Backing)
				}
			}
		}
	}
	// Semaphores.
	for _, s := range p.Semaphores {
		if s.ID < 0 || s.ID >= t.MaxSemaphores {
			v.add(RuleSemaphore, "", nil, NoCB, "semaphore id %d is outside 0..%d", s.ID, t.MaxSemaphores-1)
		}
		v.ranges(fmt.Sprintf("semaphore %d", s.ID), "", NoCB, s.Cores, true)
	}
	// Kernels.
	names := map[string]bool{}
	for _, k := range p.Kernels {
		if k.Name == "" || names[k.Name] || !identRE.MatchString(k.Name) {
			v.add(RuleMalformed, k.Name, nil, NoCB, "kernel name %q is empty, duplicated or not an identifier", k.Name)
		}
		names[k.Name] = true
		v.kernel(k)
	}
	v.cores()
	v.codeSize()
}

func (v *validator) kernel(k *Kernel) {
	t := v.t
	v.ranges("kernel", k.Name, NoCB, k.Cores, true)
	if k.OnEth() && k.Role == RoleCompute {
		v.add(RuleProcessor, k.Name, nil, NoCB, "compute kernels cannot run on ethernet cores")
	}
	switch {
	case k.Role == RoleCompute && k.Processor != ComputeProc:
		v.add(RuleProcessor, k.Name, nil, NoCB, "compute kernel must run on the compute processor, not %s", k.Processor)
	case k.Role != RoleCompute && k.Processor == ComputeProc:
		v.add(RuleProcessor, k.Name, nil, NoCB, "%s kernel must run on RISCV_0 or RISCV_1, not the compute processor", k.Role)
	case k.Processor > ComputeProc || k.Role > RoleCompute:
		v.add(RuleProcessor, k.Name, nil, NoCB, "unknown processor %s or role %s", k.Processor, k.Role)
	}
	if k.Processor != ComputeProc && (k.NoC < 0 || k.NoC >= t.NumNoCs) {
		v.add(RuleProcessor, k.Name, nil, NoCB, "NoC index %d is not 0 or 1", k.NoC)
	}
	v.ethQueueNoC(k)
	v.argTable(k)
	if _, _, ok := FirstReduce(k.Body); ok {
		for _, d := range []string{ReduceOpDefine, ReduceDimDefine} {
			if k.Defines[d] == "" {
				v.add(RuleDefines, k.Name, nil, NoCB, "the kernel calls the reduce API but does not define %s (tt-metal's reduce.h uses it as a default template argument; Kernel.DefineReduceDefaults sets it)", d)
			}
		}
	}
	v.unpackModes(k)
	v.mcastCorners(k)
	v.body(k)
	v.tileValues(k)
	env := newStaticEnv(k)
	v.statics(k, env)
	v.flow(k, env)
}

func (v *validator) argTable(k *Kernel) {
	t := v.t
	seen := map[string]bool{}
	idx := map[ArgKind]map[int]string{}
	count := map[ArgKind]int{}
	for _, a := range k.Args {
		if !identRE.MatchString(a.Name) || seen[a.Name] {
			v.add(RuleArgTable, k.Name, nil, NoCB, "argument name %q is not an identifier or is duplicated", a.Name)
		}
		seen[a.Name] = true
		if idx[a.Kind] == nil {
			idx[a.Kind] = map[int]string{}
		}
		if other, dup := idx[a.Kind][a.Index]; dup {
			v.add(RuleArgTable, k.Name, nil, NoCB, "%s args %q and %q share index %d", a.Kind, other, a.Name, a.Index)
		}
		idx[a.Kind][a.Index] = a.Name
		count[a.Kind]++
		switch a.Kind {
		case CompileTimeArg:
			if a.Value.Kind != ValConst {
				v.add(RuleArgTable, k.Name, nil, NoCB, "compile-time arg %q has value %s; compile-time values must be constants", a.Name, a.Value)
			}
		case CommonRuntimeArg:
			v.argValue(k, nil, a.Name, a.Value)
		}
	}
	for kind, m := range idx {
		for i := 0; i < count[kind]; i++ {
			if _, ok := m[i]; !ok {
				v.add(RuleArgTable, k.Name, nil, NoCB, "%s arg indices are not dense: index %d is missing", kind, i)
				break
			}
		}
	}
	nrt := count[RuntimeArg]
	rtNames := k.ArgsOfKind(RuntimeArg)
	for _, c := range CoresOf(k.Cores) {
		c := c
		vals := k.RuntimeValuesOn(c)
		if len(vals) != nrt {
			v.add(RuleArgTable, k.Name, &c, NoCB, "has %d runtime arg values; the table declares %d runtime args", len(vals), nrt)
		}
		for i, val := range vals {
			var name string
			if i < len(rtNames) {
				name = rtNames[i].Name
			} else {
				name = fmt.Sprintf("#%d", i)
			}
			v.argValue(k, &c, name, val)
		}
		if n := nrt + count[CommonRuntimeArg]; n > t.MaxRuntimeArgs {
			v.add(RuleRuntimeArgs, k.Name, &c, NoCB, "%d runtime args (%d unique + %d common) exceed the limit of %d per kernel per core", n, nrt, count[CommonRuntimeArg], t.MaxRuntimeArgs)
		}
	}
	for _, ca := range k.RuntimeValues {
		if !InRanges(k.Cores, ca.Core) {
			c := ca.Core
			v.add(RuleArgTable, k.Name, &c, NoCB, "runtime arg values given for a core the kernel does not run on")
		}
	}
}

func (v *validator) argValue(k *Kernel, c *Core, name string, val ArgValue) {
	switch val.Kind {
	case ValConst:
	case ValBufferAddr:
		if v.p.Buffer(val.Buffer) == nil {
			v.add(RuleArgTable, k.Name, c, NoCB, "arg %q names undeclared buffer %q", name, val.Buffer)
		}
	case ValNoCX, ValNoCY:
		if val.Core.IsEth() {
			if !v.t.InEth(val.Core.X) {
				v.add(RuleArgTable, k.Name, c, NoCB, "arg %q names ethernet core %s, which does not exist", name, val.Core)
			}
		} else if !v.t.InGrid(val.Core.X, val.Core.Y) {
			v.add(RuleArgTable, k.Name, c, NoCB, "arg %q names core %s outside the worker grid", name, val.Core)
		}
	case ValDeviceID:
	default:
		v.add(RuleArgTable, k.Name, c, NoCB, "arg %q has unknown value kind %d", name, val.Kind)
	}
}

// body checks scoping, operands and the compute / data-movement split.
func (v *validator) body(k *Kernel) {
	declared := map[string]Type{}
	var scope func(body []Stmt, live map[string]Type)
	checkExpr := func(e Expr, live map[string]Type, where string) {
		if e == nil {
			v.add(RuleMalformed, k.Name, nil, NoCB, "%s has a missing operand", where)
			return
		}
		InspectExpr(e, func(e Expr) bool {
			switch e := e.(type) {
			case nil:
				v.add(RuleMalformed, k.Name, nil, NoCB, "%s has a missing operand", where)
			case Var:
				if t, ok := live[e.Name]; !ok {
					v.add(RuleMalformed, k.Name, nil, NoCB, "%s uses variable %q outside its scope", where, e.Name)
				} else if t != e.Type {
					v.add(RuleMalformed, k.Name, nil, NoCB, "%s uses variable %q as %s, declared %s", where, e.Name, e.Type, t)
				}
			case ArgRef:
				if k.LookupArg(e.Name) == nil {
					v.add(RuleMalformed, k.Name, nil, NoCB, "%s reads argument %q, which is not in the argument table", where, e.Name)
				}
			case Bin:
				if e.X == nil || e.Y == nil {
					v.add(RuleMalformed, k.Name, nil, NoCB, "%s has a binary %s with a missing operand", where, e.Op)
					return false
				}
			case GetSemaphore, GetEthSemaphore, NoCAddr, DRAMBankAddr, MulticastAddr, MyNoCX, MyNoCY, L1Read32, NumDRAMBanks:
				if k.Role == RoleCompute {
					v.add(RuleMalformed, k.Name, nil, NoCB, "%s calls %s, which compute kernels cannot", where, exprName(e))
				}
			case ReadTileValue:
				if k.Role != RoleCompute {
					v.add(RuleMalformed, k.Name, nil, e.CB, "%s calls read_tile_value, a compute call, in a %s kernel (a data-movement kernel reads L1 directly)", where, k.Role)
				}
			}
			for _, s := range SubExprs(e) {
				if s == nil {
					v.add(RuleMalformed, k.Name, nil, NoCB, "%s has a missing operand in %s", where, exprName(e))
					return false
				}
			}
			return true
		})
	}
	declare := func(x Var, live map[string]Type) {
		if !identRE.MatchString(x.Name) {
			v.add(RuleMalformed, k.Name, nil, NoCB, "variable name %q is not an identifier", x.Name)
		}
		if _, dup := declared[x.Name]; dup || k.LookupArg(x.Name) != nil {
			v.add(RuleMalformed, k.Name, nil, NoCB, "variable %q is declared twice or shadows an argument", x.Name)
		}
		declared[x.Name] = x.Type
		live[x.Name] = x.Type
	}
	scope = func(body []Stmt, outer map[string]Type) {
		live := make(map[string]Type, len(outer))
		for n, t := range outer {
			live[n] = t
		}
		for _, s := range body {
			name := stmtName(s)
			switch {
			case s == nil:
				v.add(RuleMalformed, k.Name, nil, NoCB, "nil statement")
				continue
			case k.Role == RoleCompute && IsDataMovementOnly(s):
				v.add(RuleMalformed, k.Name, nil, NoCB, "%s is a data-movement call in a compute kernel", name)
			case k.Role != RoleCompute && IsComputeOnly(s):
				v.add(RuleMalformed, k.Name, nil, NoCB, "%s is a compute call in a %s kernel", name, k.Role)
			case IsEthOnly(s) && !k.OnEth():
				v.add(RuleEthernet, k.Name, nil, NoCB, "%s is an ethernet call; the kernel runs on worker cores, not ethernet cores", name)
			case k.OnEth() && isPlainSemaphoreWait(s):
				v.add(RuleEthWait, k.Name, nil, NoCB, "%s on an ethernet core spins without run_routing, starving the base firmware that shares ERISC0; use eth_%s", name, name)
			}
			if sf, ok := s.(SFPU); ok && int(sf.Op) >= len(SFPUOps) {
				v.add(RuleMalformed, k.Name, nil, NoCB, "unknown SFPU op %d", sf.Op)
			}
			switch s.(type) {
			case BcastInit, BcastTiles:
				if APIName(s) == "" {
					v.add(RuleMalformed, k.Name, nil, NoCB, "%T: the pinned tt-metal release has no call for this broadcast (op and dimension)", s)
				}
			}
			switch s := s.(type) {
			case Let:
				checkExpr(s.Value, live, name)
				declare(s.Var, live)
			case Assign:
				checkExpr(s.Value, live, name)
				if t, ok := live[s.Var.Name]; !ok || t != s.Var.Type {
					v.add(RuleMalformed, k.Name, nil, NoCB, "assignment to %q, which is not a live variable of type %s", s.Var.Name, s.Var.Type)
				}
			case For:
				checkExpr(s.Start, live, name)
				inner := make(map[string]Type, len(live)+1)
				for n, t := range live {
					inner[n] = t
				}
				declare(s.Var, inner)
				if s.Var.Type != U32T {
					v.add(RuleMalformed, k.Name, nil, NoCB, "loop variable %q must be uint32_t", s.Var.Name)
				}
				checkExpr(s.End, inner, name)
				if s.Step != nil {
					checkExpr(s.Step, inner, name)
				}
				scope(s.Body, inner)
			case If:
				checkExpr(s.Cond, live, name)
				scope(s.Then, live)
				scope(s.Else, live)
			case SFPU:
				checkExpr(s.Dst, live, name)
				if s.Src != nil || s.Op.IsBinary() {
					checkExpr(s.Src, live, name)
				}
			default:
				for _, o := range instrOperands(s) {
					if o.e != nil || !o.optional {
						checkExpr(o.e, live, name)
					}
				}
			}
			for _, cb := range append(CBsOf(s), stmtExprCBs(s)...) {
				if cb < 0 || cb >= v.t.MaxCBs {
					v.add(RuleCBCount, k.Name, nil, cb, "%s names CB index %d outside 0..%d", name, cb, v.t.MaxCBs-1)
				}
			}
		}
	}
	scope(k.Body, map[string]Type{})
}

func stmtExprCBs(s Stmt) []int {
	var out []int
	for _, e := range StmtExprs(s) {
		out = append(out, ExprCBs(e)...)
	}
	return out
}

func stmtName(s Stmt) string {
	if n := APIName(s); n != "" {
		return n
	}
	switch s.(type) {
	case Let:
		return "declaration"
	case Assign:
		return "assignment"
	case For:
		return "for loop"
	case If:
		return "if"
	case L1Write32:
		return "L1 store"
	}
	return fmt.Sprintf("%T", s)
}

func exprName(e Expr) string {
	if n := ExprAPIName(e); n != "" {
		return n
	}
	if _, ok := e.(L1Read32); ok {
		return "L1 load"
	}
	return fmt.Sprintf("%T", e)
}

// statics checks operands, DEST indices, NoC sizes and DRAM alignment.
func (v *validator) statics(k *Kernel, env *staticEnv) {
	destCap := v.t.DestTiles(k.Compute.DstFullSyncEn, k.Compute.FP32DestAccEn)
	mode := "half-sync"
	if k.Compute.DstFullSyncEn {
		mode = "full-sync"
	}
	width := "16-bit"
	if k.Compute.FP32DestAccEn {
		width = "fp32"
	}
	checkDst := func(name string, dst Expr, span uint64) {
		if d, ok := env.exact(dst); ok && d+span > uint64(destCap) {
			if span == 1 {
				v.add(RuleDEST, k.Name, nil, NoCB, "%s addresses DEST tile %d; DEST holds %d tiles in %s mode with %s DEST", name, d, destCap, mode, width)
			} else {
				v.add(RuleDEST, k.Name, nil, NoCB, "%s addresses DEST tiles %d..%d; DEST holds %d tiles in %s mode with %s DEST", name, d, d+span-1, destCap, mode, width)
			}
		}
	}
	twoIn := func(name string, a, b int) {
		if a == b {
			v.add(RuleCBOperands, k.Name, nil, a, "%s reads both operands from CB c_%d; a two-input op needs two different CBs", name, a)
		}
	}
	size := func(name string, e Expr) {
		if n, ok := env.exact(e); ok && n > uint64(v.t.MaxNoCPacket) {
			v.add(RuleNoCPacket, k.Name, nil, NoCB, "%s transfers %d bytes; a NoC packet is at most %d bytes", name, n, v.t.MaxNoCPacket)
		}
	}
	Inspect(k.Body, func(s Stmt) bool {
		name := stmtName(s)
		switch s := s.(type) {
		case CopyTile:
			checkDst(name, s.Dst, 1)
		case BinaryTiles:
			twoIn(name, s.ICB0, s.ICB1)
			checkDst(name, s.Dst, 1)
		case BinaryInit:
			twoIn(name, s.ICB0, s.ICB1)
		case BcastTiles:
			twoIn(name, s.ICB0, s.ICB1)
			checkDst(name, s.Dst, 1)
		case BcastInit:
			twoIn(name, s.ICB0, s.ICB1)
		case MatmulTiles:
			twoIn(name, s.In0, s.In1)
			checkDst(name, s.Dst, 1)
		case MatmulInit:
			twoIn(name, s.In0, s.In1)
		case MatmulBlockInit:
			twoIn(name, s.In0, s.In1)
		case MatmulBlock:
			twoIn(name, s.In0, s.In1)
			ct, ok1 := env.exact(s.CtDim)
			rt, ok2 := env.exact(s.RtDim)
			if ok1 && ok2 {
				checkDst(name, s.Dst, max(ct*rt, 1))
			} else {
				checkDst(name, s.Dst, 1)
			}
		case ReduceTile:
			twoIn(name, s.ICB, s.ScalerCB)
			checkDst(name, s.Dst, 1)
		case ReduceInit:
			twoIn(name, s.ICB, s.ScalerCB)
		case ReconfigDataFormat:
			// reconfig to the same CB for both sources is legal.
		case TransposeTile:
			checkDst(name, s.Dst, 1)
		case TransposeDest:
			checkDst(name, s.Dst, 1)
		case SFPU:
			checkDst(name, s.Dst, 1)
			if s.Src != nil {
				checkDst(name, s.Src, 1)
			}
		case PackTile:
			checkDst(name, s.Dst, 1)
		case NoCAsyncRead:
			size(name, s.Size)
			if env.isDRAM(s.Src) {
				if r := env.res(s.Src); r.m >= uint64(v.t.DRAMReadAlign) && r.r != 0 || r.m < uint64(v.t.DRAMReadAlign) && r.r%r.m != 0 {
					v.add(RuleDRAMAlign, k.Name, nil, NoCB, "%s reads DRAM at an offset ≡ %d (mod %d); DRAM reads must be %d-byte aligned", name, r.r, r.m, v.t.DRAMReadAlign)
				}
			}
		case NoCAsyncWrite:
			size(name, s.Size)
			if env.isDRAM(s.Dst) {
				if r := env.res(s.Dst); r.r%min(r.m, uint64(v.t.DRAMWriteAlign)) != 0 {
					v.add(RuleDRAMAlign, k.Name, nil, NoCB, "%s writes DRAM at an offset ≡ %d (mod %d); DRAM writes must be %d-byte aligned", name, r.r, r.m, v.t.DRAMWriteAlign)
				}
			}
		case NoCAsyncWriteMulticast:
			size(name, s.Size)
		case NoCAsyncWriteMulticastLoopbackSrc:
			size(name, s.Size)
		case EthSendBytes:
			v.ethSize(k, env, name, s.Size)
			v.ethSend(k, env, name, s)
		case EthSendBytesOverChannelPayloadOnly:
			v.ethSize(k, env, name, s.Size)
			v.ethSend(k, env, name, EthSendBytes(s))
		case EthWaitForBytes:
			v.ethSize(k, env, name, s.Size)
		case EthWaitForBytesOnChannel:
			v.ethSize(k, env, name, s.Size)
		}
		return true
	})
}

// ethSize checks a statically known ethernet transfer size: whole 16-byte
// words that fit the kernel-usable ethernet L1.
func (v *validator) ethSize(k *Kernel, env *staticEnv, name string, e Expr) {
	n, ok := env.exact(e)
	if !ok {
		return
	}
	if n%16 != 0 {
		v.add(RuleEthernet, k.Name, nil, NoCB, "%s of %d bytes: ethernet transfers are whole 16-byte words", name, n)
	}
	if n > uint64(v.t.EthL1Budget()) {
		v.add(RuleEthernet, k.Name, nil, NoCB, "%s of %d bytes exceeds the %d-byte kernel region of an ethernet core's L1", name, n, v.t.EthL1Budget())
	}
}

// isPlainSemaphoreWait reports whether s is noc_semaphore_wait or
// noc_semaphore_wait_min.
func isPlainSemaphoreWait(s Stmt) bool {
	switch s.(type) {
	case NoCSemaphoreWait, NoCSemaphoreWaitMin:
		return true
	}
	return false
}

// ethSend checks the transmit commands of an eth_send_bytes (RuleEthSend):
// PerSendWords is PerSend / 16, and the send issues the fewest commands,
// which the validator can prove in two forms: PerSend is the transfer size
// itself (one command; the size fits an ethernet L1, ethSize), or PerSend
// and Size are constants with Size / PerSend = EthMinCommands. A
// per-command size it cannot prove either way is refused too.
func (v *validator) ethSend(k *Kernel, env *staticEnv, name string, s EthSendBytes) {
	bad := func(format string, args ...any) {
		v.add(RuleEthSend, k.Name, nil, NoCB, "%s: "+format, append([]any{name}, args...)...)
	}
	maxCmd := uint64(1 << 20)
	if v.t.Eth != nil {
		maxCmd = uint64(v.t.Eth.MaxCommandBytes)
	}
	per, perOK := env.exact(s.PerSend)
	words, wordsOK := env.exact(s.PerSendWords)
	switch {
	case perOK && wordsOK && words != per>>4:
		bad("num_bytes_per_send_word_size %d is not num_bytes_per_send %d / 16", words, per)
	case !(perOK && wordsOK) && !reflect.DeepEqual(s.PerSendWords, Shr(s.PerSend, C(4))):
		bad("num_bytes_per_send_word_size must be num_bytes_per_send >> 4")
	}
	if sameExpr(s.PerSend, s.Size) {
		return // one command of the whole transfer
	}
	if !perOK {
		bad("the bytes per transmit command are neither the transfer size nor a constant, so the number of commands is unknown; send the whole transfer (Builder.EthSendBytes)")
		return
	}
	if per%16 != 0 || per < 16 || per > maxCmd {
		bad("%d bytes per transmit command: a command is 16..%d bytes in whole 16-byte words", per, maxCmd)
		return
	}
	size, ok := env.exact(s.Size)
	if !ok {
		bad("%d bytes per command for a transfer of unknown size: the number of commands is unknown; send the whole transfer (Builder.EthSendBytes)", per)
		return
	}
	if size%per != 0 {
		bad("%d bytes as commands of %d: the last command sends %d bytes past the transfer", size, per, per-size%per)
		return
	}
	if got, want := EthCommands(size, per), EthMinCommands(size, maxCmd); got != want {
		bad("%d bytes as %d transmit commands of %d bytes; %d command(s) of %d bytes would do (each command polls the TX queue and context-switches)", size, got, per, want, size/max(want, 1))
	}
}

// sameExpr reports whether a and b are the same expression tree.
func sameExpr(a, b Expr) bool { return reflect.DeepEqual(a, b) }

// cores checks per-core rules: CB uniqueness, processors, producers and
// consumers, semaphores and the L1 budget.
func (v *validator) cores() {
	p, t := v.p, v.t
	var rs []ir.CoreRange
	for _, cb := range p.CBs {
		rs = append(rs, cb.Cores...)
	}
	for _, k := range p.Kernels {
		rs = append(rs, k.Cores...)
	}
	for _, s := range p.Semaphores {
		rs = append(rs, s.Cores...)
	}
	envs := map[*Kernel]map[int]*cbUse{}
	for _, k := range p.Kernels {
		envs[k] = kernelCBUses(k, newStaticEnv(k))
	}
	for _, c := range CoresOf(rs) {
		c := c
		if c.IsEth() && t.InEth(c.X) {
			v.ethCore(c)
			continue
		}
		if !t.InGrid(c.X, c.Y) {
			continue // reported by the range checks
		}
		// CBs on this core.
		var cbs []*CB
		byIdx := map[int]bool{}
		for i := range p.CBs {
			cb := &p.CBs[i]
			if !InRanges(cb.Cores, c) {
				continue
			}
			if byIdx[cb.Index] {
				v.add(RuleCBCount, "", &c, cb.Index, "CB index %d is configured more than once on this core", cb.Index)
				continue
			}
			byIdx[cb.Index] = true
			cbs = append(cbs, cb)
		}
		if len(cbs) > t.MaxCBs {
			v.add(RuleCBCount, "", &c, NoCB, "%d CBs on this core; at most %d", len(cbs), t.MaxCBs)
		}
		// Processors.
		kernels := p.KernelsOn(c)
		byProc := map[Processor]string{}
		for _, k := range kernels {
			if other, dup := byProc[k.Processor]; dup {
				v.add(RuleProcessor, k.Name, &c, NoCB, "kernels %q and %q both run on %s of this core", other, k.Name, k.Processor)
			}
			byProc[k.Processor] = k.Name
		}
		// Producers and consumers.
		for _, cb := range cbs {
			var prod, cons []string
			for _, k := range kernels {
				u := envs[k][cb.Index]
				if u == nil {
					continue
				}
				if u.produce {
					prod = append(prod, k.Name)
				}
				if u.consume {
					cons = append(cons, k.Name)
				}
			}
			switch len(prod) {
			case 1:
			case 0:
				v.add(RuleCBProducer, "", &c, cb.Index, "CB c_%d has no producer kernel (none reserves/pushes or packs into it); each CB needs exactly one", cb.Index)
			default:
				v.add(RuleCBProducer, "", &c, cb.Index, "CB c_%d has %d producer kernels (%s); each CB needs exactly one", cb.Index, len(prod), strings.Join(prod, ", "))
			}
			switch len(cons) {
			case 1:
			case 0:
				v.add(RuleCBConsumer, "", &c, cb.Index, "CB c_%d has no consumer kernel (none waits/pops or unpacks it); each CB needs exactly one", cb.Index)
			default:
				v.add(RuleCBConsumer, "", &c, cb.Index, "CB c_%d has %d consumer kernels (%s); each CB needs exactly one", cb.Index, len(cons), strings.Join(cons, ", "))
			}
		}
		// Semaphores.
		sems := map[int]bool{}
		for _, s := range p.Semaphores {
			if InRanges(s.Cores, c) {
				if sems[s.ID] {
					v.add(RuleSemaphore, "", &c, NoCB, "semaphore id %d is created twice on this core", s.ID)
				}
				sems[s.ID] = true
			}
		}
		// L1 budget.
		used := 0
		var parts []string
		for _, cb := range cbs {
			if cb.Backing != "" || cb.Bytes() <= 0 {
				continue
			}
			n := target.AlignUp(cb.Bytes(), t.L1Align)
			used += n
			parts = append(parts, fmt.Sprintf("c_%d %d", cb.Index, n))
		}
		for i := range p.Buffers {
			b := &p.Buffers[i]
			if b.Mem.Kind.IsDRAM() || b.PageSize <= 0 {
				continue
			}
			if !containsCore(b.ShardCores(t.GridX, t.GridY), c) {
				continue
			}
			n := b.PagesPerCore(t.GridX, t.GridY) * target.AlignUp(b.PageSize, t.L1Align)
			used += n
			parts = append(parts, fmt.Sprintf("buffer %s %d", b.Name, n))
		}
		if used > t.L1Budget() {
			v.add(RuleL1Budget, "", &c, NoCB, "CBs and L1 buffers need %d bytes (%s); the L1 budget is %d bytes", used, strings.Join(parts, ", "), t.L1Budget())
		}
	}
}

func containsCore(cs []Core, c Core) bool {
	for _, x := range cs {
		if x == c {
			return true
		}
	}
	return false
}

// ethCore checks one ethernet core: at most one kernel per ERISC and
// semaphore ids created once (CBs are rejected by the range checks).
func (v *validator) ethCore(c Core) {
	byProc := map[Processor]string{}
	byTXQ := map[int]string{}
	for _, k := range v.p.KernelsOn(c) {
		if other, dup := byProc[k.Processor]; dup {
			v.add(RuleProcessor, k.Name, &c, NoCB, "kernels %q and %q both run on %s of this ethernet core", other, k.Name, k.Processor)
		}
		byProc[k.Processor] = k.Name
		if !KernelSends(k) {
			continue
		}
		if other, dup := byTXQ[k.TXQ]; dup {
			v.add(RuleEthTXQ, k.Name, &c, NoCB, "kernels %q and %q both send on TX queue %d of this ethernet core: their transmit commands' register writes would race (ERISC c's kernel sends on TXQ c, kir.EthTXQ)", other, k.Name, k.TXQ)
		}
		byTXQ[k.TXQ] = k.Name
	}
	sems := map[int]bool{}
	for _, s := range v.p.Semaphores {
		if InRanges(s.Cores, c) {
			if sems[s.ID] {
				v.add(RuleSemaphore, "", &c, NoCB, "semaphore id %d is created twice on this core", s.ID)
			}
			sems[s.ID] = true
		}
	}
}

// unpackModes checks k.Compute.UnpackToDestFP32 (RuleUnpackMode).
func (v *validator) unpackModes(k *Kernel) {
	modes := k.Compute.UnpackToDestFP32
	if len(modes) == 0 {
		return
	}
	if k.Role != RoleCompute || !k.Compute.FP32DestAccEn {
		v.add(RuleUnpackMode, k.Name, nil, NoCB, "unpack-to-dest mode needs a compute kernel with fp32_dest_acc_en")
		return
	}
	fpu := map[int]bool{}
	Inspect(k.Body, func(s Stmt) bool {
		for _, cb := range fpuReadsOf(s) {
			fpu[cb] = true
		}
		return true
	})
	// The CB configuration is per range; the first core names the problem.
	if cores := CoresOf(k.Cores); len(cores) > 0 {
		c := cores[0]
		for _, cb := range modes {
			cfg := v.p.CBOn(c, cb)
			switch {
			case cfg == nil:
				v.add(RuleUnpackMode, k.Name, &c, cb, "CB c_%d is set to unpack to DEST but is not configured on this core", cb)
			case cfg.Format != ir.FP32:
				v.add(RuleUnpackMode, k.Name, &c, cb, "CB c_%d is %s; only Float32 CBs unpack to DEST at fp32", cb, cfg.Format)
			case fpu[cb]:
				v.add(RuleUnpackMode, k.Name, &c, cb, "CB c_%d unpacks straight to DEST but an FPU op reads it; give the exact copy its own CB", cb)
			}
		}
	}
}

// ethQueueNoC checks k's TX queue (RuleEthTXQ: 0 on workers, 0..EthTXQs-1
// on ethernet cores) and an ethernet kernel's NoC (RuleEthNoC: EthNoC of
// its ERISC).
func (v *validator) ethQueueNoC(k *Kernel) {
	switch {
	case !k.OnEth() && k.TXQ != 0:
		v.add(RuleEthTXQ, k.Name, nil, NoCB, "TX queue %d on a kernel on worker cores; only ethernet kernels send on TX queues", k.TXQ)
	case k.TXQ < 0 || k.TXQ >= EthTXQs:
		v.add(RuleEthTXQ, k.Name, nil, NoCB, "TX queue %d is not 0..%d (the release's fabric sends on TXQ 0 and 1 only)", k.TXQ, EthTXQs-1)
	}
	if k.OnEth() && (k.Processor == RISCV0 || k.Processor == RISCV1) && k.NoC != EthNoC(k.Processor) {
		v.add(RuleEthNoC, k.Name, nil, NoCB, "a kernel on %s of an ethernet core uses NoC %d; in 2-ERISC mode tt-metal requires NoC %d there (ERISC0 shares NoC 0 with the base firmware; tt_metal.cpp)", k.Processor, k.NoC, EthNoC(k.Processor))
	}
}
