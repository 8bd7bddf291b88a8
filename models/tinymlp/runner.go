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

// StepInputs feeds one token per user; tiny-mlp has no positions.
func (Model) StepInputs(_ models.Args, g *ir.Graph, tokens [][]int, _ int) ([]map[*ir.Value][]float32, error) {
	ids := g.Inputs[0]
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
