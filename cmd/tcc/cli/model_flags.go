package cli

import (
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/models"
	"github.com/tcc-dev/tcc/passes"
)

// modelFlags are the flags shared by commands that build a model graph.
type modelFlags struct {
	mesh    string
	stage   string
	disable []string
	params  map[string]*string
	flags   *pflag.FlagSet
}

// addModelFlags registers --mesh, --stage, --disable and every registered
// model's parameters (the union; a parameter the chosen model lacks is an error).
func addModelFlags(cmd *cobra.Command, defaultStage string) *modelFlags {
	mf := &modelFlags{params: map[string]*string{}, flags: cmd.Flags()}
	fs := cmd.Flags()
	fs.StringVar(&mf.mesh, "mesh", "1x1", "mesh of cards as RxC, e.g. 1x2 (tensor parallel over the columns)")
	fs.StringVar(&mf.stage, "stage", defaultStage, "graph stage: unfused (as the model is written) or fused (after the pass pipeline)")
	fs.StringSliceVar(&mf.disable, "disable", nil, "fusion rules or passes to turn off (comma separated; see `tcc passes`)")
	owners := map[string][]string{}
	docs := map[string]models.Param{}
	for _, name := range models.Names() {
		m, _ := models.Lookup(name)
		for _, p := range m.Params() {
			owners[p.Name] = append(owners[p.Name], name)
			if _, ok := docs[p.Name]; !ok {
				docs[p.Name] = p
			}
		}
	}
	names := make([]string, 0, len(docs))
	for n := range docs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		p := docs[n]
		mf.params[n] = fs.String(n, "", fmt.Sprintf("%s (model %s; default %q)", p.Doc, strings.Join(owners[n], ", "), p.Default))
	}
	return mf
}

// args returns m's parameters: defaults overridden by the flags given.
func (mf *modelFlags) args(m models.Model) (models.Args, error) {
	set := map[string]string{}
	for n, v := range mf.params {
		if mf.flags.Changed(n) {
			set[n] = *v
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

// graphFor builds the named model's graph at the requested stage and returns
// it with the pipeline result (nil for the unfused stage).
func (mf *modelFlags) graphFor(name string) (models.Model, *ir.Graph, *passes.Result, error) {
	m, err := models.Lookup(name)
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
	if mf.stage != "unfused" && mf.stage != "fused" {
		return nil, nil, nil, fmt.Errorf("unknown --stage %q (want unfused or fused)", mf.stage)
	}
	g, err := m.Build(args, mesh)
	if err != nil {
		return nil, nil, nil, err
	}
	res, err := mf.pipeline(g)
	if err != nil {
		return nil, nil, nil, err
	}
	return m, g, res, nil
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
	passNames := passes.Default().Names()
	var rules []string
	for _, d := range disable {
		switch {
		case contains(passNames, d):
			opts.Disable = append(opts.Disable, d)
		default:
			rules = append(rules, d)
		}
	}
	if len(rules) > 0 {
		all := passes.Rules()
		known := map[string]bool{}
		for _, r := range all {
			known[r.Name] = true
		}
		for _, r := range rules {
			if !known[r] {
				var names []string
				for _, r := range all {
					names = append(names, r.Name)
				}
				return opts, fmt.Errorf("--disable %q is neither a pass (%s) nor a rule (%s)", r, strings.Join(passNames, ", "), strings.Join(names, ", "))
			}
		}
		for _, r := range all {
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

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
