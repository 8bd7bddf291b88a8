package numerics

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tcc-dev/tcc/ir"
)

// resetSrcACache empties the SrcA cache and sets its budget, restoring
// both when the test ends.
func resetSrcACache(t *testing.T, budget int) {
	t.Helper()
	c := &srcACache
	c.Lock()
	saved, savedBudget := c.entries, srcACacheBytes
	savedOrder, savedBytes := c.order, c.bytes
	c.entries, c.order, c.bytes, srcACacheBytes = map[srcAKey][]*srcAEntry{}, nil, 0, budget
	c.Unlock()
	t.Cleanup(func() {
		c.Lock()
		c.entries, c.order, c.bytes, srcACacheBytes = saved, savedOrder, savedBytes, savedBudget
		c.Unlock()
	})
}

func randMatrix(r *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	return x
}

// TestSrcACacheByContent: a matrix with the same bits hits the cache from
// any backing array; one changed in place after it was cached is converted
// again, so Matmul sees its new values.
func TestSrcACacheByContent(t *testing.T) {
	const k, n = 70, 96 // k pads to 96 (three tiles)
	r := rand.New(rand.NewPCG(1, 2))
	tests := []struct {
		name    string
		mutate  func(b []float32) []float32 // returns the matrix for the second call
		wantHit bool
	}{
		{"same array unchanged hits", func(b []float32) []float32 { return b }, true},
		{"copy with the same bits hits", func(b []float32) []float32 { return slices.Clone(b) }, true},
		{"value changed in place misses", func(b []float32) []float32 { b[5*n+17] += 1; return b }, false},
		{"sign of a zero changed in place misses", func(b []float32) []float32 { b[0] = 0; b[0] = -b[0]; return b }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resetSrcACache(t, 96<<20)
			a := randMatrix(r, 3*k)
			b := randMatrix(r, k*n)
			b[0] = 0
			first := srcAOf(b, k, n)
			b2 := tt.mutate(b)
			got := srcAOf(b2, k, n)
			if hit := &got[0] == &first[0]; hit != tt.wantHit {
				t.Errorf("second srcAOf shares the first's conversion = %v, want %v", hit, tt.wantHit)
			}
			if want := convertSrcA(b2, k, n); !slices.Equal(want, got) {
				i := 0
				for want[i] == got[i] {
					i++
				}
				t.Errorf("srcAOf after the change differs from the uncached conversion (first at %d)", i)
			}
			gotMM := Matmul(a, b2, 3, k, n, ir.HiFi4)
			resetSrcACache(t, 96<<20)
			wantMM := Matmul(a, slices.Clone(b2), 3, k, n, ir.HiFi4)
			if diff := cmp.Diff(wantMM, gotMM); diff != "" {
				t.Errorf("Matmul after the change (-want from an empty cache +got):\n%s", diff)
			}
		})
	}
}

// TestSrcACacheBudget: the cache never holds more than its budget; the
// oldest entries are dropped first and a dropped matrix converts again.
func TestSrcACacheBudget(t *testing.T) {
	const k, n = 64, 64
	entry := (&srcAEntry{b: make([]byte, k*n*4), srcA: make([]srcParts, k*n)}).size()
	resetSrcACache(t, 4*entry) // an entry may take a quarter of the budget
	r := rand.New(rand.NewPCG(3, 4))
	var mats [][]float32
	var firsts []*srcParts
	for range 6 {
		b := randMatrix(r, k*n)
		mats = append(mats, b)
		firsts = append(firsts, &srcAOf(b, k, n)[0])
		if srcACache.bytes > srcACacheBytes {
			t.Fatalf("cache holds %d bytes, budget %d", srcACache.bytes, srcACacheBytes)
		}
	}
	var hits []bool
	for i := len(mats) - 1; i >= 0; i-- { // newest first: lookups do not evict
		hits = append(hits, &srcAOf(mats[i], k, n)[0] == firsts[i])
	}
	want := []bool{true, true, true, true, false, false}
	if diff := cmp.Diff(want, hits); diff != "" {
		t.Errorf("hits newest to oldest (-want +got):\n%s", diff)
	}
}

// TestSrcACacheSecondChance: an entry hit since it was queued survives the
// next eviction, which drops the oldest entry not hit instead.
func TestSrcACacheSecondChance(t *testing.T) {
	const k, n = 64, 64
	entry := (&srcAEntry{b: make([]byte, k*n*4), srcA: make([]srcParts, k*n)}).size()
	resetSrcACache(t, 4*entry)
	r := rand.New(rand.NewPCG(5, 6))
	var mats [][]float32
	var firsts []*srcParts
	for range 4 {
		b := randMatrix(r, k*n)
		mats = append(mats, b)
		firsts = append(firsts, &srcAOf(b, k, n)[0])
	}
	srcAOf(mats[0], k, n)            // the oldest is hit ...
	srcAOf(randMatrix(r, k*n), k, n) // ... so a fifth evicts the second oldest
	var hits []bool
	for i := len(mats) - 1; i >= 0; i-- {
		hits = append(hits, &srcAOf(mats[i], k, n)[0] == firsts[i])
	}
	want := []bool{true, true, false, true} // mats[3], [2], [1], [0]
	if diff := cmp.Diff(want, hits); diff != "" {
		t.Errorf("hits newest to oldest (-want +got):\n%s", diff)
	}
}
