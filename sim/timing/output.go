package timing

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/tcc-dev/tcc/codegen/target"
)

// JSON is the report as indented JSON with a trailing newline.
func (r *Report) JSON() ([]byte, error) {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// TableOptions choose what WriteTableOpts prints: the per-layer table
// (PerLayer), with the layers whose rows are identical (kind, programs,
// time to 0.1 us) grouped into one row (Collapse).
type TableOptions struct {
	PerLayer, Collapse bool
}

// WriteTable writes the per-kind and per-layer tables and the step summary.
func (r *Report) WriteTable(w io.Writer, perLayer bool) error {
	return r.WriteTableOpts(w, TableOptions{PerLayer: perLayer})
}

// WriteTableOpts writes the per-kind table, the per-layer table as o
// says, and the step summary.
func (r *Report) WriteTableOpts(w io.Writer, o TableOptions) error {
	tw := tabwriter.NewWriter(w, 0, 2, 2, ' ', tabwriter.AlignRight)
	if r.Persistent {
		fmt.Fprintf(w, "%s mesh %s, %s, %s batch %d%s: ONE persistent program per device of %d phases (one launch, simulated once: %d instructions)\n",
			r.Model, r.Mesh, r.Stage, r.Mode, r.Batch, r.positionText(), r.Phases, r.SimulatedSteps)
		fmt.Fprintln(w, "phases overlap where their dataflow allows: a phase's us runs from its first tcc_phase_begin to its last tcc_phase_end, so the us totals below add up to more than the step")
	} else {
		fmt.Fprintf(w, "%s mesh %s, %s, %s batch %d%s: %d programs per device (%d signatures simulated)\n",
			r.Model, r.Mesh, r.Stage, r.Mode, r.Batch, r.positionText(), r.ProgramsPerDevice, r.Signatures)
	}
	if m := r.Memory; m != nil {
		room := "free " + target.HumanBytes(m.Free)
		if m.Free < 0 {
			room = "over by " + target.HumanBytes(-m.Free)
		}
		fmt.Fprintf(w, "DRAM per device: weights %s, KV caches %s, state %s, other %s; total %s of %s (%s)\n",
			target.HumanBytes(m.Weights), target.HumanBytes(m.KV), target.HumanBytes(m.State), target.HumanBytes(m.Other), target.HumanBytes(m.Total), target.HumanBytes(m.Capacity), room)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(tw, "op\tcount\tcores\tMB moved\tus each\tus total\tshare\t critical thread\t waits on most\t")
	for _, k := range r.Kinds {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.2f\t%.2f\t%.1f\t%.1f%%\t %s\t %s\t\n", k.Op, k.Count, k.Cores, float64(k.Bytes)/1e6, k.USEach, k.USTotal, 100*k.Share, k.Critical, k.WaitsOn)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if o.PerLayer && o.Collapse {
		fmt.Fprintln(w)
		tw = tabwriter.NewWriter(w, 0, 2, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "layers\tkind\tprograms\tus each\tus total\t")
		for _, g := range r.layerGroups() {
			l := r.Layers[g[0]]
			label := "-"
			if l.Index >= 0 {
				idx := make([]int, len(g))
				for i, j := range g {
					idx[i] = r.Layers[j].Index
				}
				label = LayerSet(idx)
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%.1f\t%.1f\t\n", label, l.Kind, l.Programs, l.US, l.US*float64(len(g)))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	} else if o.PerLayer {
		fmt.Fprintln(w)
		tw = tabwriter.NewWriter(w, 0, 2, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "layer\tkind\tprograms\tus\t")
		for _, l := range r.Layers {
			idx := strconv.Itoa(l.Index)
			if l.Index < 0 {
				idx = "-"
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%.1f\t\n", idx, l.Kind, l.Programs, l.US)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	fmt.Fprintf(w, "\nstep: %.1f us per device (slowest device; per device %v), of which launch gaps %.1f us\n", r.StepUS, r.DeviceStepUS, r.LaunchUSTotal)
	fmt.Fprintf(w, "DRAM floor: %.1f us physical (%.2f GB per device at 512 GB/s), %.1f us at the model's best stream; step/floor = %.2f physical, %.2f stream\n", r.FloorUS, float64(r.FloorBytes)/1e9, r.StreamFloorUS, r.Ratio, r.StreamRatio)
	if r.ComputeFloorUS > 0 {
		fmt.Fprintf(w, "compute floor: %.1f us (%d tile products of 32x32x32 at the programs' math fidelities on every worker core); step/compute floor = %.2f\n", r.ComputeFloorUS, r.TileProducts, r.ComputeRatio)
	}
	if r.FastForwarded > 0 {
		fmt.Fprintf(w, "%d programs per device fast-forwarded from simulations at smaller positions (they read the position and would run past the timing model's instruction budget)\n", r.FastForwarded)
	}
	return nil
}

// layerGroups groups r.Layers (by position) whose rows print the same
// (index aside): kind, programs and time to 0.1 us; sections that are not
// layers (index -1) each stay alone. Groups are in order of their first row.
func (r *Report) layerGroups() [][]int {
	var groups [][]int
	at := map[string]int{}
	for i, l := range r.Layers {
		if l.Index < 0 {
			groups = append(groups, []int{i})
			continue
		}
		key := fmt.Sprintf("%s\x00%d\x00%.1f", l.Kind, l.Programs, l.US)
		if g, ok := at[key]; ok {
			groups[g] = append(groups[g], i)
			continue
		}
		at[key] = len(groups)
		groups = append(groups, []int{i})
	}
	return groups
}

// LayerSet names a set of layer indices (ascending) in a few characters:
// "5", "4-6" (a run), "3-59 every 4th" (a progression), "1-2,4-6,8" (a few
// runs), else "47 of 1-62".
func LayerSet(idx []int) string {
	n := len(idx)
	switch {
	case n == 0:
		return ""
	case n == 1:
		return strconv.Itoa(idx[0])
	case idx[n-1]-idx[0] == n-1:
		return fmt.Sprintf("%d-%d", idx[0], idx[n-1])
	}
	if step := idx[1] - idx[0]; n >= 3 {
		ap := true
		for i := 2; i < n; i++ {
			ap = ap && idx[i]-idx[i-1] == step
		}
		if ap {
			return fmt.Sprintf("%d-%d every %s", idx[0], idx[n-1], ordinal(step))
		}
	}
	var runs []string
	for i := 0; i < n; {
		j := i
		for j+1 < n && idx[j+1] == idx[j]+1 {
			j++
		}
		if j == i {
			runs = append(runs, strconv.Itoa(idx[i]))
		} else {
			runs = append(runs, fmt.Sprintf("%d-%d", idx[i], idx[j]))
		}
		i = j + 1
	}
	if s := strings.Join(runs, ","); len(s) <= 16 {
		return s
	}
	return fmt.Sprintf("%d of %d-%d", n, idx[0], idx[n-1])
}

// ordinal is "2nd", "3rd", "4th", ...
func ordinal(n int) string {
	switch {
	case n%100 >= 11 && n%100 <= 13:
		return fmt.Sprintf("%dth", n)
	case n%10 == 1:
		return fmt.Sprintf("%dst", n)
	case n%10 == 2:
		return fmt.Sprintf("%dnd", n)
	case n%10 == 3:
		return fmt.Sprintf("%drd", n)
	}
	return fmt.Sprintf("%dth", n)
}

// positionText is the header's position: " at position P (of --max-seq
// N; the default, the last)", "at positions P..Q" for a prefill step, ""
// without one.
func (r *Report) positionText() string {
	if r.Position < 0 {
		return ""
	}
	at := fmt.Sprintf(" at position %d", r.Position)
	if r.differentPositions() {
		at = fmt.Sprintf(" at positions %s (one per user)", joinInts(r.Positions))
	} else if r.LastPosition > r.Position {
		at = fmt.Sprintf(" at positions %d..%d", r.Position, r.LastPosition)
	}
	var notes []string
	if r.MaxSeq > 0 {
		notes = append(notes, fmt.Sprintf("of --max-seq %d", r.MaxSeq))
	}
	if r.DefaultPosition {
		notes = append(notes, "the default: the last; --position P for another")
	}
	if len(notes) > 0 {
		at += " (" + strings.Join(notes, "; ") + ")"
	}
	return at
}

// differentPositions reports whether the users are at different
// positions.
func (r *Report) differentPositions() bool {
	for _, p := range r.Positions {
		if p != r.Positions[0] {
			return true
		}
	}
	return false
}

// joinInts is xs comma-separated.
func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}

// WriteThreads prints, for the first program of op kind op on the slowest
// device, its link floor when it sends over ethernet (ProgramRow.LinkFloorUS)
// and each kernel's latest-finishing thread: its core, when it
// finished and every wait it stalled on, longest first. It fails when the
// report has no program of that kind.
func (r *Report) WriteThreads(w io.Writer, op string) error {
	for _, p := range r.Programs {
		if p.Op != op || p.Device != r.slowest() {
			continue
		}
		fmt.Fprintf(w, "%s (program %d, layer %d, %s): %.2f us on %d cores, fixed cost included; inputs %s\n", p.Op, p.Index, p.Layer, p.Region, p.US, p.Cores, p.Inputs)
		if p.LinkFloorUS > 0 {
			fmt.Fprintf(w, "link floor: %.2f us (%d bytes on the busiest direction of a link at the link rate); program / floor %.2fx\n", p.LinkFloorUS, p.LinkBytes, p.US/p.LinkFloorUS)
		}
		tw := tabwriter.NewWriter(w, 0, 2, 2, ' ', 0)
		fmt.Fprintln(tw, "kernel\tcore\tfinish us\twaits (us)\tbusy (us)")
		for _, t := range p.Threads {
			fmt.Fprintf(tw, "%s\t%s\t%.2f\t%s\t%s\n", t.Kernel, fmt.Sprint(t.Core), t.FinishUS, topUS(t.Waits, 0), topUS(t.Busy, 5))
		}
		return tw.Flush()
	}
	return fmt.Errorf("no program of op %q in this build (see the op column of the table)", op)
}

// topUS lists m's entries longest first (ties by name) as "name us", at
// most n of them (n <= 0: all) and the rest summed as "other".
func topUS(m map[string]float64, n int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if m[keys[i]] != m[keys[j]] {
			return m[keys[i]] > m[keys[j]]
		}
		return keys[i] < keys[j]
	})
	var ws []string
	other := 0.0
	for i, k := range keys {
		if n > 0 && i >= n {
			other += m[k]
			continue
		}
		ws = append(ws, fmt.Sprintf("%s %.2f", k, m[k]))
	}
	if other > 0 {
		ws = append(ws, fmt.Sprintf("other %.2f", other))
	}
	return strings.Join(ws, ", ")
}

// slowest is the index of the device with the longest step.
func (r *Report) slowest() int {
	slow := 0
	for d, us := range r.DeviceStepUS {
		if us > r.DeviceStepUS[slow] {
			slow = d
		}
	}
	return slow
}

// traceEvent is one Chrome trace-event ("X" complete events, "M" metadata).
type traceEvent struct {
	Name string         `json:"name"`
	Cat  string         `json:"cat,omitempty"`
	Ph   string         `json:"ph"`
	TS   float64        `json:"ts"`
	Dur  float64        `json:"dur,omitempty"`
	PID  int            `json:"pid"`
	TID  int            `json:"tid"`
	Args map[string]any `json:"args,omitempty"`
}

// Trace is one step as Chrome / Perfetto trace-event JSON, laid out like
// tt-metal's device profiler: a process per device; in it a track of the
// programs and a track per RISC and core group: each kernel of a program
// runs one RISC class (writers BRISC, readers NCRISC, compute TRISC0-2,
// ethernet kernels ERISC) on one group of cores, named by the kernel
// (reader, gate_reader, tail_writer, ...). A track holds a slice per
// program for the group's latest thread: from the program's start to its
// finish, with the core it ran on and what it waited on longest. Tracks
// are ordered programs, BRISC, NCRISC, TRISC, ERISC, then by first use.
func (r *Report) Trace() ([]byte, error) {
	var evs []traceEvent
	type track struct {
		risc, kernel string
	}
	rank := map[string]int{"BRISC": 0, "NCRISC": 1, "TRISC": 2, "ERISC": 3}
	tids := map[int]map[track]int{} // per device
	var order []track
	seen := map[track]bool{}
	for _, p := range r.Programs {
		for _, t := range p.Threads {
			k := track{riscOf(t), t.Kernel}
			if !seen[k] {
				seen[k] = true
				order = append(order, k)
			}
		}
	}
	sort.SliceStable(order, func(i, j int) bool { return rank[order[i].risc] < rank[order[j].risc] })
	tidOf := map[track]int{}
	for i, k := range order {
		tidOf[k] = i + 1
	}
	for _, p := range r.Programs {
		if tids[p.Device] == nil {
			tids[p.Device] = map[track]int{}
			evs = append(evs, traceEvent{Name: "process_name", Ph: "M", PID: p.Device, Args: map[string]any{"name": fmt.Sprintf("device %d", p.Device)}})
			evs = append(evs, traceEvent{Name: "thread_name", Ph: "M", PID: p.Device, TID: 0, Args: map[string]any{"name": "programs"}})
		}
		evs = append(evs, traceEvent{Name: p.Op, Cat: "program", Ph: "X", TS: p.StartUS, Dur: p.US, PID: p.Device, TID: 0,
			Args: map[string]any{"layer": p.Layer, "cores": p.Cores, "bytes_read": p.BytesRead, "critical": p.CriticalThread, "waits_on": p.WaitsOn}})
		threads := append([]ThreadTime(nil), p.Threads...)
		sort.SliceStable(threads, func(i, j int) bool {
			return tidOf[track{riscOf(threads[i]), threads[i].Kernel}] < tidOf[track{riscOf(threads[j]), threads[j].Kernel}]
		})
		for _, t := range threads {
			k := track{riscOf(t), t.Kernel}
			tid := tidOf[k]
			if _, ok := tids[p.Device][k]; !ok {
				tids[p.Device][k] = tid
				name := k.risc
				if name == "TRISC" {
					name = "TRISC0-2"
				}
				evs = append(evs, traceEvent{Name: "thread_name", Ph: "M", PID: p.Device, TID: tid, Args: map[string]any{"name": name + " " + k.kernel}})
				evs = append(evs, traceEvent{Name: "thread_sort_index", Ph: "M", PID: p.Device, TID: tid, Args: map[string]any{"sort_index": tid}})
			}
			w, us := t.TopWait()
			evs = append(evs, traceEvent{Name: p.Op, Cat: k.risc, Ph: "X", TS: p.StartUS, Dur: t.FinishUS, PID: p.Device, TID: tid,
				Args: map[string]any{"kernel": t.Kernel, "core": t.Core.String(), "waits_on": w, "wait_us": round3(us)}})
		}
	}
	var buf bytes.Buffer
	buf.WriteString("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n")
	for i, e := range evs {
		b, err := json.Marshal(e)
		if err != nil {
			return nil, err
		}
		buf.Write(b)
		if i+1 < len(evs) {
			buf.WriteByte(',')
		}
		buf.WriteByte('\n')
	}
	buf.WriteString("]}\n")
	return buf.Bytes(), nil
}
