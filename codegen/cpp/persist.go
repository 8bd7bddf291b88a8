package cpp

import (
	"bytes"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/tcc-dev/tcc/codegen/kir"
)

// Persistent programs (kir.Persist, codegen/persist): a merged kernel runs,
// per core and RISC, every phase the core takes part in between a
// PhaseBegin and a PhaseEnd. It prints as one translation unit:
//
//   - the phase machinery, included from tcc_persist.h (PersistHeader,
//     written beside the kernels): tcc_phase_begin / tcc_phase_end,
//     core-local barriers of the core's RISCs over one L1 word per RISC in
//     the tables buffer (kir.TablesBuffer), the begin installing the phase's
//     CBs from its record in that buffer with the firmware's own
//     setup_local_cb_read_write_interfaces and moving rta_l1_base /
//     crta_l1_base (what get_arg_val / get_common_arg_val read) to the
//     phase's slices of the kernel's argument vectors, which lie in the
//     tables buffer too (kir.Tables.Args; tcc_persist_init finds them
//     through the buffer's header, the kernel config ring holding only
//     the addresses of the control block and the tables); an early
//     begin's tcc_phase_end_arrive / tcc_phase_begin_early
//     (persist_early.go);
//   - one function per distinct phase body (tcc_phase_body_N): the phase's
//     statements with its arguments and variables under their source
//     kernel's names, its arguments read at the phase's own indices. Phases
//     whose bodies print the same (the layers of a model: they differ in
//     argument values only, which live in the tables) call one function;
//     a lazy dependency wait inside a body (codegen/persist's lazy.go) is a
//     call of tcc_wait_deps on the phase's done-word list, a parameter;
//   - kernel_main: the merged kernel's own arguments (persist_*), then its
//     statements with every phase segment replaced by
//     tcc_phase_begin(p, record offset, rta index, crta index), the body
//     call and tcc_phase_end(p).
//
// Compute state is reinitialised per phase by the phase body itself: every
// compute body starts with its hardware startup and op init calls
// (compute_kernel_hw_startup, *_init), which reconfigure unpack, math and
// pack for the phase's formats. What is compiled into a compute binary
// once (MATH_FIDELITY, DST_ACCUM_MODE, APPROX: the ComputeConfig) must
// agree over the phases of a merged compute kernel: codegen/persist's
// MergeComputeConfigs takes the highest math fidelity and refuses a merged
// kernel whose phases differ in fp32_dest_acc_en (which its Build has
// unified: destmode.go), math_approx_mode or dst_full_sync_en,
// and the CB indices are renamed (kir.Persist.CBMap) so that each index of
// the binary has one data format and unpack-to-DEST mode.

// persistKernel is what the printer derived from a merged kernel.
type persistKernel struct {
	segs  []*phaseSeg
	segOf map[int]*phaseSeg
	fns   []*phaseFn
	// table holds the tables-buffer offset of each phase's CB record on
	// the kernel's cores (worker kernels only).
	table map[int]int
	// cbMap is the program's merged CB indices (kir.Persist.CBMap).
	cbMap []map[int]int
	// lists are the distinct core lists of the compacted semaphore
	// increments (incRun), by their text.
	lists constLists
	// deps are the distinct done-word lists (depList).
	deps constLists
	// groups are kernel_main's step groups (persist_steps.go).
	groups []*stepGroup
}

// constLists are the distinct constant lists a merged kernel declares, in
// order of first use, by their printed text.
type constLists struct {
	texts []string
	index map[string]int
}

// id is the index of the list printed as text, added if new.
func (c *constLists) id(text string) int {
	n, ok := c.index[text]
	if !ok {
		if c.index == nil {
			c.index = map[string]int{}
		}
		n = len(c.texts)
		c.index[text] = n
		c.texts = append(c.texts, text)
	}
	return n
}

// incRun is a run of noc_semaphore_inc statements of kernel_main that
// codegen/persist emits to signal other cores (the count word of a
// phase's leader, the done words of its dependents, the step barrier's
// words): each increments the same L1 address, by the same amount, on a
// core whose NoC coordinates are the kernel's common arguments
// persist_nx_* and persist_ny_* (the latter at the next index). It prints
// as one call of tcc_inc_cores over a constant list of those argument
// indices, instead of one inlined noc_semaphore_inc per core.
type incRun struct {
	end        int   // the index after the run
	idx        []int // the persist_nx_* arguments' common indices
	addr, incr kir.Expr
}

// incRun returns the run of signals starting at body[i], if any.
func (pr *printer) incRun(body []kir.Stmt, i int) (incRun, bool) {
	var r incRun
	var addrKey, incrKey string
	for j := i; j < len(body); j++ {
		s, ok := body[j].(kir.NoCSemaphoreInc)
		if !ok {
			break
		}
		na, ok := s.Addr.(kir.NoCAddr)
		if !ok {
			break
		}
		x, ok1 := na.X.(kir.ArgRef)
		y, ok2 := na.Y.(kir.ArgRef)
		if !ok1 || !ok2 || !strings.HasPrefix(x.Name, "persist_nx_") || !strings.HasPrefix(y.Name, "persist_ny_") {
			break
		}
		ax, ay := pr.k.LookupArg(x.Name), pr.k.LookupArg(y.Name)
		if ax == nil || ay == nil || ax.Kind != kir.CommonRuntimeArg || ay.Kind != kir.CommonRuntimeArg || ay.Index != ax.Index+1 {
			break
		}
		ak, ik := fmt.Sprintf("%#v", na.Addr), fmt.Sprintf("%#v", s.Incr)
		if j == i {
			addrKey, incrKey, r.addr, r.incr = ak, ik, na.Addr, s.Incr
		} else if ak != addrKey || ik != incrKey {
			break
		}
		r.idx = append(r.idx, ax.Index)
		r.end = j + 1
	}
	return r, len(r.idx) > 0
}

// incCall prints a run of signals as a tcc_inc_cores call.
func (pr *printer) incCall(r incRun) {
	ws := make([]string, len(r.idx))
	for i, x := range r.idx {
		ws[i] = strconv.Itoa(x)
	}
	n := pr.pers.lists.id(strings.Join(ws, ", "))
	pr.line("tcc_inc_cores(tcc_cores_%d, %d, %s, %s);", n, len(r.idx), pr.expr(r.addr), pr.expr(r.incr))
}

// phaseSeg is one phase of the kernel: the statements between its
// PhaseBegin and PhaseEnd.
type phaseSeg struct {
	p       int
	comment string
	body    []kir.Stmt // without the comment and the dependency waits
	at      int        // where the waits were (-1: none)
	deps    []uint32   // the done words waited for
	rta     [2]int     // first index and count of the phase's runtime args
	crta    [2]int     // same for its common runtime args
	fn      int        // index into fns, -1 for an empty body
}

// phaseFn is one printed phase body.
type phaseFn struct {
	text    string // the function's body lines
	wait    bool   // it takes the dependency list
	phases  []int
	headers map[string]bool
}

// waitRun is a run of dependency waits of kernel_main (before a phase's
// tcc_phase_begin): each waits for a done word of the control block to be
// set. It prints as one tcc_wait_deps call over a constant list.
func (pr *printer) waitRun(body []kir.Stmt, i int) (end int, words []uint32) {
	for j := i; j < len(body); j++ {
		w, ok := pr.mainWait(body[j])
		if !ok {
			break
		}
		words = append(words, w)
		end = j + 1
	}
	return end, words
}

// mainWait reports whether s is one of those waits and its done word:
// noc_semaphore_wait_min(persist_ctl + word, 1) on a worker core,
// eth_noc_semaphore_wait_min(EthCtl + word, 1) on an ethernet core.
func (pr *printer) mainWait(s kir.Stmt) (uint32, bool) {
	if w, ok := isPersistWait(s); ok {
		return w, true
	}
	e, ok := s.(kir.EthNoCSemaphoreWaitMin)
	if !ok || !pr.k.OnEth() {
		return 0, false
	}
	if v, ok := e.Value.(kir.Const); !ok || v.V != 1 {
		return 0, false
	}
	base := pr.p.Persist.EthCtl
	switch a := e.Addr.(type) {
	case kir.Const:
		if a.V >= base {
			return a.V - base, true
		}
	case kir.Bin:
		x, ok1 := a.X.(kir.Const)
		y, ok2 := a.Y.(kir.Const)
		if a.Op == kir.OpAdd && ok1 && ok2 && x.V == base {
			return y.V, true
		}
	}
	return 0, false
}

// depList names the constant list of done words ws (tcc_deps_N), printed
// once per distinct list.
func (pr *printer) depList(ws []uint32) string {
	parts := make([]string, len(ws))
	for i, w := range ws {
		parts[i] = strconv.FormatUint(uint64(w), 10)
	}
	return "tcc_deps_" + strconv.Itoa(pr.pers.deps.id(strings.Join(parts, ", ")))
}

// isPersistWait reports whether s is a dependency wait codegen/persist put
// into a phase segment: noc_semaphore_wait_min(persist_ctl + done word, 1).
func isPersistWait(s kir.Stmt) (uint32, bool) {
	w, ok := s.(kir.NoCSemaphoreWaitMin)
	if !ok {
		return 0, false
	}
	b, ok := w.Addr.(kir.Bin)
	if !ok || b.Op != kir.OpAdd {
		return 0, false
	}
	a, ok1 := b.X.(kir.ArgRef)
	c, ok2 := b.Y.(kir.Const)
	if !ok1 || !ok2 || a.Name != "persist_ctl" {
		return 0, false
	}
	if v, ok := w.Value.(kir.Const); !ok || v.V != 1 {
		return 0, false
	}
	return c.V, true
}

// phaseRange is the first index and count of k's arguments of kind with
// the phase prefix, and whether they are contiguous.
func phaseRange(k *kir.Kernel, kind kir.ArgKind, prefix string) ([2]int, bool) {
	var idx []int
	for _, a := range k.Args {
		if a.Kind == kind && strings.HasPrefix(a.Name, prefix) {
			idx = append(idx, a.Index)
		}
	}
	if len(idx) == 0 {
		return [2]int{0, 0}, true
	}
	sort.Ints(idx)
	for i := range idx {
		if idx[i] != idx[0]+i {
			return [2]int{}, false
		}
	}
	return [2]int{idx[0], len(idx)}, true
}

// phasePrefix and phaseVarPrefix are codegen/persist's renaming of phase
// p's arguments ("p17_") and variables ("v17_").
func phasePrefix(p int) string    { return "p" + strconv.Itoa(p) + "_" }
func phaseVarPrefix(p int) string { return "v" + strconv.Itoa(p) + "_" }

// analysePersist splits k's body into its phase segments and prints each
// segment's body function text, sharing identical ones.
func (pr *printer) analysePersist() *persistKernel {
	pk := &persistKernel{segOf: map[int]*phaseSeg{}}
	tables, err := pr.p.Persist.Tables()
	if err != nil {
		pr.fail("%v", err)
		return nil
	}
	pk.cbMap = tables.CBMap
	pr.pers = pk // bodyText reads the CB map
	var walk func(body []kir.Stmt)
	walk = func(body []kir.Stmt) {
		for i := 0; i < len(body) && pr.err == nil; i++ {
			switch s := body[i].(type) {
			case kir.For:
				walk(s.Body)
			case kir.PhaseBegin:
				j := i + 1
				for j < len(body) {
					if e, ok := body[j].(kir.PhaseEnd); ok && e.Phase == s.Phase {
						break
					}
					j++
				}
				if j == len(body) {
					pr.fail("tcc_phase_begin(%d) has no tcc_phase_end in the same block", s.Phase)
					return
				}
				if pk.segOf[s.Phase] != nil {
					pr.fail("phase %d begins twice", s.Phase)
					return
				}
				seg := pr.segment(s.Phase, body[i+1:j])
				pk.segs = append(pk.segs, seg)
				pk.segOf[s.Phase] = seg
				i = j
			}
		}
	}
	walk(pr.k.Body)
	if pr.err != nil {
		return nil
	}
	pr.shareBodies(pk)
	if !pr.k.OnEth() {
		cores := kir.CoresOf(pr.k.Cores)
		pk.table = tables.Offsets(pr.p.Persist, cores[0])
		for _, c := range cores[1:] {
			offs := tables.Offsets(pr.p.Persist, c)
			for _, seg := range pk.segs {
				if offs[seg.p] != pk.table[seg.p] {
					pr.fail("phase %d's CB record is at %d on core %s but at %d on core %s: the cores of a merged kernel must run the same phases", seg.p, pk.table[seg.p], cores[0], offs[seg.p], c)
					return nil
				}
			}
		}
	}
	return pk
}

// segment takes one phase's statements apart.
func (pr *printer) segment(p int, stmts []kir.Stmt) *phaseSeg {
	seg := &phaseSeg{p: p, at: -1, fn: -1}
	if len(stmts) > 0 {
		if c, ok := stmts[0].(kir.Comment); ok && strings.HasPrefix(c.Text, fmt.Sprintf("phase %d: ", p)) {
			seg.comment = c.Text
			stmts = stmts[1:]
		}
	}
	for _, s := range stmts {
		if w, ok := isPersistWait(s); ok {
			if seg.at < 0 {
				seg.at = len(seg.body)
			}
			seg.deps = append(seg.deps, w)
			continue
		}
		seg.body = append(seg.body, s)
	}
	prefix := phasePrefix(p)
	var ok1, ok2 bool
	seg.rta, ok1 = phaseRange(pr.k, kir.RuntimeArg, prefix)
	seg.crta, ok2 = phaseRange(pr.k, kir.CommonRuntimeArg, prefix)
	if !ok1 || !ok2 {
		pr.fail("phase %d's arguments are not contiguous in the kernel's argument table (a phase's arguments are a table of their own)", p)
	}
	return seg
}

// shareBodies prints every segment's body function and assigns segments
// to functions: one per distinct text and wait position; a segment
// without waits shares any function of its text (called with no
// dependencies).
func (pr *printer) shareBodies(pk *persistKernel) {
	type printed struct{ text, noWait string }
	texts := map[*phaseSeg]printed{}
	for _, seg := range pk.segs {
		if len(seg.body) == 0 || pr.err != nil {
			continue
		}
		t, h := pr.bodyText(seg, seg.at)
		nw := t
		if seg.at >= 0 {
			nw, _ = pr.bodyText(seg, -1)
		}
		texts[seg] = printed{t, nw}
		_ = h
	}
	if pr.err != nil {
		return
	}
	byText := map[string]int{}
	byNoWait := map[string]int{}
	add := func(seg *phaseSeg, key string, wait bool) {
		i, ok := byText[key]
		if !ok {
			_, h := pr.bodyText(seg, seg.at)
			i = len(pk.fns)
			byText[key] = i
			pk.fns = append(pk.fns, &phaseFn{text: key, wait: wait, headers: h})
			if _, ok := byNoWait[texts[seg].noWait]; !ok {
				byNoWait[texts[seg].noWait] = i
			}
		}
		seg.fn = i
		pk.fns[i].phases = append(pk.fns[i].phases, seg.p)
	}
	for _, seg := range pk.segs {
		if t, ok := texts[seg]; ok && seg.at >= 0 {
			add(seg, t.text, true)
		}
	}
	for _, seg := range pk.segs {
		t, ok := texts[seg]
		if !ok || seg.at >= 0 {
			continue
		}
		if i, ok := byNoWait[t.noWait]; ok {
			seg.fn = i
			pk.fns[i].phases = append(pk.fns[i].phases, seg.p)
			continue
		}
		add(seg, t.text, false)
	}
	for _, f := range pk.fns {
		sort.Ints(f.phases)
	}
}

// bodyText prints seg's body as a function body (argument declarations at
// the phase's own indices, then the statements, the dependency wait at
// statement at, -1 for none) and the headers it needs.
func (pr *printer) bodyText(seg *phaseSeg, at int) (string, map[string]bool) {
	prefix, vprefix := phasePrefix(seg.p), phaseVarPrefix(seg.p)
	sub := &printer{p: pr.p, k: pr.k, args: map[string]kir.Arg{}, declared: map[string]bool{}, headers: map[string]bool{}, body: new(bytes.Buffer), indent: 1, cbMap: pr.pers.cbMap[seg.p]}
	sub.alias = func(n string) string {
		if s, ok := strings.CutPrefix(n, prefix); ok {
			return s
		}
		if s, ok := strings.CutPrefix(n, vprefix); ok {
			return s
		}
		return n
	}
	for _, n := range []string{"tcc_deps", "tcc_ndeps"} {
		sub.declared[n] = true
	}
	sub.where = fmt.Sprintf("phase %d arguments", seg.p)
	for _, kind := range []kir.ArgKind{kir.CompileTimeArg, kir.RuntimeArg, kir.CommonRuntimeArg} {
		for _, a := range pr.k.ArgsOfKind(kind) {
			if !strings.HasPrefix(a.Name, prefix) {
				continue
			}
			name := sub.alias(a.Name)
			sub.declare(name, kind.String()+" argument")
			sub.args[a.Name] = a
			switch kind {
			case kir.CompileTimeArg:
				if a.Value.Kind == kir.ValConst {
					sub.line("constexpr uint32_t %s = %d;  // compile-time arg (the same in every phase calling this body)", name, a.Value.Const)
				} else {
					sub.line("constexpr uint32_t %s = get_compile_time_arg_val(%d);  // compile-time arg %d = %s", name, a.Index, a.Index, a.Value)
				}
			case kir.RuntimeArg:
				sub.line("const uint32_t %s = get_arg_val<uint32_t>(%d);  // the phase's runtime arg %d (per core)", name, a.Index-seg.rta[0], a.Index-seg.rta[0])
			default:
				sub.line("const uint32_t %s = get_common_arg_val<uint32_t>(%d);  // the phase's common runtime arg %d", name, a.Index-seg.crta[0], a.Index-seg.crta[0])
			}
		}
	}
	sub.where = ""
	if sub.body.Len() > 0 && len(seg.body) > 0 {
		sub.body.WriteByte('\n')
	}
	for i, s := range seg.body {
		if i == at {
			sub.line("tcc_wait_deps(tcc_deps, tcc_ndeps);  // the phase's dependencies (done words)")
		}
		if sub.err != nil {
			break
		}
		sub.stmt(s)
	}
	if at == len(seg.body) {
		sub.line("tcc_wait_deps(tcc_deps, tcc_ndeps);  // the phase's dependencies (done words)")
	}
	if sub.err != nil && pr.err == nil {
		pr.err = fmt.Errorf("%w (phase %d)", sub.err, seg.p)
	}
	pr.addChains(sub.chains) // their programs follow the merged kernel's includes
	return sub.body.String(), sub.headers
}

// printPersistBlock prints a block of kernel_main holding phase segments:
// each segment as the phase's begin, body call and end; runs of segments
// that repeat up to their constants as one loop (persist_steps.go).
func (pr *printer) printPersistBlock(body []kir.Stmt) {
	pr.printStepGroups(body)
}

// printPersistStmts prints statements of a block of kernel_main, each
// phase segment as the phase's begin, body call and end.
func (pr *printer) printPersistStmts(body []kir.Stmt) {
	for i := 0; i < len(body) && pr.err == nil; i++ {
		if r, ok := pr.incRun(body, i); ok {
			pr.incCall(r)
			i = r.end - 1
			continue
		}
		if end, ws := pr.waitRun(body, i); len(ws) > 0 {
			pr.line("tcc_wait_deps(%s, %d);", pr.depList(ws), len(ws))
			i = end - 1
			continue
		}
		b, ok := body[i].(kir.PhaseBegin)
		if !ok {
			pr.stmt(body[i])
			continue
		}
		seg := pr.pers.segOf[b.Phase]
		j := i + 1
		for ; j < len(body); j++ {
			if e, ok := body[j].(kir.PhaseEnd); ok && e.Phase == b.Phase {
				break
			}
		}
		pr.phaseCall(seg)
		i = j
	}
}

// phaseCall prints one phase at its place in kernel_main.
func (pr *printer) phaseCall(seg *phaseSeg) {
	off := 0
	if pr.pers.table != nil {
		off = pr.pers.table[seg.p]
	}
	begin, arrive := pr.earlyRole(seg.p)
	if begin {
		lo, hi := pr.earlyMask(seg.p)
		pr.line("tcc_phase_begin_early(%d, %d, %d, %d, 0x%08xu, 0x%08xu);  // early: only its CBs; CB record at tables+%d; runtime args [%d, %d), common [%d, %d)",
			seg.p, off, seg.rta[0], seg.crta[0], lo, hi, off, seg.rta[0], seg.rta[0]+seg.rta[1], seg.crta[0], seg.crta[0]+seg.crta[1])
	} else {
		pr.line("tcc_phase_begin(%d, %d, %d, %d);  // CB record at tables+%d; runtime args [%d, %d), common [%d, %d)",
			seg.p, off, seg.rta[0], seg.crta[0], off, seg.rta[0], seg.rta[0]+seg.rta[1], seg.crta[0], seg.crta[0]+seg.crta[1])
	}
	if seg.comment != "" {
		for _, l := range strings.Split(seg.comment, "\n") {
			pr.line("%s", strings.TrimRight("// "+l, " "))
		}
	}
	deps := "nullptr, 0"
	if len(seg.deps) > 0 {
		deps = fmt.Sprintf("%s, %d", pr.depList(seg.deps), len(seg.deps))
	}
	switch {
	case seg.fn >= 0 && pr.pers.fns[seg.fn].wait:
		pr.line("tcc_phase_body_%d(%s);", seg.fn, deps)
	case seg.fn >= 0:
		pr.line("tcc_phase_body_%d();", seg.fn)
	case len(seg.deps) > 0:
		pr.line("tcc_wait_deps(%s);", deps)
	}
	if arrive {
		pr.line("tcc_phase_end_arrive(%d);  // the next phase begins early on this RISC", seg.p)
	} else {
		pr.line("tcc_phase_end(%d);", seg.p)
	}
}

// persistDecls writes the file-scope part of a merged kernel: the phase
// machinery, the dependency lists and the body functions.
func (pr *printer) persistDecls(out *bytes.Buffer) {
	pk := pr.pers
	if pr.k.OnEth() {
		out.WriteString("#define TCC_PERSIST_ETH 1  // an ethernet core: no CBs, no core-local barriers\n")
	}
	out.WriteString("// The phase machinery (tcc_phase_begin, tcc_phase_end, ...), beside this file.\n" + persistInclude + "\n\n")
	if len(pk.deps.texts) > 0 {
		out.WriteString("// The done words (offsets in the control block) phases wait for.\n")
		for i, d := range pk.deps.texts {
			fmt.Fprintf(out, "constexpr uint32_t tcc_deps_%d[] = {%s};\n", i, d)
		}
		out.WriteByte('\n')
	}
	if len(pk.lists.texts) > 0 {
		out.WriteString("// The cores each signal goes to, as the indices of their NoC x coordinates\n")
		out.WriteString("// among this kernel's common runtime arguments (y follows x).\n")
		for i, l := range pk.lists.texts {
			fmt.Fprintf(out, "constexpr uint16_t tcc_cores_%d[] = {%s};\n", i, l)
		}
		out.WriteString("\n")
		out.WriteString("// tcc_inc_cores: increment the word at addr by incr on each listed core.\n")
		out.WriteString("__attribute__((noinline)) void tcc_inc_cores(const uint16_t* cores, uint32_t n, uint32_t addr, uint32_t incr) {\n")
		out.WriteString("    for (uint32_t i = 0; i < n; ++i) {\n")
		out.WriteString("        noc_semaphore_inc(get_noc_addr(tcc_persist::crta0[cores[i]], tcc_persist::crta0[cores[i] + 1u], addr), incr);\n")
		out.WriteString("    }\n")
		out.WriteString("}\n\n")
	}
	pk.stepTables(out)
	for i, f := range pk.fns {
		fmt.Fprintf(out, "// Phase body %d: phases %s.\n", i, phaseList(f.phases))
		params := ""
		if f.wait {
			params = "const uint32_t* tcc_deps, uint32_t tcc_ndeps"
		}
		fmt.Fprintf(out, "__attribute__((noinline)) void tcc_phase_body_%d(%s) {\n", i, params)
		out.WriteString(f.text)
		out.WriteString("}\n\n")
	}
}

// phaseList spells sorted phases with runs as ranges: "3, 7-9".
func phaseList(ps []int) string {
	var parts []string
	for i := 0; i < len(ps); {
		j := i
		for j+1 < len(ps) && ps[j+1] == ps[j]+1 {
			j++
		}
		if j > i {
			parts = append(parts, fmt.Sprintf("%d-%d", ps[i], ps[j]))
		} else {
			parts = append(parts, strconv.Itoa(ps[i]))
		}
		i = j + 1
	}
	return strings.Join(parts, ", ")
}

// isPhaseArg reports whether an argument of a merged kernel belongs to a
// phase ("p17_...": codegen/persist's ArgPrefix).
func isPhaseArg(name string) bool {
	if len(name) < 3 || name[0] != 'p' {
		return false
	}
	i := 1
	for i < len(name) && name[i] >= '0' && name[i] <= '9' {
		i++
	}
	return i > 1 && i < len(name) && name[i] == '_'
}

// hasPhase reports whether body holds a PhaseBegin at its top level.
func hasPhase(body []kir.Stmt) bool {
	for _, s := range body {
		if _, ok := s.(kir.PhaseBegin); ok {
			return true
		}
	}
	return false
}

// persistInit prints the first statement of a merged kernel's
// kernel_main, after its arguments: tcc_persist_init.
func (pr *printer) persistInit() {
	if pr.k.OnEth() {
		pr.line("tcc_persist_init(%du);  // the control block at the top of the ethernet core's kernel L1", pr.p.Persist.EthCtl)
		return
	}
	// A worker kernel's tcc_persist_init() opens kernel_main, before its
	// arguments are read (persistInitLine).
	for _, n := range kir.RingCommonArgs {
		if a, ok := pr.args[n]; !ok || a.Kind != kir.CommonRuntimeArg {
			pr.fail("a merged kernel of a persistent program needs the common argument %s (codegen/persist.WithTables)", n)
			return
		}
	}
}

// persistInitLine is the first line of a worker merged kernel's
// kernel_main, before its argument declarations (which read the vectors
// in the tables buffer), or "" for any other kernel.
func (pr *printer) persistInitLine() string {
	if pr.pers == nil || pr.k.OnEth() {
		return ""
	}
	return indentUnit + "tcc_persist_init();  // the argument bases: this kernel's vectors in the tables buffer (ring: persist_ctl, persist_tables)\n\n"
}

// persistHeaders adds the headers every merged kernel needs.
func (pr *printer) persistHeaders() {
	if pr.compute() {
		pr.headers[computeArgsHeader] = true
		pr.headers[riscCommonHeader] = true
		return
	}
	if !pr.k.OnEth() {
		pr.headers[cbInitHeader] = true
	}
}

const (
	// cbInitHeader declares setup_local_cb_read_write_interfaces
	// (tt_metal/hw/inc/internal/circular_buffer_init.h; the firmware's
	// brisc.cc, ncrisc.cc and trisc.cc include it).
	cbInitHeader = "internal/circular_buffer_init.h"
	// riscCommonHeader declares invalidate_l1_cache
	// (tt_metal/hw/inc/internal/tt-1xx/risc_common.h, on the include
	// path as trisc.cc includes it).
	riscCommonHeader = "risc_common.h"
)

// PersistentCode is the estimated code of a merged kernel of a persistent
// program.
type PersistentCode struct {
	// Shared is the kernel as printed: kernel_main with one call per
	// phase, one function per distinct phase body, the phase machinery.
	Shared kir.CodeEstimate
	// Inlined is kir.EstimateCode of the merged kernel: every phase's
	// body in line, as it would print without sharing.
	Inlined kir.CodeEstimate
	// Phases and Bodies count the kernel's phases with a body and its
	// distinct body functions.
	Phases, Bodies int
}

// EstimatePersistentKernel estimates merged kernel k of persistent program
// p as PrintKernel prints it (the bodies it shares are those it prints).
// Postcondition: Shared's terms are the inlined kernel's, less the phase
// bodies not printed (every body beyond the first of its function), plus a
// call per phase with a body, a function per body and the phase machinery.
func EstimatePersistentKernel(p *kir.Program, k *kir.Kernel) (PersistentCode, error) {
	if p == nil || p.Persist == nil || k == nil {
		return PersistentCode{}, fmt.Errorf("cpp: EstimatePersistentKernel needs a persistent program and one of its kernels")
	}
	pr := &printer{p: p, k: k, args: map[string]kir.Arg{}, declared: map[string]bool{}, headers: map[string]bool{}, body: new(bytes.Buffer)}
	pk := pr.analysePersist()
	if pr.err != nil {
		return PersistentCode{}, pr.err
	}
	pr.collectArgs() // the step groups print kernel_main's statements
	compute := k.Role == kir.RoleCompute
	// kernel_main: the merged body with every segment emptied and every
	// run of signals a call (incRun).
	terms := map[string]int{}
	lists := map[string]int{}
	deps := map[string]int{}
	grouped := map[int]bool{} // phases in a step group beyond its first step
	var strip func(body []kir.Stmt) []kir.Stmt
	strip = func(body []kir.Stmt) []kir.Stmt {
		var out []kir.Stmt
		skip := pr.groupedSteps(body, terms, grouped)
		for i := 0; i < len(body); i++ {
			if skip[i] {
				continue
			}
			switch s := body[i].(type) {
			case kir.For:
				s.Body = strip(s.Body)
				out = append(out, s)
			case kir.NoCSemaphoreWaitMin, kir.EthNoCSemaphoreWaitMin:
				if end, ws := pr.waitRun(body, i); len(ws) > 0 {
					terms["stmt:tcc_wait_call"]++
					deps[fmt.Sprint(ws)] = len(ws)
					i = end - 1
					continue
				}
				out = append(out, s)
			case kir.NoCSemaphoreInc:
				if r, ok := pr.incRun(body, i); ok {
					terms["stmt:tcc_inc_call"]++
					lists[fmt.Sprint(r.idx)] = len(r.idx)
					i = r.end - 1
					continue
				}
				out = append(out, s)
			case kir.PhaseBegin:
				out = append(out, s)
				for i+1 < len(body) {
					if e, ok := body[i+1].(kir.PhaseEnd); ok && e.Phase == s.Phase {
						break
					}
					i++
				}
			default:
				out = append(out, s)
			}
		}
		return out
	}
	addTerms := func(e kir.CodeEstimate, dropBase bool) {
		for key, n := range e.Terms {
			if dropBase && strings.HasPrefix(key, "base:") {
				continue
			}
			terms[key] += n
		}
	}
	addTerms(kir.EstimateCode(&kir.Kernel{Role: k.Role, Processor: k.Processor, Body: strip(k.Body)}), false)
	terms["base:persist"]++
	if compute {
		// The merged unpack and math binaries' own share (kir's
		// codeCost: measured on the JIT's images).
		terms["base:persist_unpack"]++
		terms["base:persist_math"]++
	}
	for _, n := range lists {
		terms["data:tcc_core_index"] += n
	}
	for _, n := range deps {
		terms["data:tcc_done_word"] += n
	}
	for _, seg := range pk.segs {
		if len(seg.deps) > 0 {
			deps["phase "+strconv.Itoa(seg.p)] = len(seg.deps)
		}
	}
	phases := 0
	for _, seg := range pk.segs {
		if seg.fn >= 0 {
			phases++
			if !grouped[seg.p] {
				terms["stmt:tcc_phase_body_call"]++
			}
		}
	}
	for i := range pk.fns {
		for _, seg := range pk.segs {
			if seg.fn == i {
				addTerms(kir.EstimateCode(&kir.Kernel{Role: k.Role, Processor: k.Processor, Body: seg.body}), true)
				terms["base:tcc_phase_body"]++
				break
			}
		}
	}
	return PersistentCode{Shared: kir.EstimateTerms(compute, terms), Inlined: kir.EstimateCode(k), Phases: phases, Bodies: len(pk.fns)}, nil
}
