package qwen27b

import (
	"fmt"

	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/models"
)

// DeviceEnv draws every weight and state on the one-device graph of the
// same options and cuts each device's share (ShareOf), so every mesh
// computes the same function.
func (m Model) DeviceEnv(a models.Args, g *ir.Graph, seed int64) ([]map[*ir.Value][]float32, error) {
	o, err := OptionsFrom(a)
	if err != nil {
		return nil, err
	}
	whole, _, err := BuildGraph(o, ir.Mesh{Rows: 1, Cols: 1})
	if err != nil {
		return nil, err
	}
	full := map[string]struct {
		v    *ir.Value
		data []float32
	}{}
	for v, data := range models.InitAll(m, whole, seed) {
		full[v.Name] = struct {
			v    *ir.Value
			data []float32
		}{v, data}
	}
	if o.Loop() {
		c := o.Config
		cos, sin := RopeTableRows(c.RotaryDim(), c.RopeTheta, o.MaxSeq)
		for name, data := range map[string][]float32{RopeCosTable: cos, RopeSinTable: sin} {
			if w, ok := full[name]; ok {
				copy(w.data, data)
			}
		}
	}
	n := g.Mesh.Devices()
	envs := make([]map[*ir.Value][]float32, n)
	for d := range envs {
		envs[d] = map[*ir.Value][]float32{}
	}
	for _, v := range append(append([]*ir.Value(nil), g.Weights...), g.States...) {
		w, ok := full[v.Name]
		if !ok {
			return nil, fmt.Errorf("qwen27b: %s %q has no counterpart on the one-device graph", v.Kind, v.Name)
		}
		share, err := ShareOf(o.Config, v.Name, n)
		if err != nil {
			return nil, err
		}
		for d := 0; d < n; d++ {
			cut, shape, err := share.Cut(w.data, w.v.Type.Shape, d, n)
			if err != nil {
				return nil, fmt.Errorf("qwen27b: %q device %d: %w", v.Name, d, err)
			}
			if !shape.Equal(v.Type.Shape) {
				return nil, fmt.Errorf("qwen27b: %q device %d: cut is %s, the graph wants %s", v.Name, d, shape, v.Type.Shape)
			}
			envs[d][v] = cut
		}
	}
	return envs, nil
}

// StepInputs feeds tokens (decode: one per user; prefill: Seq per user)
// at positions pos.. with the matching RoPE tables, every user at pos (a
// lockstep run: decode's "pos" holds B equal words); every device gets
// the same inputs.
func (Model) StepInputs(a models.Args, g *ir.Graph, tokens [][]int, pos int) ([]map[*ir.Value][]float32, error) {
	o, err := OptionsFrom(a)
	if err != nil {
		return nil, err
	}
	per := 1
	if o.Mode == Prefill {
		per = o.Seq
	}
	if len(tokens) != o.Batch {
		return nil, fmt.Errorf("qwen27b: %d users given, the graph has batch %d", len(tokens), o.Batch)
	}
	// Bound at the boundary: a step past the KV cache would write each
	// head's new K/V rows into the next head's (and past the cache).
	if pos < 0 || pos+per > o.MaxSeq {
		return nil, fmt.Errorf("qwen27b: a %s step at position %d writes positions %d..%d, but the KV cache holds %d (--max-seq %d); raise --max-seq or stop earlier",
			o.Mode, pos, pos, pos+per-1, o.MaxSeq, o.MaxSeq)
	}
	var ids []float32
	for b, t := range tokens {
		if len(t) != per {
			return nil, fmt.Errorf("qwen27b: user %d: %d tokens, the %s graph takes %d", b, len(t), o.Mode, per)
		}
		for _, id := range t {
			ids = append(ids, float32(id))
		}
	}
	c := o.Config
	var cos, sin []float32
	if o.Mode == Prefill {
		cos, sin = RopePrefillTables(c.RotaryDim(), c.RopeTheta, pos, o.Seq)
	} else {
		cos, sin = RopeTables(c.RotaryDim(), c.RopeTheta, pos, o.Batch)
	}
	posv := []float32{float32(pos)}
	if o.Mode != Prefill {
		posv = make([]float32, o.Batch)
		for b := range posv {
			posv[b] = float32(pos)
		}
	}
	byName := map[string][]float32{"tokens": ids, "pos": posv, "rope.cos": cos, "rope.sin": sin}
	in := map[*ir.Value][]float32{}
	for _, v := range g.Inputs {
		data, ok := byName[v.Name]
		if !ok {
			return nil, fmt.Errorf("qwen27b: no data for input %q", v.Name)
		}
		if len(data) != v.Type.Shape.Numel() {
			return nil, fmt.Errorf("qwen27b: input %q: %d values for shape %s", v.Name, len(data), v.Type.Shape)
		}
		in[v] = data
	}
	envs := make([]map[*ir.Value][]float32, g.Mesh.Devices())
	for d := range envs {
		envs[d] = in
	}
	return envs, nil
}

// LoopState returns, for every device, the contents of the device-loop
// state for a decode step feeding tokens (one per user) with every user at
// pos: what the host writes once before the first device-loop step (the
// steps after it advance both on the device). A graph built without
// --device-loop has no such state: the maps are empty.
func (Model) LoopState(a models.Args, g *ir.Graph, tokens [][]int, pos int) ([]map[*ir.Value][]float32, error) {
	o, err := OptionsFrom(a)
	if err != nil {
		return nil, err
	}
	if len(tokens) != o.Batch {
		return nil, fmt.Errorf("qwen27b: %d users given, the graph has batch %d", len(tokens), o.Batch)
	}
	if pos < 0 || pos >= o.MaxSeq {
		return nil, fmt.Errorf("qwen27b: a decode step at position %d, but the KV cache holds %d (--max-seq %d)", pos, o.MaxSeq, o.MaxSeq)
	}
	ids := make([]float32, 0, o.Batch)
	for b, t := range tokens {
		if len(t) != 1 {
			return nil, fmt.Errorf("qwen27b: user %d: %d tokens, a decode step takes 1", b, len(t))
		}
		ids = append(ids, float32(t[0]))
	}
	posv := make([]float32, o.Batch)
	for b := range posv {
		posv[b] = float32(pos)
	}
	byName := map[string][]float32{LoopTokens: ids, LoopPos: posv}
	in := map[*ir.Value][]float32{}
	for _, v := range g.States {
		if data, ok := byName[v.Name]; ok {
			in[v] = data
		}
	}
	envs := make([]map[*ir.Value][]float32, g.Mesh.Devices())
	for d := range envs {
		envs[d] = in
	}
	return envs, nil
}

// PositionLimit is the number of positions a run may use: the KV cache
// length (--max-seq).
func (Model) PositionLimit(a models.Args) (int, error) {
	o, err := OptionsFrom(a)
	if err != nil {
		return 0, err
	}
	return o.MaxSeq, nil
}

// Vocab is the config's vocab_size.
func (Model) Vocab(a models.Args) (int, error) {
	o, err := OptionsFrom(a)
	if err != nil {
		return 0, err
	}
	return o.Config.VocabSize, nil
}
