package cpp

import (
	"bytes"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/tcc-dev/tcc/codegen/kir"
)

// Step groups: kernel_main of a merged kernel in loops.
//
// A merged kernel's phases share body functions (the layers' phases print
// the same), but kernel_main still holds, per phase, a few calls with
// other constants: the dependency wait, tcc_phase_begin (phase, record,
// argument slices), the body call, tcc_phase_end, the count signal to the
// phase's leader, the leader's wait for the count and its done signals.
// An ethernet core of a ring collective takes part in every all-reduce of
// the step (129 phases at 64 layers): printed one phase after another,
// those calls alone exceeded the 24 KiB ERISC kernel limit (~46.7 KiB
// estimated for qwen27b at 1x2), and a worker's 517 phases took most of
// its images' L1. A step is the statements from after one phase's
// tcc_phase_end through the next phase's; a sequence of steps that
// repeats (the steps of one layer or of a few, bestPeriod), each
// repetition printing the same up to integer literals and constant-list
// names (tcc_cores_N, tcc_deps_N), prints as one loop over a constant
// table of those values (one row per repetition, one field per position
// whose value is not the same in every row; positions with the same
// values share a field). The loop runs the same calls with the same
// values in the same order: what the simulator runs is unchanged. Only
// steps made of the phase machinery's own statements (stepStmtOK) are
// grouped.

// stepSlot matches what may differ between the steps of a group: a
// constant list's name or a decimal integer literal (with its u suffix).
var stepSlot = regexp.MustCompile(`\btcc_(cores|deps)_\d+\b|\b\d+u?\b`)

// stepStmtOK reports whether s may be part of a grouped step: the
// statements codegen/persist puts around and between the phases (the
// phase barriers, dependency waits, signals, barriers, comments).
func stepStmtOK(s kir.Stmt) bool {
	switch s.(type) {
	case kir.PhaseBegin, kir.PhaseEnd, kir.Comment,
		kir.NoCSemaphoreWaitMin, kir.EthNoCSemaphoreWaitMin, kir.NoCSemaphoreWait, kir.EthNoCSemaphoreWait,
		kir.NoCSemaphoreInc, kir.NoCAsyncAtomicBarrier, kir.NoCAsyncWriteBarrier, kir.NoCSemaphoreSetMulticast:
		return true
	}
	return false
}

// step is one step of a block: body[lo:hi], its template (printed text,
// slots marked) and the slots' values as printed.
type step struct {
	lo, hi   int
	ok       bool
	template string
	values   []string
}

// stepGroup is a run of at least two repetitions of period steps with one
// template: steps [first, first+period*n) of the block, one loop
// iteration (and one table row) per period steps.
type stepGroup struct {
	first, period, n int
	// template and values are the first iteration's (its steps' texts
	// joined).
	template string
	values   []string
	// fields maps each slot to its field (-1: the same literal in every
	// row, printed in place).
	fields []int
	// kinds are the fields' C++ types, rows the table's values.
	kinds []string
	rows  [][]string
	id    int
}

// splitSteps cuts body after every top-level PhaseEnd; the statements
// after the last one are a step too (not grouped: no phase ends in it).
func splitSteps(body []kir.Stmt) []step {
	var out []step
	lo := 0
	for i, s := range body {
		if _, ok := s.(kir.PhaseEnd); ok {
			out = append(out, step{lo: lo, hi: i + 1})
			lo = i + 1
		}
	}
	if lo < len(body) {
		out = append(out, step{lo: lo, hi: len(body)})
	}
	return out
}

// stepGroups finds the groups of body's steps (see the file comment),
// printing each step that may be grouped into a scratch buffer.
func (pr *printer) stepGroups(body []kir.Stmt) ([]step, []*stepGroup) {
	steps := splitSteps(body)
	for i := range steps {
		st := &steps[i]
		st.ok = true
		// The statements between a PhaseBegin and its PhaseEnd are the
		// phase's body, which prints as a call.
		ended, inPhase := false, false
		for _, s := range body[st.lo:st.hi] {
			if _, b := s.(kir.PhaseBegin); b {
				inPhase = true
			}
			if !inPhase && !stepStmtOK(s) {
				st.ok = false
			}
			if _, e := s.(kir.PhaseEnd); e {
				ended, inPhase = true, false
			}
		}
		if !st.ok || !ended {
			st.ok = false
			continue
		}
		text := pr.scratch(body[st.lo:st.hi])
		var tmpl strings.Builder
		for _, line := range strings.Split(text, "\n") {
			if t := strings.TrimSpace(line); t == "" || strings.HasPrefix(t, "//") {
				continue
			}
			if c := strings.Index(line, "  //"); c >= 0 {
				line = line[:c]
			}
			line = stepSlot.ReplaceAllStringFunc(line, func(m string) string {
				st.values = append(st.values, m)
				switch {
				case strings.HasPrefix(m, "tcc_cores_"):
					return "\x00C\x00"
				case strings.HasPrefix(m, "tcc_deps_"):
					return "\x00D\x00"
				}
				return "\x00I\x00"
			})
			tmpl.WriteString(line)
			tmpl.WriteByte('\n')
		}
		st.template = tmpl.String()
	}
	var groups []*stepGroup
	for i := 0; i < len(steps); {
		period, reps := bestPeriod(steps, i)
		if reps < 2 {
			i++
			continue
		}
		groups = append(groups, pr.group(steps, i, period, reps))
		i += period * reps
	}
	return steps, groups
}

// maxStepPeriod bounds the steps one loop iteration may hold (a model's
// layers repeat with a period of a few layers' phases).
const maxStepPeriod = 64

// bestPeriod is the period and repetitions of the longest run of
// repeated step sequences starting at steps[i] (the shortest period of
// the longest; reps < 2: none): steps i+k*period+j and i+j have one
// template for every k < reps, j < period, and all may be grouped.
func bestPeriod(steps []step, i int) (period, reps int) {
	best, bp, br := 0, 0, 0
	for p := 1; p <= maxStepPeriod && i+2*p <= len(steps); p++ {
		if !steps[i+p-1].ok {
			break
		}
		r := 1
		for ; i+(r+1)*p <= len(steps); r++ {
			same := true
			for j := 0; j < p && same; j++ {
				t := steps[i+r*p+j]
				same = t.ok && t.template == steps[i+j].template
			}
			if !same {
				break
			}
		}
		if r >= 2 && p*r > best {
			best, bp, br = p*r, p, r
		}
	}
	return bp, br
}

// group builds the table of the n iterations of period steps from
// steps[first].
func (pr *printer) group(steps []step, first, period, n int) *stepGroup {
	g := &stepGroup{first: first, period: period, n: n}
	iter := make([][]string, n)
	var tmpl strings.Builder
	for r := 0; r < n; r++ {
		for j := 0; j < period; j++ {
			st := steps[first+r*period+j]
			iter[r] = append(iter[r], st.values...)
			if r == 0 {
				tmpl.WriteString(st.template)
			}
		}
	}
	g.template, g.values = tmpl.String(), iter[0]
	slots := len(g.values)
	byColumn := map[string]int{}
	marks := strings.Split(g.template, "\x00")
	// marks[1], marks[3], ... are the slots' kinds in order.
	for k := 0; k < slots; k++ {
		col := make([]string, n)
		same := true
		for r := 0; r < n; r++ {
			col[r] = iter[r][k]
			same = same && col[r] == col[0]
		}
		if same {
			g.fields = append(g.fields, -1)
			continue
		}
		key := strings.Join(col, ",")
		f, ok := byColumn[key]
		if !ok {
			f = len(g.kinds)
			byColumn[key] = f
			kind := "uint32_t"
			switch marks[2*k+1] {
			case "C":
				kind = "const uint16_t*"
			case "D":
				kind = "const uint32_t*"
			}
			g.kinds = append(g.kinds, kind)
			for r := 0; r < n; r++ {
				if len(g.rows) <= r {
					g.rows = append(g.rows, nil)
				}
				v := col[r]
				if kind == "uint32_t" && !strings.HasSuffix(v, "u") {
					v += "u"
				}
				g.rows[r] = append(g.rows[r], v)
			}
		}
		g.fields = append(g.fields, f)
	}
	g.id = len(pr.pers.groups)
	pr.pers.groups = append(pr.pers.groups, g)
	return g
}

// scratch prints stmts (statements of kernel_main) into a string at
// indentation 0, leaving the printer's output as it was.
func (pr *printer) scratch(stmts []kir.Stmt) string {
	saved, indent := pr.body, pr.indent
	pr.body, pr.indent = new(bytes.Buffer), 0
	pr.printPersistStmts(stmts)
	out := pr.body.String()
	pr.body, pr.indent = saved, indent
	return out
}

// printStepGroups prints a block of a merged kernel's kernel_main: every
// group as a loop over its table, the other steps as they are.
func (pr *printer) printStepGroups(body []kir.Stmt) {
	steps, groups := pr.stepGroups(body)
	at := map[int]*stepGroup{}
	for _, g := range groups {
		at[g.first] = g
	}
	for i := 0; i < len(steps) && pr.err == nil; i++ {
		g := at[i]
		if g == nil {
			pr.printPersistStmts(body[steps[i].lo:steps[i].hi])
			continue
		}
		var phases []int
		last := i + g.period*g.n - 1
		for _, s := range body[steps[i].lo:steps[last].hi] {
			if b, ok := s.(kir.PhaseBegin); ok {
				phases = append(phases, b.Phase)
			}
		}
		pr.line("// phases %s: one loop over their constants (tcc_steps_%d)", phaseList(phases), g.id)
		pr.line("for (uint32_t tcc_i = 0; tcc_i < %du; ++tcc_i) {", g.n)
		pr.indent++
		if len(g.kinds) > 0 {
			pr.line("const tcc_step_%d_t& tcc_s = tcc_steps_%d[tcc_i];", g.id, g.id)
		}
		tmpl, vals := g.template, g.values
		k := 0
		text := strings.NewReplacer("\x00C\x00", "\x00", "\x00D\x00", "\x00", "\x00I\x00", "\x00").Replace(tmpl)
		var out strings.Builder
		for _, part := range strings.SplitAfter(text, "\x00") {
			if !strings.HasSuffix(part, "\x00") {
				out.WriteString(part)
				continue
			}
			out.WriteString(strings.TrimSuffix(part, "\x00"))
			if f := g.fields[k]; f >= 0 {
				out.WriteString("tcc_s.f" + strconv.Itoa(f))
			} else {
				out.WriteString(vals[k])
			}
			k++
		}
		for _, line := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") {
			pr.line("%s", strings.TrimRight(line, " "))
		}
		pr.indent--
		pr.line("}")
		i = last
	}
}

// stepTables writes the step groups' row types and tables (file scope,
// after the constant lists they point to).
func (pk *persistKernel) stepTables(out *bytes.Buffer) {
	for _, g := range pk.groups {
		if len(g.kinds) == 0 {
			continue
		}
		fmt.Fprintf(out, "// The constants of step group %d, one row per step.\n", g.id)
		fmt.Fprintf(out, "struct tcc_step_%d_t {\n", g.id)
		for f, kind := range g.kinds {
			fmt.Fprintf(out, "    %s f%d;\n", kind, f)
		}
		out.WriteString("};\n")
		fmt.Fprintf(out, "constexpr tcc_step_%d_t tcc_steps_%d[] = {\n", g.id, g.id)
		for _, row := range g.rows {
			fmt.Fprintf(out, "    {%s},\n", strings.Join(row, ", "))
		}
		out.WriteString("};\n\n")
	}
}

// groupedSteps prices the step groups of a block of kernel_main (as
// printStepGroups prints them) into terms: per
// group a loop, a table word per row and field and a load per field. It
// returns the statements printed only as the loop (the steps after each
// group's first) and adds their phases to grouped.
func (pr *printer) groupedSteps(body []kir.Stmt, terms map[string]int, grouped map[int]bool) map[int]bool {
	if !hasPhase(body) {
		return nil
	}
	skip := map[int]bool{}
	steps, groups := pr.stepGroups(body)
	for _, g := range groups {
		terms["stmt:for"]++
		terms["data:tcc_step_word"] += g.n * len(g.kinds)
		terms["expr:l1-read"] += len(g.kinds)
		for s := g.first + g.period; s < g.first+g.period*g.n; s++ {
			for i := steps[s].lo; i < steps[s].hi; i++ {
				skip[i] = true
				if b, ok := body[i].(kir.PhaseBegin); ok {
					grouped[b.Phase] = true
				}
			}
		}
	}
	return skip
}
