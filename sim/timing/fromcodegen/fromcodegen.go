package fromcodegen

import (
	"fmt"

	"github.com/tcc-dev/tcc/codegen"
	"github.com/tcc-dev/tcc/sim/timing"
)

// Build is b as the timing model sees it: b's target and mesh, its
// programs in order, its buffers (a state's buffer also holding the
// state's new value; the KV caches marked, codegen.KVCaches) and what
// they occupy in each device's DRAM. It has no position: the position
// buffer's word reads 0 and the floor counts the KV caches in full
// (BuildAt gives one).
func Build(b *codegen.Build) *timing.Build {
	tb := &timing.Build{Target: b.Target, Mesh: b.Graph.Mesh}
	for _, p := range b.Programs {
		tb.Programs = append(tb.Programs, timing.Program(*p))
	}
	kv := codegen.KVCaches(b.Graph)
	for _, s := range b.Buffers {
		tb.Buffers = append(tb.Buffers, timing.Buffer{Name: s.Name, Value: s.Value, Update: b.Graph.StateUpdates[s.Value],
			Mem: s.Mem, PageSize: s.PageSize, Pages: s.Pages, KV: kv[s.Value]})
	}
	tb.Memory = Memory(b.Memory())
	return tb
}

// Memory is u as the timing report carries it (with what is free).
func Memory(u codegen.MemoryUse) *timing.Memory {
	return &timing.Memory{Weights: u.Weights, KV: u.KV, State: u.State, Other: u.Other, Total: u.Total, Capacity: u.Capacity, Free: u.Free()}
}

// BuildAt is Build with the step at st: the buffers of b's position
// inputs (codegen.PositionInputs: the inputs the ops read as their "pos"
// operand, which the host fills with the step's first position) hold
// st.Pos in every word (a decode "pos" [B] holds one per user), or with
// st.Users user b's position in word b, so the kernels that read them
// run their loops as at those positions, and the floor counts the KV
// caches up to st.Last() (st.Users: each user's rows up to its own). It
// fails when b has no position input, a position is negative, or
// st.Users does not match a position buffer of one word per user.
func BuildAt(b *codegen.Build, st timing.Step) (*timing.Build, error) {
	if st.Pos < 0 || st.Tokens < 1 {
		return nil, fmt.Errorf("timing: a step at position %d writing %d tokens per user", st.Pos, st.Tokens)
	}
	for u, p := range st.Users {
		if p < 0 || p > st.Pos {
			return nil, fmt.Errorf("timing: user %d at position %d (want 0..%d, the step's position the largest)", u, p, st.Pos)
		}
	}
	pos := codegen.PositionInputs(b.Graph)
	if len(pos) == 0 {
		return nil, fmt.Errorf("timing: graph %q has no position input (no op reads a \"pos\" operand): there is no position to predict at", b.Graph.Name)
	}
	tb := Build(b)
	tb.Step = &st
	for _, v := range pos {
		s := b.BufferOf(v)
		if s == nil {
			return nil, fmt.Errorf("timing: position input %s (%q) has no buffer", v, v.Name)
		}
		if !s.Mem.Kind.IsDRAM() || s.Blocks != nil {
			return nil, fmt.Errorf("timing: position input %s (%q) is placed %s; the timing model knows the contents of DRAM-interleaved buffers only", v, v.Name, s.Mem)
		}
		n := v.Type.Shape.Numel()
		words := make([]uint32, n)
		for i := range words {
			words[i] = uint32(st.Pos)
		}
		switch {
		case st.Users == nil:
		case n == len(st.Users):
			for i, p := range st.Users {
				words[i] = uint32(p)
			}
		default:
			return nil, fmt.Errorf("timing: %d user positions given, but position input %s (%q) holds %d", len(st.Users), v, v.Name, n)
		}
		for i := range tb.Buffers {
			if tb.Buffers[i].Name == s.Name {
				tb.Buffers[i].Words = words
			}
		}
	}
	return tb, nil
}
