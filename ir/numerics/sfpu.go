package numerics

import "math"

// The SFPU helpers below are the element functions the reference evaluator
// and the simulator share. Each evaluates the textbook formula in float64
// with the Go standard library and rounds once to float32, so both sides of
// a comparison see identical values. They follow IEEE special-value rules
// (NaN in, NaN out).

// Exp returns e^x: +Inf past float32 range, 0 for very negative x.
func Exp(x float32) float32 {
	return float32(math.Exp(float64(x)))
}

// Sigmoid returns 1 / (1 + e^-x), in [0, 1]; Sigmoid(+Inf) = 1,
// Sigmoid(-Inf) = 0.
func Sigmoid(x float32) float32 {
	return float32(sigmoid64(float64(x)))
}

func sigmoid64(x float64) float64 {
	if x >= 0 {
		return 1 / (1 + math.Exp(-x))
	}
	e := math.Exp(x) // avoids overflow of e^-x for very negative x
	return e / (1 + e)
}

// SiLU returns x * sigmoid(x) (also called swish), with the product taken in
// float64 before the single rounding. SiLU(-Inf) = NaN (-Inf * 0), as the
// formula gives.
func SiLU(x float32) float32 {
	xf := float64(x)
	return float32(xf * sigmoid64(xf))
}

// Rsqrt returns 1 / sqrt(x): +Inf for +0, -Inf for -0 (1/(-0)), NaN for
// x < 0, 0 for +Inf.
func Rsqrt(x float32) float32 {
	return float32(1 / math.Sqrt(float64(x)))
}

// Recip returns 1 / x: ±Inf for ±0, ±0 for ±Inf.
func Recip(x float32) float32 {
	return float32(1 / float64(x))
}

// Softplus returns log(1 + e^(beta*x)) / beta, and x itself where
// beta*x > threshold (PyTorch's definition; the usual arguments are beta 1,
// threshold 20). log1p is used for accuracy at large negative beta*x.
func Softplus(x, beta, threshold float32) float32 {
	xf, bf := float64(x), float64(beta)
	bx := bf * xf
	if bx > float64(threshold) {
		return x
	}
	return float32(math.Log1p(math.Exp(bx)) / bf)
}
