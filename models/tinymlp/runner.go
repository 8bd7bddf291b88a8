package tinymlp

import (
	"fmt"

	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/models"
)

// DeviceEnv draws the weights (one device).
func (m Model) DeviceEnv(_ models.Args, g *ir.Graph, seed int64) ([]map[*ir.Value][]float32, error) {
	return []map[*ir.Value][]float32{models.InitAll(m, g, seed)}, nil
}

// StepInputs feeds one token per user; tiny-mlp has no positions. A
// device-loop graph takes no input (LoopState).
func (Model) StepInputs(_ models.Args, g *ir.Graph, tokens [][]int, _ int) ([]map[*ir.Value][]float32, error) {
	if len(g.Inputs) == 0 {
		return []map[*ir.Value][]float32{{}}, nil
	}
	return tokenData(g.Inputs[0], tokens)
}

// LoopState is the device-loop graph's tokens state for a step feeding
// tokens, which the host writes once before the first step; empty for a
// graph that takes its tokens as input.
func (Model) LoopState(_ models.Args, g *ir.Graph, tokens [][]int, _ int) ([]map[*ir.Value][]float32, error) {
	for _, s := range g.States {
		if s.Name == LoopTokens {
			return tokenData(s, tokens)
		}
	}
	return []map[*ir.Value][]float32{{}}, nil
}

// tokenData is ids's contents for one token per user.
func tokenData(ids *ir.Value, tokens [][]int) ([]map[*ir.Value][]float32, error) {
	if len(tokens) != ids.Type.Shape[0] {
		return nil, fmt.Errorf("tiny-mlp: %d users given, the graph has batch %d", len(tokens), ids.Type.Shape[0])
	}
	data := make([]float32, len(tokens))
	for b, t := range tokens {
		if len(t) != 1 {
			return nil, fmt.Errorf("tiny-mlp: user %d: %d tokens; tiny-mlp decodes one token per step", b, len(t))
		}
		data[b] = float32(t[0])
	}
	return []map[*ir.Value][]float32{{ids: data}}, nil
}

// Vocab is --vocab.
func (Model) Vocab(a models.Args) (int, error) {
	s, err := SizesFrom(a)
	if err != nil {
		return 0, err
	}
	return s.Vocab, nil
}
