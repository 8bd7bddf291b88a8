package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/tcc-dev/tcc/codegen"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/models"
	"github.com/tcc-dev/tcc/sim/timing"
	"github.com/tcc-dev/tcc/sim/timing/fromcodegen"
)

// defaultSimulatePositions is --simulate-positions' default: the
// positions of one prefill build simulated for --prompt-tokens, the
// steps between them interpolated.
const defaultSimulatePositions = 9

// promptOpts are tcc perf's flags for a whole prompt (--prompt-tokens).
type promptOpts struct {
	tokens, chunk int
	// autoChunk chooses chunk by the timing model (--prefill-chunk auto).
	autoChunk bool
	// simulate is the most positions of one build simulated (0: every
	// step's).
	simulate int
	format   string
	// collapse shows a long list of steps as its first, last and a few
	// between.
	collapse bool
	// fromSeq: the prompt is --mode prefill --seq N's (not
	// --prompt-tokens'): --seq is the prompt, and without --prefill-chunk
	// the chunk is defaultPerfChunk, halved until its build fits.
	fromSeq, chunkGiven bool
	// budget is --simulate-budget (timing.Predictor.SetBudget).
	budget int64
}

// promptPerf is tcc perf --prompt-tokens's prediction of a prompt run as
// tcc run runs it (prefillSteps), as --format json prints it. Every time
// is a prediction of the timing model.
type promptPerf struct {
	Model  string `json:"model"`
	Mesh   string `json:"mesh"`
	Stage  string `json:"stage"`
	Batch  int    `json:"batch"`
	Mode   string `json:"mode"`
	MaxSeq int    `json:"max_seq"`
	// PromptTokens is the prompt's length per user, PrefillChunk the
	// most tokens one step takes.
	PromptTokens int `json:"prompt_tokens"`
	PrefillChunk int `json:"prefill_chunk"`
	// TotalUS is the sum of the steps' StepUS; TokensPerSecond is
	// Batch * PromptTokens over it. TimeToFirstTokenUS is TotalUS too:
	// the last step's logits give the first generated token.
	TotalUS            float64 `json:"total_us"`
	TokensPerSecond    float64 `json:"tokens_per_second"`
	TimeToFirstTokenUS float64 `json:"time_to_first_token_us"`
	// ComputeFloorUS is the sum of the steps' compute floors
	// (timing.ComputeFloor: their tile products at the programs' math
	// fidelities over the worker cores), ComputeRatio TotalUS over it.
	ComputeFloorUS float64 `json:"compute_floor_us"`
	ComputeRatio   float64 `json:"compute_ratio"`
	// FloorUS is the sum of the steps' DRAM floors (timing.FloorBytesAt
	// at the physical DRAM bandwidth: every weight, the state and the KV
	// caches up to each step's last position once per step), FloorRatio
	// TotalUS over it.
	FloorUS    float64 `json:"floor_us"`
	FloorRatio float64 `json:"floor_ratio"`
	// FastForwarded counts the program times the timing model
	// fast-forwarded from simulations at smaller positions (programs that
	// read the position past its instruction budget).
	FastForwarded int `json:"fast_forwarded"`
	// SimulatedSteps of the steps were simulated, InterpolatedSteps
	// interpolated between them.
	SimulatedSteps    int           `json:"simulated_steps"`
	InterpolatedSteps int           `json:"interpolated_steps"`
	Builds            []promptBuild `json:"builds"`
	Segments          []promptStep  `json:"segments"`
	// ChunkCandidates are the chunks --prefill-chunk auto predicted the
	// prompt at, in ascending order; PrefillChunk is the fastest that fits.
	ChunkCandidates []chunkCandidate `json:"chunk_candidates,omitempty"`
}

// chunkCandidate is the prompt's prediction at one prefill chunk:
// TotalUS and TokensPerSecond as promptPerf's, or Fits false when its
// build does not fit the device's DRAM (then nothing was predicted).
type chunkCandidate struct {
	Chunk           int     `json:"chunk"`
	Fits            bool    `json:"fits"`
	TotalUS         float64 `json:"total_us,omitempty"`
	TokensPerSecond float64 `json:"tokens_per_second,omitempty"`
}

// maxAutoChunk is the longest step --prefill-chunk auto tries. At the
// full model a step of 4,096 tokens beats two of 2,048 by 7.5% (a
// 16,384-token prompt: 3.74 s against 4.02 s, predictions): each
// program's fixed cost and each step's weight reads are paid half as
// often. 8,192 gains 3.5% more (3.61 s) but its prediction takes twice the
// CPU (216 s against 107 s) and 2.0 GB against 1.1 GB.
const maxAutoChunk = 4096

// chunkCandidates are the chunks --prefill-chunk auto tries for a prompt
// of n tokens: 32, 64, 128, ... up to the first that takes the whole
// prompt in one step, at most maxAutoChunk.
func chunkCandidates(n int) []int {
	var out []int
	for c := ir.TileSize; c <= maxAutoChunk; c *= 2 {
		out = append(out, c)
		if c >= n {
			break
		}
	}
	return out
}

// chunkFlag is tcc perf's --prefill-chunk: a token count, or auto.
type chunkFlag struct{ o *promptOpts }

func (f *chunkFlag) String() string {
	if f.o == nil {
		return ""
	}
	if f.o.autoChunk {
		return "auto"
	}
	return strconv.Itoa(f.o.chunk)
}

func (f *chunkFlag) Set(s string) error {
	if s == "auto" {
		f.o.autoChunk = true
		return nil
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return fmt.Errorf("want a token count or auto")
	}
	f.o.chunk, f.o.autoChunk = n, false
	return nil
}

func (f *chunkFlag) Type() string { return "tokens|auto" }

// choosePrompt predicts the prompt at every chunk of chunkCandidates and
// returns the fastest prediction that fits the device's DRAM, with every
// candidate listed. It fails when none fits.
func choosePrompt(name string, mf *modelFlags, o promptOpts) (*promptPerf, error) {
	var best *promptPerf
	var cands []chunkCandidate
	var lastFit error
	for _, c := range chunkCandidates(o.tokens) {
		oc := o
		oc.chunk, oc.autoChunk = c, false
		pp, err := predictPrompt(name, mf, oc)
		var fit *dramFitError
		if errors.As(err, &fit) {
			cands = append(cands, chunkCandidate{Chunk: c})
			lastFit = err
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("--prefill-chunk auto: chunk %d: %w", c, err)
		}
		cands = append(cands, chunkCandidate{Chunk: c, Fits: true, TotalUS: pp.TotalUS, TokensPerSecond: pp.TokensPerSecond})
		if best == nil || pp.TotalUS < best.TotalUS {
			best = pp
		}
	}
	if best == nil {
		return nil, fmt.Errorf("--prefill-chunk auto: no chunk of %v fits: %w", chunkCandidates(o.tokens), lastFit)
	}
	best.ChunkCandidates = cands
	return best, nil
}

// promptBuild is one prefill build of a prompt's run: its length (Seq
// tokens per step), the steps it runs, its programs per device, the
// positions at which its step was simulated and its DRAM use.
type promptBuild struct {
	Seq                int            `json:"seq"`
	Steps              int            `json:"steps"`
	ProgramsPerDevice  int            `json:"programs_per_device"`
	SimulatedPositions []int          `json:"simulated_positions"`
	Memory             *timing.Memory `json:"memory,omitempty"`
}

// promptStep is one prefill step: it writes positions Position ..
// LastPosition (Tokens of them) and takes StepUS on the slowest device
// (DeviceStepUS per device); Simulated says the timing model simulated
// it, else it is interpolated linearly in position between the two
// simulated positions of its build around it.
type promptStep struct {
	Index        int       `json:"index"`
	Position     int       `json:"position"`
	LastPosition int       `json:"last_position"`
	Tokens       int       `json:"tokens"`
	StepUS       float64   `json:"step_us"`
	DeviceStepUS []float64 `json:"device_step_us"`
	Simulated    bool      `json:"simulated"`
	// ComputeFloorUS is the step's compute floor at its position,
	// FloorUS its DRAM floor.
	ComputeFloorUS float64 `json:"compute_floor_us"`
	FloorUS        float64 `json:"floor_us"`
}

// perfPrompt predicts a prompt of o.tokens tokens per user run as tcc run
// runs it: prefill steps of o.chunk tokens through one build, the rest
// through a second, each step at its own position.
func perfPrompt(w io.Writer, name string, mf *modelFlags, o promptOpts) error {
	predict := predictPrompt
	switch {
	case o.autoChunk:
		predict = choosePrompt
	case o.fromSeq && !o.chunkGiven:
		predict = defaultChunkPrompt
	}
	pp, err := predict(name, mf, o)
	if err != nil {
		return err
	}
	if o.format == "json" {
		b, err := json.MarshalIndent(pp, "", "  ")
		if err != nil {
			return err
		}
		_, err = w.Write(append(b, '\n'))
		return err
	}
	return pp.writeTable(w, o.collapse)
}

// defaultPerfChunk is the chunk tcc perf --mode prefill --seq N predicts
// a prompt in without --prefill-chunk: the longest --prefill-chunk auto
// tries, which it chose at 4,096 tokens (README, "What it predicts"): a
// longer step amortises every program's fixed cost and the weights' reads
// over more tokens, and its build's size does not grow with the prompt.
const defaultPerfChunk = maxAutoChunk

// defaultChunkPrompt predicts the prompt in chunks of defaultPerfChunk
// tokens, or of the longest of its halves (down to a tile) whose build
// fits the device's DRAM.
func defaultChunkPrompt(name string, mf *modelFlags, o promptOpts) (*promptPerf, error) {
	for c := defaultPerfChunk; ; c /= 2 {
		o.chunk = c
		pp, err := predictPrompt(name, mf, o)
		var fit *dramFitError
		if errors.As(err, &fit) && c/2 >= ir.TileSize {
			continue
		}
		return pp, err
	}
}

// flag names the prompt's length flag in messages: --seq or --prompt-tokens.
func (o promptOpts) flag() string {
	if o.fromSeq {
		return "--seq"
	}
	return "--prompt-tokens"
}

// checkPromptOpts refuses the flags that do not go with --prompt-tokens.
func checkPromptOpts(mf *modelFlags, o promptOpts, position, trace, threads bool) error {
	switch {
	case o.tokens < 1:
		return fmt.Errorf("%s %d: a prompt has at least one token", o.flag(), o.tokens)
	case o.chunk < 1 && !o.autoChunk:
		return fmt.Errorf("--prefill-chunk %d: a prefill step takes at least one token", o.chunk)
	case o.simulate == 1 || o.simulate < 0:
		return fmt.Errorf("--simulate-positions %d: simulate 0 (every step) or at least 2 positions per build (the first and the last step's, to interpolate between)", o.simulate)
	case o.format == "csv":
		return fmt.Errorf("--format csv writes one step's programs; with --prompt-tokens use table or json (or --seq N --position P for one step's csv)")
	case position:
		return fmt.Errorf("--prompt-tokens predicts every step at its own position (0, --prefill-chunk, ...); drop --position")
	case trace || threads:
		return fmt.Errorf("--trace and --threads show one step; with --prompt-tokens predict the step you want with --seq N --position P")
	case mf.flags.Changed("seq") && !o.fromSeq:
		return fmt.Errorf("--prompt-tokens runs steps of --prefill-chunk tokens; drop --seq (--seq N without --prompt-tokens predicts one prefill step of N tokens)")
	}
	return nil
}

// predictPrompt builds, compiles and predicts each prefill build of the
// prompt (at most two) at its steps' positions. It refuses a prompt
// longer than the KV cache and, as tcc perf does for one step, builds
// that do not fit the device's DRAM.
func predictPrompt(name string, mf *modelFlags, o promptOpts) (*promptPerf, error) {
	m, err := lookupModel(name)
	if err != nil {
		return nil, err
	}
	mesh, err := ir.ParseMesh(mf.mesh)
	if err != nil {
		return nil, err
	}
	args, err := mf.args(m)
	if err != nil {
		return nil, err
	}
	if err := mf.checkStage(); err != nil {
		return nil, err
	}
	if mode, ok := args["mode"]; !ok {
		return nil, fmt.Errorf("--prompt-tokens: model %s has no prefill step (no --mode parameter) to predict a prompt with", name)
	} else if mf.flags.Changed("mode") && mode != "prefill" {
		return nil, fmt.Errorf("--prompt-tokens predicts prefill steps: give --mode prefill (not %s) or leave --mode out", mode)
	}
	limit := 0
	if pl, ok := m.(interface {
		PositionLimit(models.Args) (int, error)
	}); ok {
		if limit, err = pl.PositionLimit(args); err != nil {
			return nil, err
		}
	}
	if limit > 0 && o.tokens > limit {
		return nil, fmt.Errorf("%s %d needs positions 0..%d, but the KV cache holds positions 0..%d (--max-seq %d); give --max-seq %d or more, or a shorter prompt",
			o.flag(), o.tokens, o.tokens-1, limit-1, limit, (o.tokens+ir.TileSize-1)/ir.TileSize*ir.TileSize)
	}
	batch := 1
	if v, ok := args["batch"]; ok {
		if batch, err = strconv.Atoi(v); err != nil {
			return nil, fmt.Errorf("--batch %q: not an integer", v)
		}
	}
	pp := &promptPerf{Model: name, Mesh: mesh.String(), Stage: mf.stage, Batch: batch, Mode: "prefill", MaxSeq: limit,
		PromptTokens: o.tokens, PrefillChunk: o.chunk}
	steps := prefillSteps(o.tokens, o.chunk)
	pp.Segments = make([]promptStep, len(steps))
	prm := timing.Default()
	pr := timing.NewPredictor(prm)
	pr.SetBudget(o.budget)
	// One build per distinct length, in the order the steps need them.
	var seqs []int
	bySeq := map[int][]int{} // step indices per length
	for i, st := range steps {
		if bySeq[st.Tokens] == nil {
			seqs = append(seqs, st.Tokens)
		}
		bySeq[st.Tokens] = append(bySeq[st.Tokens], i)
	}
	for _, n := range seqs {
		pargs := prefillArgs(args, n)
		g, err := m.Build(pargs, mesh)
		if err != nil {
			return nil, err
		}
		if _, err := mf.pipeline(g); err != nil {
			return nil, err
		}
		if err := mf.finish(m, pargs, g); err != nil {
			return nil, err
		}
		if _, err := checkDeviceMemory(name, m, mf, g); err != nil {
			return nil, err
		}
		t, err := mf.target()
		if err != nil {
			return nil, err
		}
		b, err := codegen.Compile(g, t)
		if err != nil {
			return nil, fmt.Errorf("the prefill build of %d tokens per step: %w", n, err)
		}
		idx := bySeq[n]
		pos := make([]int, len(idx))
		for j, i := range idx {
			pos[j] = steps[i].Pos
		}
		meta := timing.Meta{Model: name, Stage: mf.stage, Mode: "prefill", Batch: batch, MaxSeq: limit}
		times, sim, err := predictPositions(pos, o.simulate, func(p int) ([]float64, error) {
			tb, err := fromcodegen.BuildAt(b, timing.Step{Pos: p, Tokens: n})
			if err != nil {
				return nil, err
			}
			r, err := pr.Predict(tb, meta)
			if err != nil {
				return nil, err
			}
			return r.DeviceStepUS, nil
		})
		if err != nil {
			return nil, err
		}
		// The compute floor of each step: one conversion serves them all.
		fb, err := fromcodegen.BuildAt(b, timing.Step{Pos: 0, Tokens: n})
		if err != nil {
			return nil, err
		}
		pb := promptBuild{Seq: n, Steps: len(idx), ProgramsPerDevice: len(b.Programs), Memory: fromcodegen.Memory(b.Memory())}
		for j, i := range idx {
			st := promptStep{Index: i, Position: steps[i].Pos, LastPosition: steps[i].Pos + n - 1, Tokens: n,
				DeviceStepUS: times[j], Simulated: sim[j]}
			for _, us := range times[j] {
				st.StepUS = max(st.StepUS, us)
			}
			at := &timing.Step{Pos: st.Position, Tokens: n}
			cf, _ := timing.ComputeFloorAt(fb, prm, at)
			st.ComputeFloorUS = round3(cf)
			st.FloorUS = round3(float64(timing.FloorBytesAt(fb, at)) / prm.FloorBytesPerSecond * 1e6)
			if sim[j] {
				pb.SimulatedPositions = append(pb.SimulatedPositions, st.Position)
				pp.SimulatedSteps++
			} else {
				pp.InterpolatedSteps++
			}
			pp.Segments[i] = st
		}
		pp.Builds = append(pp.Builds, pb)
	}
	total := 0.0
	for _, st := range pp.Segments {
		total += st.StepUS
	}
	pp.TotalUS = round3(total)
	pp.TimeToFirstTokenUS = pp.TotalUS
	if total > 0 {
		pp.TokensPerSecond = round3(float64(batch*o.tokens) / (total / 1e6))
	}
	floor := 0.0
	for _, st := range pp.Segments {
		floor += st.ComputeFloorUS
	}
	pp.ComputeFloorUS = round3(floor)
	if floor > 0 {
		pp.ComputeRatio = round3(total / floor)
	}
	dram := 0.0
	for _, st := range pp.Segments {
		dram += st.FloorUS
	}
	pp.FloorUS = round3(dram)
	if dram > 0 {
		pp.FloorRatio = round3(total / dram)
	}
	pp.FastForwarded = pr.Extrapolated()
	return pp, nil
}

// predictPositions gives the device step times at each of the ascending
// positions pos, predicting (at) at most k of them (every one when k is 0
// or at least len(pos)): the first, the last and k-2 spread evenly between
// (by index). The times at every other position are interpolated, per
// device, linearly in position between the predicted positions on either
// side. A step's time is the sum of its programs' times and launch gaps,
// and each program's is interpolated with the same weights, so this is
// each program's time interpolated linearly and summed. sim[i] says
// position i was predicted.
func predictPositions(pos []int, k int, at func(pos int) ([]float64, error)) (times [][]float64, sim []bool, err error) {
	n := len(pos)
	times, sim = make([][]float64, n), make([]bool, n)
	if k <= 0 || k >= n {
		k = n
	}
	for i := 0; i < k; i++ {
		j := 0
		if k > 1 {
			j = int(math.Round(float64(i) * float64(n-1) / float64(k-1)))
		}
		sim[j] = true
	}
	for j := range pos {
		if !sim[j] {
			continue
		}
		if times[j], err = at(pos[j]); err != nil {
			return nil, nil, err
		}
	}
	lo := 0
	for j := range pos {
		if sim[j] {
			lo = j
			continue
		}
		hi := j + 1
		for !sim[hi] {
			hi++
		}
		f := float64(pos[j]-pos[lo]) / float64(pos[hi]-pos[lo])
		times[j] = make([]float64, len(times[lo]))
		for d := range times[j] {
			times[j][d] = round3(times[lo][d] + f*(times[hi][d]-times[lo][d]))
		}
	}
	return times, sim, nil
}

// writeTable prints the prompt's prediction: a header, its builds, the
// steps (with collapse, when there are more than 12, the first three,
// three between and the last two) and the total.
func (pp *promptPerf) writeTable(w io.Writer, collapse bool) error {
	limit := ""
	if pp.MaxSeq > 0 {
		limit = fmt.Sprintf(" (of --max-seq %d)", pp.MaxSeq)
	}
	fmt.Fprintf(w, "%s mesh %s, %s, prefill batch %d: a prompt of %d tokens as %s of at most %d tokens (--prefill-chunk)%s\n",
		pp.Model, pp.Mesh, pp.Stage, pp.Batch, pp.PromptTokens, plural(len(pp.Segments), "prefill step"), pp.PrefillChunk, limit)
	for _, b := range pp.Builds {
		how := fmt.Sprintf("simulated at its %s", plural(len(b.SimulatedPositions), "position"))
		if b.Steps > len(b.SimulatedPositions) {
			how = fmt.Sprintf("simulated at %d positions (%s), the other %d interpolated between them", len(b.SimulatedPositions), positionList(b.SimulatedPositions), b.Steps-len(b.SimulatedPositions))
		}
		fmt.Fprintf(w, "build prefill %d: %d programs per device, %s; %s\n", b.Seq, b.ProgramsPerDevice, plural(b.Steps, "step"), how)
		if m := b.Memory; m != nil {
			fmt.Fprintf(w, "  DRAM per device: weights %s, KV caches %s, state %s, other %s; total %s of %s\n",
				target.HumanBytes(m.Weights), target.HumanBytes(m.KV), target.HumanBytes(m.State), target.HumanBytes(m.Other), target.HumanBytes(m.Total), target.HumanBytes(m.Capacity))
		}
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 2, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "step\tpositions\ttokens\tus\t\t")
	prev := -1
	for _, i := range shownSteps(len(pp.Segments), collapse) {
		if i > prev+1 {
			fmt.Fprintf(tw, "...\t\t\t\t\t\n")
		}
		prev = i
		s := pp.Segments[i]
		how := "interpolated"
		if s.Simulated {
			how = "simulated"
		}
		fmt.Fprintf(tw, "%d\t%d..%d\t%d\t%.1f\t%s\t\n", s.Index, s.Position, s.LastPosition, s.Tokens, s.StepUS, how)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	note := "every step simulated"
	if pp.InterpolatedSteps > 0 {
		note = fmt.Sprintf("interpolated between %d simulated positions", pp.SimulatedSteps)
	}
	fmt.Fprintf(w, "\ntotal: %.1f ms predicted for the prompt's %d tokens per user: %.1f tokens/s (%s; %s)\n",
		pp.TotalUS/1000, pp.PromptTokens, pp.TokensPerSecond, plural(len(pp.Segments), "step"), note)
	if len(pp.ChunkCandidates) > 0 {
		var parts []string
		for _, c := range pp.ChunkCandidates {
			if !c.Fits {
				parts = append(parts, fmt.Sprintf("%d: does not fit", c.Chunk))
				continue
			}
			parts = append(parts, fmt.Sprintf("%d: %.1f ms", c.Chunk, c.TotalUS/1000))
		}
		fmt.Fprintf(w, "--prefill-chunk auto: %s; the fastest is %d\n", strings.Join(parts, ", "), pp.PrefillChunk)
	}
	fmt.Fprintf(w, "time to first token: %.1f ms predicted (the whole prompt's prefill: its last step's logits give the first token)\n", pp.TimeToFirstTokenUS/1000)
	if pp.ComputeFloorUS > 0 {
		fmt.Fprintf(w, "compute floor: %.1f ms (the steps' tile products at the programs' math fidelities on every worker core); predicted/compute floor = %.2f\n", pp.ComputeFloorUS/1000, pp.ComputeRatio)
	}
	if pp.FloorUS > 0 {
		fmt.Fprintf(w, "DRAM floor: %.1f ms (each step's weights, state and KV caches up to its last position read once at 512 GB/s); predicted/DRAM floor = %.2f\n", pp.FloorUS/1000, pp.FloorRatio)
	}
	if pp.FastForwarded > 0 {
		fmt.Fprintf(w, "%s fast-forwarded from simulations at smaller positions (past the timing model's instruction budget; --simulate-budget)\n", plural(pp.FastForwarded, "program time"))
	}
	return nil
}

// shownSteps are the indices of the n steps the table lists: all of them,
// or with collapse and more than 12, the first three, three spread
// between and the last two.
func shownSteps(n int, collapse bool) []int {
	if !collapse || n <= 12 {
		idx := make([]int, n)
		for i := range idx {
			idx[i] = i
		}
		return idx
	}
	idx := []int{0, 1, 2}
	for i := 1; i <= 3; i++ {
		idx = append(idx, 2+i*(n-4)/4)
	}
	return append(idx, n-2, n-1)
}

// positionList names positions as "0, 512, 1024", or with more than six
// the first three, "...", and the last.
func positionList(pos []int) string {
	var parts []string
	for i, p := range pos {
		if len(pos) > 6 && i == 3 {
			parts = append(parts, "...")
		}
		if len(pos) > 6 && i >= 3 && i < len(pos)-1 {
			continue
		}
		parts = append(parts, strconv.Itoa(p))
	}
	return strings.Join(parts, ", ")
}

// plural is "1 step", "2 steps".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// round3 rounds x to three decimals (the timing reports' precision).
func round3(x float64) float64 { return math.Round(x*1000) / 1000 }
