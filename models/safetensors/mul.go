package safetensors

import "math/bits"

func mulU64(a, b uint64) (hi, lo uint64) { return bits.Mul64(a, b) }
