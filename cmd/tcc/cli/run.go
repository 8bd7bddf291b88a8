package cli

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tcc-dev/tcc/codegen"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/ir/numerics"
	"github.com/tcc-dev/tcc/ir/sfpu"
	"github.com/tcc-dev/tcc/models"
	"github.com/tcc-dev/tcc/models/checkpoint"
	"github.com/tcc-dev/tcc/runtime"
	"github.com/tcc-dev/tcc/sim/ref"
)

// runFlags are the flags of `tcc run`.
type runFlags struct {
	// sfpu is --sfpu's code: the same-formats references follow it.
	sfpu sfpu.Code
	// rowSplits are the split-row norms of the run's builds (addRowSplits),
	// which the same-formats references follow (shared by the copies).
	rowSplits     map[*ir.Op]ref.RowSplit
	backend       string
	chipTimeout   time.Duration
	ttsim         string
	chip          int
	check         bool
	seed          int64
	threshold     float64
	fp32Threshold float64
	// programThreshold: the per-program check (programCheck).
	programThreshold float64
	steps            int
	prefill          int
	// prefillChunk is the most prompt tokens one prefill step takes
	// (--prefill-chunk; prefillSegments).
	prefillChunk int
	hostGB       float64
	weights      string
	allowNF      bool
	progress     io.Writer // estimates and progress of long steps (stderr)
	// Text in, text out: the prompt (--prompt or --prompt-file; hasPrompt
	// when either is given), --chat and --tokenizer.
	prompt, promptFile, tokenizer string
	hasPrompt, chat               bool
	prefillSet                    bool // --prefill given
	// persistent runs each step as one persistent program (codegen/persist).
	persistent bool
	// chipDump is --chip-dump: the directory both sides of every buffer
	// that differs on the chip are written to (dumpCompared).
	chipDump string
}

func newRunCmd() *cobra.Command {
	var rf runFlags
	cmd := &cobra.Command{
		Use:   "run MODEL",
		Short: "Compile a model and run decode steps on a backend (default: the simulator)",
		Long: `Compile MODEL through the pipeline, load its programs on every device of the
mesh, upload deterministic random weights (each device its shard), and run
--prefill tokens through the prefill build (models that have one) followed by
--steps greedy decode steps, program by program, the state kept on the device.

A prompt longer than --prefill-chunk (default 64) runs as prefill steps of
that many tokens, each writing its K/V rows at its positions and carrying the
GDN conv and recurrent state to the next, all through one prefill build; the
tokens left over run through a second build of their length. The builds do
not grow with the prompt: a 10,000-token prompt compiles what a 64-token one
does (and at most one shorter build).

With --check, every step's outputs are compared with the reference evaluator
at the same storage formats on the compiled (fused) graph, starting from the
state the device holds before the step; and the graph as the model wrote it,
before any pass, is evaluated from the same state and compared with the
compiled graph evaluated at its fused ops' decompositions' rounding points
(the "unfused" row: a rule that changes what is computed fails it; both at
--threshold): the logits' PCC and max relative error are
printed per step and the next tokens must match (unless the reference's top two
logits nearly tie: within 4 ulps of the logits' dtype at the top logit). After
each step the state the step wrote (recurrent and conv states, the KV-cache
rows of the step's positions) is compared with the same-formats reference's,
PCC per buffer at --threshold, one summary line per step. And every program is
checked on its own inputs: the operands it reads are read back from the device
just before it runs, the reference evaluates the op it implements on them, and
its results must equal the device's bit for bit (the reference models each
program's data path; the decode attention, flash decoding, rounds in its own
chunked order and agrees within that rounding); a program that differs is
listed with how many elements do, and fails below PCC --program-threshold
(one "programs:" line per step).
A free-running reference that carries its own state from
the first step is printed too, for information: it shows the drift. The logits are also compared with an
fp32 reference (fp32 math, no activation rounding, on the weight values as
stored) at --fp32-threshold, and, for information, with fp32 math on the
unquantized weights (that gap is the weight formats', e.g. bfp4_b's). tcc exits
with status 2 when a threshold is missed.

With --prompt TEXT (or --prompt-file FILE) the run starts from the prompt,
one user (--batch 1), tokenized with the checkpoint's tokenizer.json (in
--weights DIR, or --tokenizer FILE; Hugging Face byte-level BPE, as Qwen
ships it): the prompt runs through the prefill build, then greedy decode
steps, and the generated text streams to stdout as the tokens come (every
other line goes to stderr), up to --steps + 1 tokens (the prefill's next
token and one per decode step), stopping at the end-of-sequence token
(tokenizer_config.json's eos_token, generation_config.json's eos_token_id).
--chat wraps the prompt in Qwen's ChatML template as one user turn ending
in the assistant's (<|im_start|>user\n...<|im_end|>\n<|im_start|>assistant\n)
and also stops at <|im_end|>. With --check the report stays on stdout, each
step's token and text on its own line and the whole text at the end.

  tcc run tiny-mlp --backend sim --check
  tcc run qwen27b --config models/qwen27b/testdata/small.json --mesh 1x2 --check --prefill 8 --steps 16
  tcc run qwen27b --weights DIR --prompt "hello world" --steps 32`,
		Args: cobra.ExactArgs(1),
	}
	mf := addModelFlags(cmd, "fused")
	mf.addSFPU()
	mf.addTopology()
	fs := cmd.Flags()
	fs.StringVar(&rf.backend, "backend", "sim", "where programs run: sim (built-in simulator), ttsim (Tenstorrent's chip model: every program also runs there and is compared with the simulator; needs --ttsim and TT_METAL_HOME) or blackhole (cards)")
	fs.DurationVar(&rf.chipTimeout, "chip-timeout", 30*time.Second, "with --backend ttsim or blackhole: the watchdog's bound on firmware init, each program and each step of a persistent launch; on ttsim simulated time (the cycles the chip runs at its 1.35 GHz clock, whatever the host's load), "+ttsimTimeout.String()+" unless given")
	fs.StringVar(&rf.ttsim, "ttsim", "", "the libttsim.so of --backend ttsim (default $TT_METAL_SIMULATOR)")
	fs.IntVar(&rf.chip, "chip", 0, "with --backend ttsim and --mesh 1x1: the chip of the library's configuration the programs run on (ttsim's bh_x2 has chips 0 and 1; tcc devices lists them)")
	fs.StringVar(&rf.chipDump, "chip-dump", "", "with --backend ttsim or blackhole: a directory to write, for every launch whose buffer differs from the simulator on the elements it defines, the buffer's page bytes on both sides (NAME.chip, NAME.sim) and the differing elements (NAME.txt)")
	fs.BoolVar(&rf.check, "check", false, "compare outputs with the reference evaluator and fail below the thresholds")
	fs.Int64Var(&rf.seed, "seed", 1, "seed of the random weights and of the users' tokens (each user its own stream)")
	fs.Float64Var(&rf.threshold, "threshold", 0.999, "minimum logits PCC against the reference at the same formats")
	fs.Float64Var(&rf.fp32Threshold, "fp32-threshold", 0.99, "minimum logits PCC against the fp32 reference")
	fs.Float64Var(&rf.programThreshold, "program-threshold", 0.99999, "minimum PCC of each program's results against the same-formats reference fed the program's own operands")
	fs.IntVar(&rf.steps, "steps", 1, "decode steps to run")
	fs.IntVar(&rf.prefill, "prefill", 0, "prompt tokens run through the prefill build first (0: none)")
	fs.IntVar(&rf.prefillChunk, "prefill-chunk", defaultPrefillChunk, "the most prompt tokens one prefill step takes: a longer prompt runs as steps of this many tokens through one prefill build, then the rest through a build of its length")
	fs.StringVar(&rf.weights, "weights", "", "weights to run instead of random ones: a `DIR` holding a cache from tcc weights convert (checked against this build) or a checkpoint (converted in memory); without --config the model config is the one in it (config.json)")
	fs.BoolVar(&rf.allowNF, "allow-nonfinite", false, "with --weights DIR: convert NaN and Inf checkpoint values as they are instead of failing")
	fs.StringVar(&rf.prompt, "prompt", "", "text to start from: tokenized with the tokenizer.json of --weights DIR (or --tokenizer), prefilled, then the generated text streams to stdout")
	fs.StringVar(&rf.promptFile, "prompt-file", "", "like --prompt, the text read from a file")
	fs.BoolVar(&rf.chat, "chat", false, "with --prompt: apply Qwen's ChatML chat template (one user turn, then the assistant's) and stop at <|im_end|>")
	fs.StringVar(&rf.tokenizer, "tokenizer", "", "with --prompt: the tokenizer.json to use (default: the one in --weights DIR)")
	fs.BoolVar(&rf.persistent, "persistent", false, "run each step as ONE persistent program (the step's programs as phases that synchronise by dataflow, codegen/persist) launched once per step; with a device-loop graph (--device-loop) ALL --steps decode steps run in ONE launch (the kernels loop over the steps; the host reads each step's tokens from the device's token history after it; on --backend ttsim or blackhole the chip runs the program tcc build --persistent prints, built by the JIT, and every step's tokens are compared with the simulator's); without --device-loop built-in simulator only; --check then compares outputs and state per step (in one launch: every step's tokens, the last step's logits and the final state), not each program")
	fs.Float64Var(&rf.hostGB, "host-memory-gb", 0, "host memory the run may use, in GB (0: what the machine has available); a run estimated to need more is refused before it allocates")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		rf.progress = cmd.ErrOrStderr()
		f := cmd.Flags()
		rf.hasPrompt = f.Changed("prompt") || f.Changed("prompt-file")
		rf.prefillSet = f.Changed("prefill")
		if rf.backend == "ttsim" && !f.Changed("chip-timeout") {
			rf.chipTimeout = ttsimTimeout
		}
		return runModel(cmd.OutOrStdout(), mf, args[0], rf)
	}
	return cmd
}

// ttsimTimeout is --chip-timeout's default on ttsim, in simulated time
// (135M cycles of the card's clock): far beyond what a program of the
// configs tcc runs there takes, short enough that a program that hangs
// is reported within minutes of the host's time, not hours (30 s of
// simulated time would be 40.5G cycles).
const ttsimTimeout = 100 * time.Millisecond

// stepGraph is one compiled graph (prefill or decode) of a run.
type stepGraph struct {
	name  string
	args  models.Args
	graph *ir.Graph
	// unfused is the same step as the model writes it, before any pass: the
	// reference that can see a wrong fusion.
	unfused *ir.Graph
	build   *codegen.Build
	exe     *runtime.Executable
	// programs checks each program on its own inputs (--check).
	programs *programCheck
}

// sameFormats is the reference options that follow the device's formats,
// SFPU code and split-row norms.
func (rf runFlags) sameFormats() ref.Options {
	o := ref.DefaultOptions()
	o.SFPU = rf.sfpu
	splits := rf.rowSplits
	o.RowSplit = func(op *ir.Op) ref.RowSplit { return splits[op] }
	return o
}

// addRowSplits records in m the chunking of b's split-row norm programs
// (kir.Program.RowSplit) by their op.
func addRowSplits(m map[*ir.Op]ref.RowSplit, b *codegen.Build) {
	for _, p := range b.Programs {
		if p.Kernel.RowSplit != nil {
			m[p.Op] = b.RowSplit(p.Op)
		}
	}
}

func runModel(w io.Writer, mf *modelFlags, name string, rf runFlags) error {
	code, err := mf.sfpuCode()
	if err != nil {
		return err
	}
	rf.sfpu = code
	rf.rowSplits = map[*ir.Op]ref.RowSplit{}
	if rf.steps < 1 {
		return fmt.Errorf("--steps %d: run at least one decode step", rf.steps)
	}
	if rf.prefill < 0 {
		return fmt.Errorf("--prefill %d: the prompt length must be 0 (no prefill) or more", rf.prefill)
	}
	if rf.prefillChunk < 1 {
		return fmt.Errorf("--prefill-chunk %d: a prefill step takes at least one token", rf.prefillChunk)
	}
	for _, th := range []struct {
		flag string
		v    float64
	}{{"--threshold", rf.threshold}, {"--fp32-threshold", rf.fp32Threshold}, {"--program-threshold", rf.programThreshold}} {
		if !(th.v > 0 && th.v <= 1) { // also rejects NaN
			return fmt.Errorf("%s %v: a PCC threshold must be in (0, 1]", th.flag, th.v)
		}
	}
	if err := checkPromptFlags(rf); err != nil {
		return err
	}
	if err := configFromWeights(rf.progress, mf, name, rf.weights); err != nil {
		return err
	}
	var pr *promptRun
	if rf.hasPrompt {
		var err error
		if pr, err = loadPrompt(rf); err != nil {
			return err
		}
		rf.prefill = len(pr.ids)
	}
	m, decodeGraph, _, err := mf.graphFor(name)
	if err != nil {
		return err
	}
	runner, ok := m.(models.Runner)
	if !ok {
		return fmt.Errorf("model %s cannot be run step by step (it does not implement models.Runner)", name)
	}
	args, err := mf.args(m)
	if err != nil {
		return err
	}
	vocab, err := runner.Vocab(args)
	if err != nil {
		return err
	}
	if pr != nil {
		if _, ok := args["mode"]; !ok {
			return fmt.Errorf("--prompt: model %s has no prefill graph to run a prompt through", name)
		}
		if err := pr.checkVocab(vocab); err != nil {
			return err
		}
		if b := decodeGraph.Outputs[1].Type.Shape[0]; b != 1 {
			return fmt.Errorf("--prompt feeds one user: run it with --batch 1 (not %d)", b)
		}
	}
	if pl, ok := m.(interface {
		PositionLimit(models.Args) (int, error)
	}); ok {
		limit, err := pl.PositionLimit(args)
		if err != nil {
			return err
		}
		if need := rf.prefill + rf.steps; need > limit && pr != nil {
			return fmt.Errorf("the prompt's %d tokens + --steps %d need %d positions, but the KV cache holds %d (--max-seq %d); nothing was run", rf.prefill, rf.steps, need, limit, limit)
		} else if need > limit {
			return fmt.Errorf("--prefill %d + --steps %d need %d positions, but the KV cache holds %d (--max-seq %d); nothing was run", rf.prefill, rf.steps, need, limit, limit)
		}
	}
	if _, err := checkDeviceMemory(name, m, mf, decodeGraph); err != nil {
		return err
	}
	if err := checkHostMemory(rf.progress, m, mf, decodeGraph, rf); err != nil {
		return err
	}
	// info gets the lines about the run; with a prompt and no --check,
	// stdout carries only the generated text.
	info := w
	if pr != nil && !rf.check {
		info = rf.progress
	}
	mesh := decodeGraph.Mesh
	dev, err := openMesh(rf, mesh)
	if err != nil {
		return err
	}
	defer dev.Close()
	if err := useTopology(dev, mf); err != nil {
		return err
	}
	var graphs []*stepGraph
	segs := prefillSegments(rf.prefill, rf.prefillChunk)
	if len(segs) > 0 {
		if _, ok := args["mode"]; !ok {
			return fmt.Errorf("--prefill: model %s has no prefill graph; feed the prompt with decode steps instead", name)
		}
	}
	// One prefill build per distinct segment length: the chunk's, and the
	// remainder's when the prompt does not end on a chunk.
	bySeq := map[int]*stepGraph{}
	for _, n := range segs {
		if bySeq[n] != nil {
			continue
		}
		pargs := prefillArgs(args, n)
		pg, err := m.Build(pargs, mesh)
		if err != nil {
			return err
		}
		pu, err := m.Build(pargs, mesh)
		if err != nil {
			return err
		}
		if _, err := mf.pipeline(pg); err != nil {
			return err
		}
		for _, g := range []*ir.Graph{pg, pu} {
			if err := mf.finish(m, pargs, g); err != nil {
				return err
			}
		}
		label := "prefill"
		if len(segs) > 1 {
			label = fmt.Sprintf("prefill %d", n)
		}
		bySeq[n] = &stepGraph{name: label, args: pargs, graph: pg, unfused: pu}
		graphs = append(graphs, bySeq[n])
	}
	du, err := m.Build(args, mesh)
	if err != nil {
		return err
	}
	if err := mf.finish(m, args, du); err != nil {
		return err
	}
	graphs = append(graphs, &stepGraph{name: "decode", args: args, graph: decodeGraph, unfused: du})
	if afterPipeline != nil {
		for _, sg := range graphs {
			afterPipeline(sg.graph)
		}
	}
	for _, sg := range graphs {
		t, err := mf.target()
		if err != nil {
			return err
		}
		if sg.build, err = codegen.Compile(sg.graph, t); err != nil {
			return err
		}
		addRowSplits(rf.rowSplits, sg.build)
		if sg.exe, err = runtime.Load(dev, sg.build); err != nil {
			return err
		}
		fmt.Fprintf(info, "%s %s: %d programs per device on %s, mesh %s\n", name, sg.name, len(sg.build.Programs), rf.backend, mesh)
		if rf.persistent && sg.name == "decode" && loopLaunch(rf, runner, sg) {
			plan, err := sg.exe.LoadPersistentLoop(rf.steps, sg.graph.Outputs[1])
			if err != nil {
				return err
			}
			fmt.Fprintf(info, "%s %s: one persistent program of %d phases (%d kernels, %d dependency waits) looping over %d steps, launched once\n", name, sg.name, len(plan.Phases), len(sg.exe.Persistent().Kernels), plan.Deps(), rf.steps)
		} else if rf.persistent {
			plan, err := sg.exe.LoadPersistent()
			if err != nil {
				return err
			}
			fmt.Fprintf(info, "%s %s: one persistent program of %d phases (%d kernels, %d dependency waits), launched once per step\n", name, sg.name, len(plan.Phases), len(sg.exe.Persistent().Kernels), plan.Deps())
		}
	}

	// Weights and initial state: the same numbers on the device and in both
	// references (state is kept by name across the prefill and decode graphs).
	envs, err := runner.DeviceEnv(args, decodeGraph, rf.seed)
	if err != nil {
		return err
	}
	dg := graphs[len(graphs)-1]
	var cache *checkpoint.Cache
	if rf.weights != "" {
		if cache, err = loadWeights(rf.weights, name, m, mf, dg.build, rf.allowNF); err != nil {
			return err
		}
		fmt.Fprintf(info, "weights: %s (%d buffers per device)\n", rf.weights, len(decodeGraph.Weights))
	}
	var computed map[string]bool
	if cache != nil {
		if computed, err = computedWeights(m, mf, decodeGraph); err != nil {
			return err
		}
	}
	byName := make([]map[string][]float32, len(envs))
	for d, env := range envs {
		byName[d] = map[string][]float32{}
		for v, data := range env {
			if cache != nil && v.Kind == ir.KindWeight {
				bs := dg.build.BufferOf(v)
				raw, ok := cache.Buffer(d, bs.Name)
				if !ok && computed[v.Name] {
					byName[d][v.Name] = data // not in the checkpoint: the model's contents
					if err := dg.exe.UploadTo(d, v, data); err != nil {
						return err
					}
					continue
				}
				if !ok {
					return fmt.Errorf("--weights %s: no buffer %q for device %d", rf.weights, bs.Name, d)
				}
				if data, err = dg.exe.UploadPagesTo(d, v, raw); err != nil {
					return err
				}
				byName[d][v.Name] = data
				continue
			}
			byName[d][v.Name] = data
			if err := dg.exe.UploadTo(d, v, data); err != nil {
				return err
			}
		}
	}
	// References: same formats; fp32 math on the weights as stored on the
	// device (thresholded); fp32 math on the unquantized weights (reported:
	// it measures the weight formats, e.g. bfp4_b, not the compiler).
	// The thresholded references start every step from the state the
	// device holds before it (each step's programs are checked on their
	// own); the free-running ones carry their own state from the start and
	// show how far the two drift apart over the run.
	refs := []refKind{
		{label: "same formats", opts: rf.sameFormats(), threshold: rf.threshold, deviceState: true},
		{label: "unfused same formats", opts: rf.sameFormats(), threshold: rf.threshold, deviceState: true, unfused: true},
		{label: "fp32", opts: ref.ExactOptions(), storedWeights: true, threshold: rf.fp32Threshold, deviceState: true},
		{label: "free-running same formats", opts: rf.sameFormats()},
		{label: "fp32 unquantized weights", opts: ref.ExactOptions()},
	}
	refState := make([][]map[string][]float32, len(refs))
	for i := range refs {
		refState[i] = cloneNamed(byName)
	}
	batch := decodeGraph.Outputs[1].Type.Shape[0]
	// The users' first tokens (the prompt with --prefill), drawn from
	// --seed: distinct per user, so a batch runs that many streams; or
	// the --prompt's.
	var tokens [][]int
	if pr != nil {
		tokens = [][]int{pr.ids}
		fmt.Fprintf(info, "%-9s %s\n", "prompt", pr.describe())
	} else {
		tokens = runTokens(rf.seed, batch, vocab, max(1, rf.prefill))
		label := "start"
		if rf.prefill > 0 {
			label = "prompt"
		}
		fmt.Fprintf(w, "%-9s tokens %v\n", label, tokens)
	}
	text := &streamWriter{w: w}
	// eos is set when the prompt's run generates its end-of-sequence token.
	eos := false
	// generated takes a step's token when there is a prompt: the text it
	// completes streams to stdout (without --check) or gets a line of the
	// report.
	// emit is false while a prompt's segments before its last run: their
	// next tokens are not generated text.
	emit := true
	generated := func(toks [][]int) {
		if pr == nil || !emit {
			return
		}
		s, stop := pr.next(toks[0][0])
		eos = eos || stop
		if !rf.check {
			text.write(s)
			return
		}
		fmt.Fprintf(w, "%-9s next token %d %q%s\n", "", toks[0][0], s, pr.tokenNote(toks[0][0]))
	}
	pos, failed := 0, 0
	// fp32Only lists the steps whose logits missed only the fp32
	// threshold, with both PCCs: the device agreed with the reference at
	// its own storage formats, so the gap is those formats' rounding.
	var fp32Only []string
	// loopStarted is set once the host has written the device loop's
	// state (loopState): later steps upload nothing.
	loopStarted := false
	run := func(sg *stepGraph, step string, toks [][]int) ([][]int, error) {
		ins, err := runner.StepInputs(sg.args, sg.graph, toks, pos)
		if err != nil {
			return nil, err
		}
		loop, err := loopState(runner, sg, toks, pos)
		if err != nil {
			return nil, err
		}
		// wrote counts the bytes the host writes to the devices this step.
		wrote := 0
		upload := func(sets []map[*ir.Value][]float32) error {
			for d, in := range sets {
				for v, data := range in {
					if err := sg.exe.UploadTo(d, v, data); err != nil {
						return err
					}
					wrote += len(data) * v.Type.DType.ElemBytes()
				}
			}
			return nil
		}
		if err := upload(ins); err != nil {
			return nil, err
		}
		if loop != nil && !loopStarted {
			// The first device-loop step: the host writes the tokens and
			// positions once; the steps after it advance them on the device.
			if err := upload(loop); err != nil {
				return nil, err
			}
			loopStarted = true
		}
		if loop != nil {
			fmt.Fprintf(info, "%-9s host wrote %d bytes\n", step, wrote)
			// The free-running references carry their own state but are fed
			// the device's tokens, as the host-driven run feeds them.
			for i, rk := range refs {
				if rk.deviceState {
					continue
				}
				for d, m := range loop {
					for v, data := range m {
						refState[i][d][v.Name] = append([]float32(nil), data...)
					}
				}
			}
		}
		var pre []map[string][]float32
		if rf.check {
			if pre, err = deviceState(sg); err != nil {
				return nil, err
			}
		}
		var around func(int, func() error) error
		if rf.check && !rf.persistent {
			if sg.programs == nil {
				sg.programs = newProgramCheck(sg.graph, rf.programThreshold, rf.sameFormats())
			}
			sg.programs.reset()
			around = func(i int, run func() error) error { return sg.programs.around(sg.exe, i, run) }
		}
		if rf.persistent {
			if err := sg.exe.RunPersistent(); err != nil {
				return nil, err
			}
		} else if err := runPrograms(rf.progress, sg.exe, step, around); err != nil {
			return nil, err
		}
		if afterStep != nil {
			if err := afterStep(sg.exe, sg.graph, step); err != nil {
				return nil, err
			}
		}
		logitsV, nextV := sg.graph.Outputs[0], sg.graph.Outputs[1]
		logits, err := sg.exe.Download(logitsV)
		if err != nil {
			return nil, err
		}
		next, err := sg.exe.Download(nextV)
		if err != nil {
			return nil, err
		}
		nextToks := lastTokens(next, batch)
		if !rf.check {
			if pr == nil {
				fmt.Fprintf(w, "%-9s next tokens %v\n", step, nextToks)
			}
			generated(nextToks)
			return nextToks, nil
		}
		line := fmt.Sprintf("%-9s", step)
		sameFormats := 0.0 // the logits' PCC against the same-formats reference
		for i, rk := range refs {
			if rk.deviceState {
				refState[i] = cloneNamed(pre)
			}
			g, gins, out := sg.graph, ins, logitsV
			if rk.unfused {
				g, out = sg.unfused, sg.unfused.Outputs[0]
				if gins, err = rekeyInputs(ins, sg.unfused); err != nil {
					return nil, err
				}
			}
			want, err := evalStep(g, byName, refState[i], gins, rk.opts, rk.storedWeights)
			if err != nil {
				return nil, fmt.Errorf("reference evaluator (%s): %w", step, err)
			}
			got := logits
			if rk.unfused {
				// The rules' check: the compiled graph at its fused ops'
				// decompositions' rounding points (ref.Options.Composed)
				// against the graph as the model wrote it, from the same
				// state. A rule that computes something else differs; the
				// fused programs' own rounding (checked against the device
				// above and per program) does not enter, so the rounding
				// noise a deep random network amplifies cannot fail it.
				composed := rk.opts
				composed.Composed = true
				fused, err := evalStep(sg.graph, byName, cloneNamed(pre), ins, composed, rk.storedWeights)
				if err != nil {
					return nil, fmt.Errorf("reference evaluator (%s): %w", step, err)
				}
				got = fused[logitsV].Data
			}
			pcc := numerics.PCC(want[out].Data, got)
			rel := numerics.MaxRelErr(want[out].Data, got)
			status := "(info)"
			if rk.threshold > 0 {
				status = "ok"
				if pcc < rk.threshold {
					status, failed = "FAIL", failed+1
					if rk.label == "fp32" && sameFormats >= rf.threshold {
						fp32Only = append(fp32Only, fmt.Sprintf("%s (fp32 PCC %.6f, same formats %.6f)", strings.TrimSpace(step), pcc, sameFormats))
					}
				}
			}
			if i == 0 {
				sameFormats = pcc
			}
			line += fmt.Sprintf("  %s PCC %.6f (max rel %.3g) %s", rk.label, pcc, rel, status)
			if i == 0 {
				if bad := tokenMismatch(want[logitsV].Data, want[nextV].Data, logitsV.Type.DType, nextToks, batch); bad != "" {
					line += "  tokens FAIL: " + bad
					failed++
				}
			}
		}
		fmt.Fprintln(w, line)
		// The state the step wrote, against the same-formats reference's
		// (refState[0], updated by evalStep from the same pre-step state).
		post, err := deviceState(sg)
		if err != nil {
			return nil, err
		}
		sc := compareState(checkedStates(sg.graph), pre, post, refState[0], rf.threshold)
		failed += len(sc.fails)
		fmt.Fprintf(w, "%-9s %s\n", "", sc)
		if rf.persistent {
			fmt.Fprintf(w, "%-9s programs: not checked one by one (--persistent: one launch runs every phase)\n", "")
		} else {
			failed += len(sg.programs.fails())
			fmt.Fprintf(w, "%-9s %s\n", "", sg.programs)
		}
		generated(nextToks)
		return nextToks, nil
	}
	// The prompt, segment by segment: each step's next token is the
	// model's only after the last segment (emit).
	prompt, off := tokens, 0
	for i, n := range segs {
		step := "prefill"
		if len(segs) > 1 {
			step = fmt.Sprintf("prefill %d..%d", off, off+n-1)
		}
		seg := make([][]int, len(prompt))
		for b := range prompt {
			seg[b] = prompt[b][off : off+n]
		}
		emit = i == len(segs)-1
		if tokens, err = run(bySeq[n], step, seg); err != nil {
			return err
		}
		off += n
		pos += n
	}
	emit = true
	looped := false
	if loopLaunch(rf, runner, dg) {
		if pr != nil {
			return fmt.Errorf("--persistent with a device-loop graph runs every step in one launch: not with --prompt (the text cannot stop the run at its end-of-sequence token)")
		}
		lr := &loopRun{w: w, info: info, rf: rf, runner: runner, dg: dg, byName: byName, batch: batch}
		n, _, err := lr.run(tokens, pos)
		if err != nil {
			return err
		}
		failed += n
		looped, rf.steps = true, 0 // the launch ran them
	}
	for s := 0; s < rf.steps && !eos; s++ {
		if tokens, err = run(dg, fmt.Sprintf("decode %d", s), tokens); err != nil {
			return err
		}
		for b := range tokens {
			tokens[b] = tokens[b][len(tokens[b])-1:]
		}
		pos++
	}
	if pr != nil {
		tail := pr.flush()
		if rf.check {
			fmt.Fprintf(w, "%-9s %q (%s)\n", "text", pr.out.String(), pr.stopReason(rf.steps))
		} else {
			text.write(tail)
			text.end()
			fmt.Fprintf(info, "tcc: %s\n", pr.stopReason(rf.steps))
		}
	}
	if bad := reportChip(info, dev.ChipResults()); bad > 0 && rf.check {
		return &exitError{code: 2, err: fmt.Errorf("check failed: %d chip launches differed from the simulator or failed", bad)}
	}
	if !rf.check {
		return nil
	}
	if failed > 0 {
		msg := fmt.Sprintf("check failed: %d comparisons below threshold (PCC %v same formats, %v fp32)", failed, rf.threshold, rf.fp32Threshold)
		if len(fp32Only) > 0 {
			msg += fmt.Sprintf("; %s missed only the fp32 threshold: the device computed what its storage formats specify (the same-formats reference agrees), and the model amplifies those formats' rounding beyond --fp32-threshold", strings.Join(fp32Only, ", "))
		}
		return &exitError{code: 2, err: errors.New(msg)}
	}
	if looped {
		fmt.Fprintf(w, "check passed: one launch; every step's tokens match the free-running same-formats reference, the last step's logits PCC >= %.4f, the final state >= %.4f (not checked: earlier steps' logits and state, fp32 and unfused references, programs one by one)\n", rf.threshold, rf.threshold)
		return nil
	}
	if rf.persistent {
		fmt.Fprintf(w, "check passed: logits PCC >= %.4f (same formats, fused and unfused graphs) and >= %.4f (fp32) on every step, tokens match, state written >= %.4f (persistent program: programs not checked one by one)\n", rf.threshold, rf.fp32Threshold, rf.threshold)
		return nil
	}
	fmt.Fprintf(w, "check passed: logits PCC >= %.4f (same formats, fused and unfused graphs) and >= %.4f (fp32) on every step, tokens match, state written >= %.4f, every program on its own inputs >= %.5f\n", rf.threshold, rf.fp32Threshold, rf.threshold, rf.programThreshold)
	return nil
}

// configFromWeights sets --config, when not given, to the config.json of
// --weights: a checkpoint's own, or the one a cache recorded when it was
// converted, so the run builds the model the weights are for.
func configFromWeights(w io.Writer, mf *modelFlags, name, weights string) error {
	p := mf.params["config"]
	if weights == "" || p == nil || mf.flags.Changed("config") {
		return nil
	}
	m, err := models.Lookup(name)
	if err != nil || !modelHas(m, "config") {
		return nil // the model has no config; graphFor reports a bad name
	}
	cfg := filepath.Join(weights, checkpoint.ConfigFile)
	if !fileExists(cfg) {
		if checkpoint.IsCache(weights) {
			fmt.Fprintf(w, "tcc: --weights %s records no model config (converted by an older tcc or without one); building %s with its default config: give --config if it is not the cache's\n", weights, name)
		}
		return nil
	}
	p.s = cfg
	mf.flags.Lookup("config").Changed = true
	fmt.Fprintf(w, "tcc: config: %s (from --weights)\n", cfg)
	return nil
}

// loadWeights returns the device-ready weights of build b from path: a
// cache (its contract must be b's) or a checkpoint, converted in memory.
func loadWeights(path, name string, m models.Model, mf *modelFlags, b *codegen.Build, allowNonFinite bool) (*checkpoint.Cache, error) {
	var c *checkpoint.Cache
	if checkpoint.IsCache(path) {
		// The cache's own state first: an incomplete or damaged cache is
		// reported as such whatever the model.
		var err error
		if c, err = checkpoint.LoadCache(path); err != nil {
			return nil, err
		}
	}
	info, err := hostInfo(m, mf)
	if err != nil {
		return nil, err
	}
	pf, err := checkpoint.Programs(name, b, info)
	if err != nil {
		return nil, err
	}
	// Weights the host computes (the device loop's RoPE tables) are not in
	// the checkpoint: runModel uploads the model's own contents for them.
	m2 := *pf.Manifest
	m2.Weights = nil
	for _, w := range pf.Manifest.Weights {
		if w.Source == nil || w.Source.Computed == "" {
			m2.Weights = append(m2.Weights, w)
		}
	}
	pf.Manifest = &m2
	if c != nil {
		want, err := checkpoint.ContractOf(pf)
		if err != nil {
			return nil, err
		}
		if c.Manifest.Contract != want || c.Manifest.Devices != pf.Devices {
			return nil, fmt.Errorf("--weights %s: the cache was converted for %s on mesh %s with other weight buffers (dtype policy, config or mesh differ); convert it again for this build", path, c.Manifest.Model, c.Manifest.Mesh)
		}
		return c, nil
	}
	src, err := checkpoint.Open(path)
	if err != nil {
		return nil, err
	}
	defer src.Close()
	src.AllowNonFinite = allowNonFinite
	return checkpoint.InMemory(src, pf)
}

// refKind is one reference the device is compared with.
type refKind struct {
	label         string
	opts          ref.Options
	storedWeights bool    // round weights through their storage format first
	threshold     float64 // 0: reported only
	deviceState   bool    // start each step from the device's state
	// unfused evaluates the graph as the model wrote it, before fusion, so
	// a rule that changes what is computed fails the check.
	unfused bool
}

// deviceState reads every state of sg's graph from every device, by name.
func deviceState(sg *stepGraph) ([]map[string][]float32, error) {
	out := make([]map[string][]float32, sg.exe.Mesh.Devices())
	for d := range out {
		out[d] = map[string][]float32{}
		for _, s := range sg.graph.States {
			data, err := sg.exe.DownloadFrom(d, s)
			if err != nil {
				return nil, err
			}
			out[d][s.Name] = data
		}
	}
	return out, nil
}

// computedWeights names the weights of g the host computes instead of
// reading them from a checkpoint (hostcfg.WeightSource.Computed).
func computedWeights(m models.Model, mf *modelFlags, g *ir.Graph) (map[string]bool, error) {
	info, err := hostInfo(m, mf)
	if err != nil || info == nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, w := range g.Weights {
		src, err := info.WeightSource(w.Name, g.Mesh.Cols)
		if err != nil {
			return nil, err
		}
		if src.Computed != "" {
			out[w.Name] = true
		}
	}
	return out, nil
}

// loopRunner is implemented by runners whose decode graph can keep the
// step's inputs on the device (qwen27b's --device-loop).
type loopRunner interface {
	// LoopState returns, for every device, the state the host writes
	// before the first step of a graph that takes no step inputs: the
	// tokens and positions; empty maps for a graph that takes inputs.
	LoopState(args models.Args, g *ir.Graph, tokens [][]int, pos int) ([]map[*ir.Value][]float32, error)
}

// loopState is the device-loop state of a step of sg feeding toks at pos
// (loopRunner.LoopState), or nil when sg is not a device-loop graph.
func loopState(runner models.Runner, sg *stepGraph, toks [][]int, pos int) ([]map[*ir.Value][]float32, error) {
	lr, ok := runner.(loopRunner)
	if !ok || len(sg.graph.Inputs) > 0 {
		return nil, nil
	}
	loop, err := lr.LoopState(sg.args, sg.graph, toks, pos)
	if err != nil || len(loop) == 0 || len(loop[0]) == 0 {
		return nil, err
	}
	return loop, nil
}

// checkedStates are the states the per-step state check compares: all but
// the one the step's next tokens are written into (the device loop's
// tokens), which the token check compares with its near-tie allowance.
func checkedStates(g *ir.Graph) []*ir.Value {
	var out []*ir.Value
	for _, s := range g.States {
		if len(g.Outputs) > 1 && g.StateUpdates[s] == g.Outputs[1] {
			continue
		}
		out = append(out, s)
	}
	return out
}

// afterStep, when set (tests only), runs after a step's programs and
// before its outputs and state are read: a test corrupts device state
// through it to prove the state check catches a wrong row.
// afterPipeline, when set (tests only), edits each compiled graph before
// codegen, as a wrong rewrite would.
var afterPipeline func(g *ir.Graph)

var afterStep func(exe *runtime.Executable, g *ir.Graph, step string) error

// stateCheck is one step's comparison of the device's state with the
// reference's.
type stateCheck struct {
	buffers, rows, total int // buffers compared; rows compared of total
	minPCC               float64
	worst                string   // the buffer (and device) of minPCC
	fails                []string // buffers below the threshold
}

func (c stateCheck) String() string {
	if c.buffers == 0 {
		return "state: none"
	}
	s := fmt.Sprintf("state: %d buffers, %d of %d rows written, min PCC %.6f (%s)", c.buffers, c.rows, c.total, c.minPCC, c.worst)
	if len(c.fails) > 0 {
		return s + " FAIL: " + strings.Join(c.fails, ", ")
	}
	return s + " ok"
}

// compareState compares every state buffer of every device after a step
// (post, the device's) with the reference's (want), on the rows (last axis)
// the step wrote: those where either differs from the state before the
// step (pre). That is all of a recurrent or conv state and a KV cache's new
// rows (plus any row the device wrote where the reference did not), not
// the rest of the cache. A buffer whose rows' PCC is below threshold fails.
func compareState(states []*ir.Value, pre, post, want []map[string][]float32, threshold float64) stateCheck {
	c := stateCheck{minPCC: 1}
	for d := range post {
		for _, s := range states {
			p, g, r := pre[d][s.Name], post[d][s.Name], want[d][s.Name]
			width := s.Type.Shape[len(s.Type.Shape)-1]
			if len(g) != len(r) || len(p) != len(r) || width == 0 {
				c.fails = append(c.fails, fmt.Sprintf("%s device %d: %d values on the device, %d in the reference", s.Name, d, len(g), len(r)))
				continue
			}
			var gw, rw []float32
			rows := len(r) / width
			for i := 0; i < rows; i++ {
				lo, hi := i*width, (i+1)*width
				if slices.Equal(p[lo:hi], g[lo:hi]) && slices.Equal(p[lo:hi], r[lo:hi]) {
					continue
				}
				gw, rw = append(gw, g[lo:hi]...), append(rw, r[lo:hi]...)
				c.rows++
			}
			c.total += rows
			if len(rw) == 0 {
				continue
			}
			c.buffers++
			pcc := numerics.PCC(rw, gw)
			where := fmt.Sprintf("%s device %d", s.Name, d)
			if pcc < c.minPCC || c.worst == "" {
				c.minPCC, c.worst = pcc, where
			}
			if pcc < threshold {
				c.fails = append(c.fails, fmt.Sprintf("%s PCC %.6f", where, pcc))
			}
		}
	}
	return c
}

// evalStep runs the reference for one step on every device, feeding and
// then updating state (by name) in place. With storedWeights the weights
// are first rounded through their declared storage formats.
func evalStep(g *ir.Graph, weights []map[string][]float32, state []map[string][]float32, ins []map[*ir.Value][]float32, opts ref.Options, storedWeights bool) (map[*ir.Value]ref.Tensor, error) {
	envs := make([]map[*ir.Value]ref.Tensor, g.Mesh.Devices())
	for d := range envs {
		env := map[*ir.Value]ref.Tensor{}
		for _, v := range g.Weights {
			t := ref.Tensor{Shape: v.Type.Shape.Clone(), Data: weights[d][v.Name]}
			if storedWeights {
				st, err := ref.StoreAs(v.Type, t)
				if err != nil {
					return nil, fmt.Errorf("weight %q: %w", v.Name, err)
				}
				t = st
			}
			env[v] = t
		}
		for _, v := range g.States {
			env[v] = ref.Tensor{Shape: v.Type.Shape.Clone(), Data: state[d][v.Name]}
		}
		for v, data := range ins[d] {
			env[v] = ref.Tensor{Shape: v.Type.Shape.Clone(), Data: data}
		}
		envs[d] = env
	}
	outs, err := ref.EvalMesh(g, envs, opts)
	if err != nil {
		return nil, err
	}
	for d := range outs {
		for s, nv := range g.StateUpdates {
			state[d][s.Name] = outs[d][nv].Data
		}
	}
	// A split output (the vocab-sharded logits) is read whole, as the
	// executable's Download joins it.
	for _, v := range g.Outputs {
		if v.Type.Dist.IsReplicated() || len(outs) == 1 {
			continue
		}
		shards := make([][]float32, len(outs))
		for d := range outs {
			shards[d] = outs[d][v].Data
		}
		data, err := v.Type.Dist.Join(v.Type.Shape, shards)
		if err != nil {
			return nil, fmt.Errorf("output %s: %w", v.Name, err)
		}
		whole := v.Type.Shape.Clone()
		whole[v.Type.Dist.Axis] *= len(outs)
		outs[0][v] = ref.Tensor{Shape: whole, Data: data}
	}
	return outs[0], nil
}

func cloneNamed(src []map[string][]float32) []map[string][]float32 {
	out := make([]map[string][]float32, len(src))
	for d, m := range src {
		out[d] = map[string][]float32{}
		for k, v := range m {
			out[d][k] = append([]float32(nil), v...)
		}
	}
	return out
}
