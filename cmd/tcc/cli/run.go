package cli

import (
	"fmt"
	"io"
	"math/rand"

	"github.com/spf13/cobra"

	"github.com/tcc-dev/tcc/codegen"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/models"
	"github.com/tcc-dev/tcc/runtime"
	"github.com/tcc-dev/tcc/sim/numerics"
	"github.com/tcc-dev/tcc/sim/ref"
)

// runFlags are the flags of `tcc run`.
type runFlags struct {
	backend   string
	check     bool
	seed      int64
	threshold float64
	verbose   bool
}

func newRunCmd() *cobra.Command {
	var rf runFlags
	cmd := &cobra.Command{
		Use:   "run MODEL",
		Short: "Compile a model and run its programs on a backend (default: the simulator)",
		Long: `Compile MODEL (fused pipeline), load every program on the backend, upload
deterministic random weights and inputs, and run one decode step program by
program.

With --check, every graph output is compared with the reference evaluator run
on the same graph at the same storage formats; the PCC (and max relative error)
of each output is printed, and tcc exits with status 2 when any output is below
--threshold (integer outputs such as argmax must match exactly).

  tcc run tiny-mlp --backend sim --check
  tcc run tiny-mlp --layers 4 --hidden 256 --check -v`,
		Args: cobra.ExactArgs(1),
	}
	mf := addModelFlags(cmd, "fused")
	fs := cmd.Flags()
	fs.StringVar(&rf.backend, "backend", "sim", "where programs run: sim (built-in simulator) or blackhole (cards)")
	fs.BoolVar(&rf.check, "check", false, "compare every output with the reference evaluator and fail below --threshold")
	fs.Int64Var(&rf.seed, "seed", 1, "seed of the random weights and inputs")
	fs.Float64Var(&rf.threshold, "threshold", 0.999, "minimum PCC per output for --check")
	fs.BoolVarP(&rf.verbose, "verbose", "v", false, "with --check, also print the PCC of every op's result")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		m, g, _, err := mf.graphFor(args[0])
		if err != nil {
			return err
		}
		return runModel(cmd.OutOrStdout(), m, g, rf)
	}
	return cmd
}

// outputCheck is the comparison of one device value with the reference.
type outputCheck struct {
	Name   string
	PCC    float64
	MaxRel float64
	Exact  bool // integer value: compared for equality
	OK     bool
}

func runModel(w io.Writer, m models.Model, g *ir.Graph, rf runFlags) error {
	t := target.Blackhole()
	b, err := codegen.Compile(g, t)
	if err != nil {
		return err
	}
	mesh, err := runtime.Open(rf.backend, g.Mesh)
	if err != nil {
		return err
	}
	exe, err := runtime.Load(mesh, b)
	if err != nil {
		return err
	}
	env := randomEnv(m, g, rf.seed)
	for v, data := range env {
		if err := exe.Upload(v, data.Data); err != nil {
			return err
		}
	}
	fmt.Fprintf(w, "%s: %d programs on %s (mesh %s)\n", g.Name, len(b.Programs), rf.backend, g.Mesh)
	var want map[*ir.Value]ref.Tensor
	if rf.check {
		want, err = ref.Eval(g, env, ref.DefaultOptions())
		if err != nil {
			return fmt.Errorf("reference evaluator: %w", err)
		}
	}
	for i, p := range b.Programs {
		if err := exe.RunProgram(i); err != nil {
			return err
		}
		if rf.check && rf.verbose {
			for _, v := range p.Op.Results {
				c, err := compare(exe, v, want[v], rf.threshold)
				if err != nil {
					return err
				}
				fmt.Fprintf(w, "  %-28s %s\n", fmt.Sprintf("%s %s", p.Op.Where(), v), c.describe())
			}
		}
	}
	if !rf.check {
		fmt.Fprintln(w, "ran; pass --check to compare with the reference evaluator")
		return nil
	}
	failed := 0
	for i, v := range g.Outputs {
		c, err := compare(exe, v, want[v], rf.threshold)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "output %d %-10s %s\n", i, v.Type.Shape, c.describe())
		if !c.OK {
			failed++
		}
	}
	if failed > 0 {
		return &exitError{code: 2, err: fmt.Errorf("check failed: %d of %d outputs below PCC %.4f", failed, len(g.Outputs), rf.threshold)}
	}
	fmt.Fprintf(w, "check passed: %d outputs at PCC >= %.4f\n", len(g.Outputs), rf.threshold)
	return nil
}

func compare(exe *runtime.Executable, v *ir.Value, want ref.Tensor, threshold float64) (outputCheck, error) {
	got, err := exe.Download(v)
	if err != nil {
		return outputCheck{}, err
	}
	c := outputCheck{Name: v.String()}
	if !v.Type.DType.IsFloat() {
		c.Exact = true
		c.OK = len(got) == len(want.Data)
		for i := range got {
			if c.OK && got[i] != want.Data[i] {
				c.OK = false
			}
		}
		return c, nil
	}
	c.PCC = numerics.PCC(want.Data, got)
	c.MaxRel = numerics.MaxRelErr(want.Data, got)
	c.OK = c.PCC >= threshold
	return c, nil
}

func (c outputCheck) describe() string {
	status := "ok"
	if !c.OK {
		status = "FAIL"
	}
	if c.Exact {
		if c.OK {
			return "exact match  ok"
		}
		return "values differ  FAIL"
	}
	return fmt.Sprintf("PCC %.6f  max rel err %.3g  %s", c.PCC, c.MaxRel, status)
}

// randomEnv draws the model's weights and states (InitWeight) and random
// inputs (token ids below the embedding's vocabulary), deterministically
// from seed.
func randomEnv(m models.Model, g *ir.Graph, seed int64) map[*ir.Value]ref.Tensor {
	env := map[*ir.Value]ref.Tensor{}
	rng := rand.New(rand.NewSource(seed))
	for _, v := range append(append([]*ir.Value(nil), g.Weights...), g.States...) {
		env[v] = ref.Tensor{Shape: v.Type.Shape.Clone(), Data: m.InitWeight(v, rng)}
	}
	for _, v := range g.Inputs {
		data := make([]float32, v.Type.Shape.Numel())
		limit := inputLimit(g, v)
		for i := range data {
			if v.Type.DType.IsFloat() {
				data[i] = float32(rng.NormFloat64())
			} else {
				data[i] = float32(rng.Intn(limit))
			}
		}
		env[v] = ref.Tensor{Shape: v.Type.Shape.Clone(), Data: data}
	}
	return env
}

// inputLimit bounds an integer input: token ids index the embedding table.
func inputLimit(g *ir.Graph, v *ir.Value) int {
	for _, op := range g.Ops() {
		if op.Kind == ir.OpEmbedding && op.Operands[0] == v {
			return op.Operands[1].Type.Shape[0]
		}
	}
	return 1
}
