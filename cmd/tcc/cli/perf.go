package cli

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/tcc-dev/tcc/codegen"
	"github.com/tcc-dev/tcc/codegen/persist"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/models"
	"github.com/tcc-dev/tcc/sim/timing"
	"github.com/tcc-dev/tcc/sim/timing/fromcodegen"
)

func newPerfCmd() *cobra.Command {
	var format, trace, threads, positions string
	var params, collapse, persistent bool
	var position int
	var po promptOpts
	cmd := &cobra.Command{
		Use:   "perf MODEL",
		Short: "Predict every program's device time from its kernel IR, per kind, per layer and per step",
		Long: `Compile MODEL and predict the device time of one step with the timing model
(sim/timing): every core's reader, compute, writer and ethernet kernels run
their statements as events (NoC reads in flight until a barrier, CB flow,
semaphores, ethernet handshakes, compute by instruction and fidelity), bounded
by DRAM banks, NoC ports and ethernet links, plus the fixed per-program cost
and the launch gap. Layers that differ only in addresses are simulated once.

  tcc perf qwen27b --mesh 1x2 --stage fused
  tcc perf qwen27b --mesh 1x2 --stage unfused --format json
  tcc perf qwen27b --mesh 1x2 --format csv > perf.csv      # tt-metal's ops_perf_results columns
  tcc perf qwen27b --mesh 1x2 --trace step.json           # open in ui.perfetto.dev
  tcc perf qwen27b --mesh 1x2 --threads rms_norm          # where one program's time goes
  tcc perf qwen27b --mesh 1x2 --max-seq 4096 --position 127   # the step at position 127
  tcc perf qwen27b --mesh 1x2 --batch 3 --positions 5,900,4000 # users at different positions
  tcc perf qwen27b --mesh 1x2 --mode prefill --seq 16384   # a whole prompt of 16,384 tokens in steps of 4,096
  tcc perf qwen27b --mesh 1x2 --mode prefill --max-seq 4096 --prompt-tokens 4096   # a prompt as tcc run runs it
  tcc perf --params                                       # the model's parameters

--position P predicts the step at position P: the decode step that writes
position P and attends to positions 0..P (prefill: the step writing P..P+seq-1).
The kernels read the position from the device's position buffer at run time, as
on the card, so the prediction runs their loops as at P; the DRAM floor counts the
KV caches up to P (whole tiles of 32 rows). Default: the last position of the KV
cache (--max-seq - 1; prefill: --max-seq - seq), the most expensive step; the
header says which. A position past the cache is an error.

--positions P0,P1,... (decode) predicts the step with user b at position Pb:
one value per user (--batch of them), each in 0..--max-seq - 1; user b writes
its row at Pb and attends to 0..Pb, and the floor counts each user's KV cache
up to its own position. The header then lists the positions; position and
last_position are the largest. Not with --position.

--mode prefill --seq N predicts the whole prompt of N tokens per user (item 7
of issue 31): prefill steps of --prefill-chunk tokens (default 4096, halved
until the step's build fits the device's DRAM; a last, shorter step takes the
rest), each at its own position, with --max-seq defaulting to N rounded up to
whole tiles of 32. It prints the time to first token (the whole prefill),
tokens per second, and the compute floor beside the DRAM floor. One step of N
tokens is --seq N --prefill-chunk N (at position 0), or --seq N --position P
(the step writing P..P+N-1, the single-step report); --trace, --threads,
--format csv and --persistent show one step too (at the default position).

--prompt-tokens N predicts a whole prompt of N tokens per user run as tcc run
runs it: prefill steps of --prefill-chunk tokens (default 64) through one build,
then the rest through a second build of its length, each step at its own
position (0, C, 2C, ...; the remainder's after the last chunk): attention grows
with the position, the rest does not. Both forms print each build, the steps
(first, last and a few between when there are more than 12; --collapse=false
lists all), the total predicted time and tokens per second. The timing model
simulates each build at up to --simulate-positions positions (default 9: the
first, the last and some spread between; 0: every step) and interpolates the
steps between them linearly in position, which the output says; only the
programs that read the position are simulated again at another position. A
program that reads the position and would run more than --simulate-budget
kernel instructions there (default 100,000,000, about 5 CPU-s) is
fast-forwarded: simulated in full at two smaller positions of the same residue
modulo 1,024 and its time, bytes and finishes continued linearly in position
from them (exact where the extra loop iterations are identical; -1 simulates
everything). N must fit --max-seq; with --prompt-tokens, --seq and --position
do not go with it. With --format json it prints model, mesh, stage, batch,
mode, max_seq, prompt_tokens, prefill_chunk, total_us, tokens_per_second
(batch * N per second), time_to_first_token_us (total_us: the last step's
logits give the first token), compute_floor_us (the steps' compute floors) and
compute_ratio (total_us over it), floor_us (the steps' DRAM floors: weights,
state and KV caches up to each step's last position at 512 GB/s) and
floor_ratio, fast_forwarded (program times fast-forwarded), simulated_steps,
interpolated_steps, builds[] {seq, steps, programs_per_device,
simulated_positions, memory} and segments[] {index, position, last_position,
tokens, step_us, device_step_us, simulated, compute_floor_us, floor_us}.

--prefill-chunk auto lets the timing model choose the chunk: it predicts the
prompt at 32, 64, 128, ... tokens per step (up to the first that takes the
whole prompt in one step, at most 4096), skips those whose build does not fit
the device's DRAM, and prints the fastest, with a line listing every
candidate's total (json: chunk_candidates[] {chunk, fits, total_us,
tokens_per_second}; prefill_chunk is the one chosen). Each candidate is a whole
prediction, so it takes several times as long as one chunk.

The header also prints what the build's buffers take of each device's DRAM
(weights, KV caches, state, other, total of the capacity); a build that does
not fit is refused before it is compiled (rule dram-capacity), saying what fits.

--format json prints the object other tools read: model, mesh, stage, batch, mode,
position and last_position (-1 for a model without one), positions (decode:
each user's; prefill: [position]; [] without one), max_seq, devices,
step_us (slowest device), floor_us (bytes each device must stream / 512 GB/s),
floor_bytes, compute_floor_us (the compute floor: the step's 32x32x32 tile
products of matmul, bmm and attention, tile_products, at each program's math
fidelity over every worker core), compute_ratio (step_us over it), memory {weights, kv, state, other, total, capacity, free} (bytes per
device), launch_us_total, kinds[] and programs[].

--format csv writes tt-metal's device profiler report (ops_perf_results, its
Blackhole column set and value forms: GLOBAL CALL COUNT as op id << 10 | device,
MATH FIDELITY as HiFi4, tensors as INPUT_n_{W,Z,Y,X}_PAD[LOGICAL], _LAYOUT,
_DATATYPE, _MEMORY, OP TO OP LATENCY, per-RISC kernel durations, PM IDEAL,
DEVICE ARCH), one row per program per device, so tt-perf-report reads it and a
measured CSV joins with it; tcc's columns follow (TCC LAYER, ...). The forms
are listed in package sim/timing (output_csv.go).`,
		Args: func(cmd *cobra.Command, args []string) error {
			if params {
				return cobra.NoArgs(cmd, args)
			}
			return cobra.ExactArgs(1)(cmd, args)
		},
	}
	mf := addModelFlags(cmd, "fused")
	mf.addSFPU()
	mf.addTopology()
	cmd.Flags().StringVar(&format, "format", "table", "output format: table, json or csv")
	cmd.Flags().StringVar(&trace, "trace", "", "also write a Chrome/Perfetto trace-event JSON of one step to this file")
	cmd.Flags().StringVar(&threads, "threads", "", "instead of the table, print each kernel's latest thread (core, finish, waits) of the first program of this op")
	cmd.Flags().BoolVar(&persistent, "persistent", false, "predict the step run as ONE persistent program (codegen/persist: the programs as phases synchronised by dataflow, one launch) instead of one launch per program")
	cmd.Flags().BoolVar(&params, "params", false, "print the timing model's parameters (fitted ones marked) and exit")
	addCollapseFlag(cmd, &collapse)
	cmd.Flags().IntVar(&po.tokens, "prompt-tokens", 0, "predict a whole prompt of this many tokens per user, run as prefill steps of --prefill-chunk tokens at their positions (as tcc run runs it)")
	po.chunk = defaultPrefillChunk
	cmd.Flags().Var(&chunkFlag{&po}, "prefill-chunk", "with a whole prompt (--mode prefill --seq N, or --prompt-tokens N): the most prompt tokens one prefill step takes (tcc run's --prefill-chunk; default 4096 for --seq, 64 for --prompt-tokens), or auto: the fastest of 32, 64, 128, ... tokens that fits")
	cmd.Flags().IntVar(&po.simulate, "simulate-positions", defaultSimulatePositions, "with a whole prompt: the most positions each prefill build is simulated at, the steps between interpolated linearly in position (0: simulate every step)")
	cmd.Flags().Int64Var(&mf.budget, "simulate-budget", timing.DefaultSimulateBudget, "the most kernel instructions one program's simulation at one position may be estimated to take; a program that reads the position and would take more is fast-forwarded from two simulations at smaller positions (-1: simulate every program in full)")
	cmd.Flags().IntVar(&position, "position", -1, "predict the step at this position (decode: the position it writes and attends up to; prefill: its first); default the last position of --max-seq")
	cmd.Flags().StringVar(&positions, "positions", "", "decode: predict the step with each user at its own position, P0,P1,... (one per user of --batch); not with --position")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		out := cmd.OutOrStdout()
		if params {
			return writeParams(out, timing.Default())
		}
		if format != "table" && format != "json" && format != "csv" {
			return fmt.Errorf("unknown --format %q (want table, json or csv)", format)
		}
		if trace != "" {
			if err := checkWritable(trace); err != nil {
				return err
			}
		}
		if persistent && (cmd.Flags().Changed("prompt-tokens") || threads != "") {
			return fmt.Errorf("--persistent predicts one step as one program: not with --prompt-tokens or --threads")
		}
		f := cmd.Flags()
		po.budget = mf.budget
		if !f.Changed("prompt-tokens") && isPrefill(mf) && !f.Changed("position") && !f.Changed("positions") && !persistent &&
			trace == "" && threads == "" && format != "csv" {
			// --mode prefill --seq N: the whole prompt of N tokens.
			if err := seqPrompt(args[0], mf, &po); err != nil {
				return err
			}
			po.chunkGiven = f.Changed("prefill-chunk")
		}
		if f.Changed("prompt-tokens") || po.fromSeq {
			po.format = format
			po.collapse = !f.Changed("collapse") || collapse
			if err := checkPromptOpts(mf, po, f.Changed("position"), trace != "", threads != ""); err != nil {
				return err
			}
			return perfPrompt(out, args[0], mf, po)
		}
		for _, name := range []string{"prefill-chunk", "simulate-positions"} {
			if cmd.Flags().Changed(name) {
				return fmt.Errorf("--%s goes with a whole prompt (--mode prefill --seq N, or --prompt-tokens N); tcc perf here predicts one step", name)
			}
		}
		if cmd.Flags().Changed("position") && position < 0 {
			return fmt.Errorf("--position %d: a position is 0 or more", position)
		}
		var users []int
		if cmd.Flags().Changed("positions") {
			if cmd.Flags().Changed("position") {
				return fmt.Errorf("--position and --positions: give one (--positions sets each user's position)")
			}
			var err error
			if users, err = parsePositions(positions); err != nil {
				return err
			}
		}
		m, g, _, err := mf.graphFor(args[0])
		if err != nil {
			return err
		}
		if _, err := checkDeviceMemory(args[0], m, mf, g); err != nil {
			return err
		}
		rep, err := perfReportOpts(args[0], m, mf, g, position, users, persistent)
		if err != nil {
			return err
		}
		if trace != "" {
			tr, err := rep.Trace()
			if err != nil {
				return err
			}
			if err := codegen.WriteFileAtomic(trace, tr); err != nil {
				return err
			}
		}
		if threads != "" {
			return rep.WriteThreads(out, threads)
		}
		switch format {
		case "json":
			b, err := rep.JSON()
			if err != nil {
				return err
			}
			_, err = out.Write(b)
			return err
		case "csv":
			return rep.WriteCSV(out)
		}
		return rep.WriteTableOpts(out, timing.TableOptions{PerLayer: true, Collapse: collapseOn(cmd, collapse)})
	}
	return cmd
}

// perfReportOpts compiles g and predicts its step at position (-1: the
// default, stepAt), or with users (non-nil) each user's position, as one
// persistent program when persistent is set.
func perfReportOpts(name string, m models.Model, mf *modelFlags, g *ir.Graph, position int, users []int, persistent bool) (*timing.Report, error) {
	// The position first: a wrong one is refused before the compile.
	if _, _, err := stepAt(m, mf, g, position, users); err != nil {
		return nil, err
	}
	t, err := mf.target()
	if err != nil {
		return nil, err
	}
	b, err := codegen.Compile(g, t)
	if err != nil {
		return nil, err
	}
	return predictBuildOpts(name, m, mf, b, position, users, persistent)
}

// isPrefill reports whether the flags ask for the prefill step (--mode
// prefill).
func isPrefill(mf *modelFlags) bool {
	v, ok := mf.params["mode"]
	return ok && mf.flags.Changed("mode") && v.s == "prefill"
}

// seqPrompt makes --mode prefill --seq N a whole prompt of N tokens
// (--seq's default without it) in o, and gives --max-seq, when not set,
// N rounded up to whole tiles: the cache the prompt fills.
func seqPrompt(name string, mf *modelFlags, o *promptOpts) error {
	m, err := lookupModel(name)
	if err != nil {
		return err
	}
	args, err := mf.args(m)
	if err != nil {
		return err
	}
	seq := args["seq"]
	n, err := strconv.Atoi(seq)
	if err != nil {
		return fmt.Errorf("--seq %q: not an integer", seq)
	}
	if n < 1 {
		return fmt.Errorf("--seq %d: a prompt has at least one token", n)
	}
	o.tokens, o.fromSeq = n, true
	if !mf.flags.Changed("prompt-tokens") && !mf.flags.Changed("prefill-chunk") {
		o.chunk = defaultPerfChunk
	}
	if !mf.flags.Changed("max-seq") {
		if err := mf.flags.Set("max-seq", strconv.Itoa((n+ir.TileSize-1)/ir.TileSize*ir.TileSize)); err != nil {
			return err
		}
	}
	return nil
}

// parsePositions parses --positions: comma-separated positions, each 0 or
// more (stepAt checks their count and the cache).
func parsePositions(s string) ([]int, error) {
	var ps []int
	for i, f := range strings.Split(s, ",") {
		p, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || p < 0 {
			return nil, fmt.Errorf("--positions %q: value %d (%q) is not a position (an integer 0 or more)", s, i, f)
		}
		ps = append(ps, p)
	}
	return ps, nil
}

// predictBuildOpts predicts b's step with the model's batch and mode at
// position (-1: the default, stepAt), or with users each user's; as one
// persistent program (timing.PredictPersistent) when persistent is set.
func predictBuildOpts(name string, m models.Model, mf *modelFlags, b *codegen.Build, position int, users []int, persistent bool) (*timing.Report, error) {
	args, err := mf.args(m)
	if err != nil {
		return nil, err
	}
	meta := timing.Meta{Model: name, Stage: mf.stage, Mode: "decode", Batch: 1}
	if v, ok := args["mode"]; ok {
		meta.Mode = v
	}
	if v, ok := args["batch"]; ok {
		if n, err := strconv.Atoi(v); err == nil {
			meta.Batch = n
		}
	}
	st, limit, err := stepAt(m, mf, b.Graph, position, users)
	if err != nil {
		return nil, err
	}
	predict := func(tb *timing.Build) (*timing.Report, error) {
		if !persistent {
			pr := timing.NewPredictor(timing.Default())
			pr.SetBudget(mf.budget)
			return pr.Predict(tb, meta)
		}
		prog, _, err := persist.Build(b)
		if err != nil {
			return nil, err
		}
		return timing.PredictPersistent(tb, prog, timing.Default(), meta)
	}
	if st == nil {
		return predict(fromcodegen.Build(b))
	}
	meta.MaxSeq, meta.DefaultPosition = limit, position < 0 && users == nil
	tb, err := fromcodegen.BuildAt(b, *st)
	if err != nil {
		return nil, err
	}
	return predict(tb)
}

// stepAt is the step predicted at position (-1: the default, the last
// position of the KV cache: --max-seq - 1 in decode, --max-seq - seq in
// prefill) and the KV cache's length (the model's PositionLimit, else the
// longest KV cache of g). It is nil for a graph without a position input
// (codegen.PositionInputs), where --position is an error. A step whose
// positions run past the cache is an error naming both. users, when
// non-nil (--positions), are each user's position in decode: one per user
// of the batch, each in the cache; the step's Pos is their largest.
func stepAt(m models.Model, mf *modelFlags, g *ir.Graph, position int, users []int) (*timing.Step, int, error) {
	if len(codegen.PositionInputs(g)) == 0 {
		flag := fmt.Sprintf("--position %d", position)
		if users != nil {
			flag = "--positions"
		}
		if position >= 0 || users != nil {
			return nil, 0, fmt.Errorf("%s: %s's graph has no position input (no KV cache), so there is no position to predict at", flag, g.Name)
		}
		return nil, 0, nil
	}
	args, err := mf.args(m)
	if err != nil {
		return nil, 0, err
	}
	limit := 0
	if pl, ok := m.(interface {
		PositionLimit(models.Args) (int, error)
	}); ok {
		if limit, err = pl.PositionLimit(args); err != nil {
			return nil, 0, err
		}
	} else {
		for v := range codegen.KVCaches(g) {
			if sh := v.Type.Shape; sh.Rank() == 4 {
				limit = max(limit, sh[2])
			}
		}
	}
	st := &timing.Step{Pos: position, Tokens: 1}
	prefill := args["mode"] == "prefill"
	if prefill {
		if st.Tokens, err = strconv.Atoi(args["seq"]); err != nil {
			return nil, 0, fmt.Errorf("prefill --seq %q: %v", args["seq"], err)
		}
	}
	if users != nil {
		return usersStep(args, users, limit, prefill)
	}
	if position < 0 {
		st.Pos = limit - st.Tokens
	}
	switch {
	case limit <= 0:
		return st, limit, nil // no cache length known: any position
	case prefill && st.Last() >= limit:
		return nil, 0, fmt.Errorf("--position %d with --seq %d writes positions %d..%d, but the KV cache holds positions 0..%d (--max-seq %d); the last prefill position is %d",
			st.Pos, st.Tokens, st.Pos, st.Last(), limit-1, limit, limit-st.Tokens)
	case st.Pos >= limit:
		return nil, 0, fmt.Errorf("--position %d is past the KV cache: --max-seq %d holds positions 0..%d", st.Pos, limit, limit-1)
	}
	return st, limit, nil
}

// usersStep is the decode step with user b at users[b] (--positions),
// after checking one position per user of the batch (args["batch"],
// default 1), each in the cache of limit positions (0: unknown).
func usersStep(args models.Args, users []int, limit int, prefill bool) (*timing.Step, int, error) {
	if prefill {
		return nil, 0, fmt.Errorf("--positions: a prefill step starts every user at one position; use --position")
	}
	batch := 1
	if v, ok := args["batch"]; ok {
		n, err := strconv.Atoi(v)
		if err != nil {
			return nil, 0, fmt.Errorf("--batch %q: %v", v, err)
		}
		batch = n
	}
	if len(users) != batch {
		return nil, 0, fmt.Errorf("--positions: %d positions for %d users (--batch %d); give one per user", len(users), batch, batch)
	}
	st := &timing.Step{Tokens: 1, Users: slices.Clone(users), Pos: slices.Max(users)}
	for u, p := range users {
		if limit > 0 && p >= limit {
			return nil, 0, fmt.Errorf("--positions: user %d at position %d is past the KV cache: --max-seq %d holds positions 0..%d", u, p, limit, limit-1)
		}
	}
	return st, limit, nil
}

func writeParams(w io.Writer, p *timing.Params) error {
	tw := tabwriter.NewWriter(w, 0, 2, 2, ' ', 0)
	fmt.Fprintln(tw, "parameter\tvalue\tunit\tfitted\tsource")
	for _, r := range p.Table() {
		fitted := ""
		if r.Fitted {
			fitted = "fitted"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Name, r.Value, r.Unit, fitted, r.Source)
	}
	return tw.Flush()
}

// checkWritable fails early when path's directory does not exist or is not writable.
func checkWritable(path string) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, ".tcc-write-check-")
	if err != nil {
		return fmt.Errorf("cannot write %s: %v", path, err)
	}
	name := f.Name()
	f.Close()
	return os.Remove(name)
}
