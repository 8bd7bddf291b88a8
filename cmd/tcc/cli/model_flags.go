package cli

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/ir/sfpu"
	"github.com/tcc-dev/tcc/models"
	"github.com/tcc-dev/tcc/passes"
)

// modelFlags are the flags shared by commands that build a model graph.
type modelFlags struct {
	mesh    string
	stage   string
	disable []string
	params  map[string]*paramValue
	flags   *pflag.FlagSet
	// passesLater: the command runs the passes itself after graphFor
	// (tcc ir --print-after), so --disable applies to an unfused graph.
	passesLater bool
	// prefillFidelity is --prefill-fidelity (passes.ParseWeightFidelity).
	prefillFidelity string
	// sfpu is --sfpu (sfpu.ParseCode; "" when the command has no such
	// flag: tcc's own code).
	sfpu string
	// topology is --topology (target.LookupTopology; "" when the command
	// has no such flag: target.DefaultTopology).
	topology string
	// budget is tcc perf's --simulate-budget (timing.Predictor.SetBudget;
	// 0: the default).
	budget int64
	// weightsOnSrcB is --weights-on-srcb; srcBTable caches its table
	// (srcBNames) once computed.
	weightsOnSrcB bool
	srcBTable     *[]string
}

// addSFPU registers --sfpu: whose SFPU code the build's compute kernels
// run (tcc build, run and perf).
func (mf *modelFlags) addSFPU() {
	mf.flags.StringVar(&mf.sfpu, "sfpu", "tcc", "SFPU code of the compute kernels: tcc (tcc's own instruction sequences, which stock GCC builds and the simulator executes bit for bit) or llk (tt-metal's SFPU calls; needs tt-metal's SFPI compiler, simulated as their exact functions)")
}

// addTopology registers --topology: how the mesh row's chips are cabled
// (tcc build, run and perf).
func (mf *modelFlags) addTopology() {
	mf.flags.StringVar(&mf.topology, "topology", target.DefaultTopology, "ethernet cabling of the mesh row's chips, one of "+strings.Join(target.TopologyNames(), ", ")+
		": the collectives' ring is planned over its links (p150a: p150a cards cabled as a ring, the measured two-card setup; p300: a P300 board, ttsim's bh_x2, two links)")
}

// sfpuCode is --sfpu's code (tcc's own when the command has no --sfpu).
func (mf *modelFlags) sfpuCode() (sfpu.Code, error) {
	if mf.sfpu == "" {
		return sfpu.CodeTCC, nil
	}
	c, err := sfpu.ParseCode(mf.sfpu)
	if err != nil {
		return 0, fmt.Errorf("--sfpu: %w", err)
	}
	return c, nil
}

// target is the Blackhole target with --sfpu's code.
func (mf *modelFlags) target() (*target.Target, error) {
	c, err := mf.sfpuCode()
	if err != nil {
		return nil, err
	}
	t := target.Blackhole()
	t.SFPU = c
	return mf.withTopology(t)
}

// withTopology applies --topology to t for --mesh: the ring of a mesh row
// is planned over the topology's links. It fails, naming the topology and
// the mesh, for an unknown topology or a mesh it does not cable.
func (mf *modelFlags) withTopology(t *target.Target) (*target.Target, error) {
	tp, err := target.LookupTopology(mf.topology)
	if err != nil {
		return nil, fmt.Errorf("--topology: %w", err)
	}
	mesh, err := ir.ParseMesh(mf.mesh)
	if err != nil {
		return nil, err
	}
	if tp.Chips > 0 && mesh.Devices() > tp.Chips {
		return nil, fmt.Errorf("--topology %s cables %d chips; mesh %s has %d", tp.Name, tp.Chips, mesh, mesh.Devices())
	}
	return t.WithTopology(tp, mesh.Cols)
}

// addModelFlags registers --mesh, --stage, --disable and every registered
// model's parameters (the union; a parameter the chosen model lacks is an error).
func addModelFlags(cmd *cobra.Command, defaultStage string) *modelFlags {
	mf := &modelFlags{params: map[string]*paramValue{}, flags: cmd.Flags()}
	fs := cmd.Flags()
	fs.StringVar(&mf.mesh, "mesh", "1x1", "mesh of cards as RxC, e.g. 1x2 (tensor parallel over the columns)")
	fs.StringVar(&mf.stage, "stage", defaultStage, "graph stage: unfused (as the model is written) or fused (after the pass pipeline)")
	fs.StringSliceVar(&mf.disable, "disable", nil, "`names` of fusion rules or passes to turn off (comma separated; see tcc passes)")
	fs.BoolVar(&mf.weightsOnSrcB, "weights-on-srcb", true, "store the block-float weights every step multiplies only as a matmul's weight in transposed tiles and feed them to SrcB, where HiFi2 gives HiFi4's products (false: every weight in tile layout on SrcA)")
	fs.StringVar(&mf.prefillFidelity, "prefill-fidelity", "exact", "math fidelity of the prefill matmuls by weight format, e.g. bfp8_b=HiFi2,bfp4_b=LoFi (lossy: faster products, less accurate; the check's fp32 PCC shows the cost), or exact: the cheapest fidelity that keeps HiFi4's products")
	owners := map[string][]string{}
	docs := map[string]models.Param{}
	ints, bools := map[string]bool{}, map[string]bool{}
	for _, name := range models.Names() {
		m, _ := models.Lookup(name)
		for _, p := range m.Params() {
			owners[p.Name] = append(owners[p.Name], name)
			_, err := strconv.Atoi(p.Default)
			isBool := p.Default == "true" || p.Default == "false"
			if _, ok := docs[p.Name]; !ok {
				docs[p.Name] = p
				ints[p.Name] = err == nil
				bools[p.Name] = isBool
			}
			ints[p.Name] = ints[p.Name] && err == nil
			bools[p.Name] = bools[p.Name] && isBool
		}
	}
	names := make([]string, 0, len(docs))
	for n := range docs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		p := docs[n]
		v := &paramValue{isInt: ints[n], isBool: bools[n]}
		def := fmt.Sprintf("; default %q", p.Default)
		switch {
		case v.isInt:
			def = "; default " + p.Default
		case v.isBool && p.Default == "false":
			def = ""
		case v.isBool:
			def = "; default " + p.Default
		case p.Default == "":
			def = ""
		}
		fs.Var(v, n, fmt.Sprintf("%s (model %s%s)", p.Doc, strings.Join(owners[n], ", "), def))
		if v.isBool {
			fs.Lookup(n).NoOptDefVal = "true" // --name alone turns it on
		}
		mf.params[n] = v
	}
	return mf
}

// paramValue is one model parameter's flag: an int when every model that
// has it defaults to an integer (shown as int in --help and checked when
// parsed), a bool when every one defaults to true or false (given alone,
// --name means true), else a string. The model checks the value's range.
type paramValue struct {
	s             string
	isInt, isBool bool
}

func (v *paramValue) String() string { return v.s }

func (v *paramValue) Set(s string) error {
	if v.isInt {
		if _, err := strconv.Atoi(s); err != nil {
			if errors.Is(err, strconv.ErrRange) {
				return errors.New("out of range for an int")
			}
			return errors.New("not an integer")
		}
	}
	if v.isBool {
		b, err := strconv.ParseBool(s)
		if err != nil {
			return errors.New("not true or false")
		}
		s = strconv.FormatBool(b)
	}
	v.s = s
	return nil
}

func (v *paramValue) Type() string {
	if v.isInt {
		return "int"
	}
	if v.isBool {
		return "bool"
	}
	return "string"
}

// args returns m's parameters: defaults overridden by the flags given.
func (mf *modelFlags) args(m models.Model) (models.Args, error) {
	set := map[string]string{}
	for n, v := range mf.params {
		if mf.flags.Changed(n) {
			set[n] = v.s
		}
	}
	return models.DefaultArgs(m, set)
}

// pipeline brings g to the requested stage: nothing for unfused, the pass
// pipeline (with --disable) for fused.
func (mf *modelFlags) pipeline(g *ir.Graph) (*passes.Result, error) {
	switch mf.stage {
	case "unfused":
		return nil, nil
	case "fused":
		return runPipeline(g, mf.disable)
	}
	return nil, fmt.Errorf("unknown --stage %q (want unfused or fused)", mf.stage)
}

// checkStage validates --stage and the --disable names (in either stage:
// at --stage unfused, where no pass runs, any --disable is refused).
func (mf *modelFlags) checkStage() error {
	if mf.stage != "unfused" && mf.stage != "fused" {
		return fmt.Errorf("unknown --stage %q (want unfused or fused)", mf.stage)
	}
	if err := checkDisable(mf.disable); err != nil {
		return err
	}
	if mf.stage == "unfused" && len(mf.disable) > 0 && !mf.passesLater {
		return fmt.Errorf("--disable %s: --stage unfused runs no pass, so there is nothing to disable; add --stage fused", strings.Join(mf.disable, ","))
	}
	return nil
}

// graphFor builds the named model's graph at the requested stage and returns
// it with the pipeline result (nil for the unfused stage).
func (mf *modelFlags) graphFor(name string) (models.Model, *ir.Graph, *passes.Result, error) {
	m, err := lookupModel(name)
	if err != nil {
		return nil, nil, nil, err
	}
	mesh, err := ir.ParseMesh(mf.mesh)
	if err != nil {
		return nil, nil, nil, err
	}
	args, err := mf.args(m)
	if err != nil {
		return nil, nil, nil, err
	}
	if err := mf.checkStage(); err != nil {
		return nil, nil, nil, err
	}
	g, err := m.Build(args, mesh)
	if err != nil {
		return nil, nil, nil, err
	}
	res, err := mf.pipeline(g)
	if err != nil {
		return nil, nil, nil, err
	}
	if err := mf.finish(m, args, g); err != nil {
		return nil, nil, nil, err
	}
	return m, g, res, nil
}

// finish applies what follows the pipeline to g, a graph of m built from
// args (fused or not): --prefill-fidelity's policy and the weights on
// SrcB.
func (mf *modelFlags) finish(m models.Model, args models.Args, g *ir.Graph) error {
	if err := mf.applyFidelity(g, args); err != nil {
		return err
	}
	return mf.storeOnSrcB(m, args, g)
}

// applyFidelity sets --prefill-fidelity's policy on g when args build a
// prefill step (passes.SetWeightFidelity); run it after the pipeline,
// on the ops the lowering will see.
func (mf *modelFlags) applyFidelity(g *ir.Graph, args models.Args) error {
	p, err := passes.ParseWeightFidelity(mf.prefillFidelity)
	if err != nil {
		return fmt.Errorf("--prefill-fidelity: %w", err)
	}
	if args["mode"] == "prefill" && len(p) > 0 {
		passes.SetWeightFidelity(g, p)
	}
	return nil
}

// runPipeline runs the default pipeline, turning off the named rules or passes.
func runPipeline(g *ir.Graph, disable []string) (*passes.Result, error) {
	opts, err := pipelineOptions(disable)
	if err != nil {
		return nil, err
	}
	return passes.Run(g, opts)
}

// pipelineOptions splits --disable names into passes and fusion rules.
func pipelineOptions(disable []string) (passes.Options, error) {
	var opts passes.Options
	if err := checkDisable(disable); err != nil {
		return opts, err
	}
	passNames := passes.Default().Names()
	var rules []string
	for _, d := range disable {
		if contains(passNames, d) {
			opts.Disable = append(opts.Disable, d)
		} else {
			rules = append(rules, d)
		}
	}
	if len(rules) > 0 {
		for _, r := range passes.Rules() {
			if !contains(rules, r.Name) {
				opts.Rules = append(opts.Rules, r)
			}
		}
		if opts.Rules == nil {
			opts.Disable = append(opts.Disable, "fuse")
		}
	}
	return opts, nil
}

// disableName is one name --disable accepts and where it acts.
type disableName struct {
	name, where string
}

// disableNames lists every pass and fusion rule (external ones included),
// each with where it acts: "pass N" or "FAMILY rule, run by pass STAGE".
func disableNames() []disableName {
	var out []disableName
	for i, n := range passes.Default().Names() {
		out = append(out, disableName{n, fmt.Sprintf("pass %d", i+1)})
	}
	for _, f := range passes.Families() {
		for _, r := range passes.FamilyRules(f) {
			out = append(out, disableName{r.Name, fmt.Sprintf("%s rule, run by pass %s", f, passes.StageOf(f))})
		}
	}
	return out
}

// checkDisable refuses a --disable name that is neither a pass nor a
// fusion rule, naming the nearest valid names (by edit distance) and the
// pass each acts in.
func checkDisable(disable []string) error {
	all := disableNames()
	for _, d := range disable {
		known := false
		for _, n := range all {
			if n.name == d {
				known = true
				break
			}
		}
		if known {
			continue
		}
		return fmt.Errorf("--disable %q: no pass or fusion rule has this name; %s (tcc passes lists them all)", d, suggest(d, all))
	}
	return nil
}

// suggest names the up to three valid names nearest to d by edit
// distance (case-insensitive), as "did you mean ..." when one is close.
func suggest(d string, all []disableName) string {
	type scored struct {
		disableName
		dist int
	}
	var ss []scored
	for _, n := range all {
		ss = append(ss, scored{n, editDistance(strings.ToLower(d), strings.ToLower(n.name))})
	}
	sort.SliceStable(ss, func(i, j int) bool {
		if ss[i].dist != ss[j].dist {
			return ss[i].dist < ss[j].dist
		}
		return ss[i].name < ss[j].name
	})
	close := max(2, len(d)/3)
	var near, nearest []string
	for i := 0; i < len(ss) && i < 3; i++ {
		n := fmt.Sprintf("%s (%s)", ss[i].name, ss[i].where)
		nearest = append(nearest, n)
		if ss[i].dist <= close {
			near = append(near, n)
		}
	}
	if len(near) > 0 {
		return "did you mean " + strings.Join(near, ", ") + "?"
	}
	return "no name is close; the nearest are " + strings.Join(nearest, ", ")
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
