package cli

import (
	"strconv"

	"github.com/tcc-dev/tcc/models"
)

// defaultPrefillChunk is --prefill-chunk's default (tcc run, tcc perf):
// the prompt tokens of one prefill step.
const defaultPrefillChunk = 64

// prefillSegments splits a prompt of n tokens into the lengths of its
// prefill steps: as many chunks of chunk tokens as fit, then the rest;
// nil for n = 0. The runs then need at most two prefill builds, whatever
// the prompt's length. tcc run runs a prompt so and tcc perf
// --prompt-tokens predicts it so.
func prefillSegments(n, chunk int) []int {
	var segs []int
	for ; n >= chunk; n -= chunk {
		segs = append(segs, chunk)
	}
	if n > 0 {
		segs = append(segs, n)
	}
	return segs
}

// prefillStep is one prefill step of a prompt: the Tokens tokens it
// writes starting at position Pos.
type prefillStep struct {
	Pos, Tokens int
}

// prefillSteps is prefillSegments(n, chunk) with each step's first
// position: the sum of the lengths before it (0, chunk, 2*chunk, ...).
func prefillSteps(n, chunk int) []prefillStep {
	segs := prefillSegments(n, chunk)
	steps := make([]prefillStep, len(segs))
	pos := 0
	for i, s := range segs {
		steps[i] = prefillStep{Pos: pos, Tokens: s}
		pos += s
	}
	return steps
}

// prefillArgs is args (a decode build's) for a prefill step of seq tokens.
func prefillArgs(args models.Args, seq int) models.Args {
	out := models.Args{}
	for k, v := range args {
		out[k] = v
	}
	out["mode"], out["seq"] = "prefill", strconv.Itoa(seq)
	return out
}
