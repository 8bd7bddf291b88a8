package cli

import (
	"fmt"
	"math"
	"math/rand"

	"github.com/tcc-dev/tcc/ir"
)

// lastTokens turns the next-token output into one token list per user.
func lastTokens(next []float32, batch int) [][]int {
	per := len(next) / batch
	out := make([][]int, batch)
	for b := range out {
		out[b] = []int{int(next[(b+1)*per-1])}
	}
	return out
}

// tokenTieULPs is the near-tie window of the token check, in ulps of the
// logits' dtype at the reference's top logit: the spacing of that dtype
// around the value (bf16 keeps 8 significant bits, so 2^(e-7) for a logit
// in [2^e, 2^(e+1)); 0.015625 around 3.0). A device token that differs from
// the reference's is a near tie, not a failure, when the reference's logit
// of the device's token is at most this many ulps below its top logit.
// The device's logits differ from the reference's by a median of 1 ulp of
// the top logit (p90 2, max 10, small qwen27b config): two logits each off
// by the p90 can swap an order held by up to 4 ulps. A window in ulps
// scales with the logits' own precision, where a fixed relative window
// (1e-2 * max(1, |a|)) called the B = 10 gap of 2 bf16 ulps (reference
// 3.0000 vs 2.9688) a mismatch.
const tokenTieULPs = 4

// ulp is the spacing of dtype dt's values around x: 2^(e-m) for |x| in
// [2^e, 2^(e+1)) with m fraction bits (block floats: an element's bits at
// the block's largest exponent, the top logit's).
func ulp(dt ir.DType, x float64) float64 {
	m := dt.FractionBits()
	if m == 0 {
		m = ir.FP32.FractionBits()
	}
	_, e := math.Frexp(math.Abs(x)) // |x| = f * 2^e, f in [0.5, 1)
	if x == 0 {
		e = -125
	}
	return math.Ldexp(1, e-1-m)
}

// tokenMismatch describes users whose device token differs from the
// reference's, ignoring near ties (the reference's logit of the device's
// token within tokenTieULPs ulps of dt below its top logit); "" when all
// match.
func tokenMismatch(logits, refNext []float32, dt ir.DType, got [][]int, batch int) string {
	vocab := len(logits) / batch
	per := len(refNext) / batch
	var bad []string
	for b := 0; b < batch; b++ {
		want := int(refNext[(b+1)*per-1])
		if got[b][0] == want {
			continue
		}
		row := logits[b*vocab : (b+1)*vocab]
		if want < len(row) && got[b][0] >= 0 && got[b][0] < len(row) {
			a, c := float64(row[want]), float64(row[got[b][0]])
			if d := a - c; d >= 0 && d <= tokenTieULPs*ulp(dt, a) {
				continue
			}
			bad = append(bad, fmt.Sprintf("user %d: %d, reference %d (reference logits %.4f vs %.4f: %.1f ulps apart, near-tie window %d)",
				b, got[b][0], want, c, a, (a-c)/ulp(dt, a), tokenTieULPs))
			continue
		}
		bad = append(bad, fmt.Sprintf("user %d: %d, reference %d", b, got[b][0], want))
	}
	if len(bad) == 0 {
		return ""
	}
	return fmt.Sprint(bad)
}

// tokenSalt separates the token draws from the weight draws of a seed.
const tokenSalt = 0x746f6b656e73 // "tokens"

// runTokens draws n token ids in [0, vocab) for each of batch users from
// seed: the users' first tokens are distinct (while batch <= vocab), the
// rest uniform, so every user is its own stream and every seed its own run.
func runTokens(seed int64, batch, vocab, n int) [][]int {
	rng := rand.New(rand.NewSource(seed ^ tokenSalt))
	first := rng.Perm(vocab)
	out := make([][]int, batch)
	for b := range out {
		out[b] = append(make([]int, 0, n), first[b%vocab])
		for len(out[b]) < n {
			out[b] = append(out[b], rng.Intn(vocab))
		}
	}
	return out
}

// rekeyInputs maps per-device inputs keyed by one graph's values to the
// inputs of graph g with the same names.
func rekeyInputs(ins []map[*ir.Value][]float32, g *ir.Graph) ([]map[*ir.Value][]float32, error) {
	out := make([]map[*ir.Value][]float32, len(ins))
	for d, in := range ins {
		byName := map[string][]float32{}
		for v, data := range in {
			byName[v.Name] = data
		}
		out[d] = map[*ir.Value][]float32{}
		for _, v := range g.Inputs {
			data, ok := byName[v.Name]
			if !ok {
				return nil, fmt.Errorf("the unfused graph's input %q has no data", v.Name)
			}
			out[d][v] = data
		}
	}
	return out, nil
}
