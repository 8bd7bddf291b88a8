package models

import (
	"math/rand"
	"sort"

	"github.com/tcc-dev/tcc/ir"
)

// Runner is implemented by models that can be driven step by step with
// host data: what `tcc run` needs to feed a build and check it.
//
// Graph conventions: Outputs[0] is the logits and Outputs[1] the greedy
// next token of every user.
type Runner interface {
	// DeviceEnv returns, for every device of g.Mesh, the contents of each
	// weight and state of g (a graph Build returned for args), drawn
	// deterministically from seed. On a mesh, every device gets its cut of
	// one whole tensor, so sharded and unsharded graphs compute the same
	// function.
	DeviceEnv(args Args, g *ir.Graph, seed int64) ([]map[*ir.Value][]float32, error)
	// StepInputs returns, for every device, g's inputs for one step that
	// feeds tokens[b] (the new tokens of user b) starting at position pos.
	StepInputs(args Args, g *ir.Graph, tokens [][]int, pos int) ([]map[*ir.Value][]float32, error)
	// Vocab is the number of token ids a build made with args takes (the
	// model's vocab_size): ids 0..Vocab-1.
	Vocab(args Args) (int, error)
}

// InitAll draws every weight and state of g with m.InitWeight, in sorted
// name order so the result does not depend on map or declaration order.
func InitAll(m Model, g *ir.Graph, seed int64) map[*ir.Value][]float32 {
	vals := append(append([]*ir.Value(nil), g.Weights...), g.States...)
	sort.SliceStable(vals, func(i, j int) bool { return vals[i].Name < vals[j].Name })
	rng := rand.New(rand.NewSource(seed))
	env := map[*ir.Value][]float32{}
	for _, v := range vals {
		env[v] = m.InitWeight(v, rng)
	}
	return env
}
