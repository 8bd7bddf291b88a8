package numerics

import (
	"bytes"
	"hash/maphash"
	"sync"
	"unsafe"
)

// srcACache keeps the SrcA form (srcParts, column-major, k zero padded to
// whole tiles) of recently multiplied right-hand matrices, so that a
// reference evaluation that multiplies by the same weights again (every
// decode step, the fused and the unfused graph of one model) converts
// them once. Entries are keyed by content: a lookup hashes b and then
// compares it with the stored copy byte for byte, so a matrix changed in
// place after it was cached never hits a stale entry.
var srcACache = struct {
	sync.Mutex
	seed    maphash.Seed
	entries map[srcAKey][]*srcAEntry
	order   []*srcAEntry // insertion order, oldest first
	bytes   int          // srcParts and copies held
}{seed: maphash.MakeSeed(), entries: map[srcAKey][]*srcAEntry{}}

// srcACacheBytes bounds the cache's memory. Eviction is second chance:
// the oldest entry goes first unless it was hit since it was last queued,
// when it is queued again.
var srcACacheBytes = 128 << 20

// srcACacheMin is the smallest matrix (k*n values) worth caching.
const srcACacheMin = 4096

type srcAKey struct {
	hash uint64
	k, n int
}

type srcAEntry struct {
	key  srcAKey
	b    []byte     // the matrix's float32 bits
	srcA []srcParts // read only once cached
	hit  bool       // looked up since it was last queued (under the lock)
}

func (e *srcAEntry) size() int { return len(e.b) + len(e.srcA)*int(unsafe.Sizeof(srcParts{})) }

// floatBytes is x's memory as bytes (no copy).
func floatBytes(x []float32) []byte {
	if len(x) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&x[0])), len(x)*4)
}

// srcAOf returns b [k, n] in SrcA form: srcA[j*kp+p] = b[p][j] split by
// partsA (TruncTF32 first), zero for p >= k, kp = k rounded up to whole
// tiles. The result is shared with the cache: callers must not modify it.
func srcAOf(b []float32, k, n int) []srcParts {
	if k*n < srcACacheMin {
		return convertSrcA(b, k, n)
	}
	raw := floatBytes(b)
	c := &srcACache
	key := srcAKey{hash: maphash.Bytes(c.seed, raw), k: k, n: n}
	c.Lock()
	for _, e := range c.entries[key] {
		if bytes.Equal(e.b, raw) {
			e.hit = true
			c.Unlock()
			return e.srcA
		}
	}
	c.Unlock()
	e := &srcAEntry{key: key, b: bytes.Clone(raw), srcA: convertSrcA(b, k, n)}
	if e.size() > srcACacheBytes/4 {
		return e.srcA
	}
	c.Lock()
	defer c.Unlock()
	c.entries[key] = append(c.entries[key], e)
	c.order = append(c.order, e)
	c.bytes += e.size()
	for c.bytes > srcACacheBytes {
		old := c.order[0]
		c.order[0] = nil
		c.order = c.order[1:]
		if old.hit {
			old.hit = false
			c.order = append(c.order, old)
			continue
		}
		c.bytes -= old.size()
		list := c.entries[old.key]
		for i, x := range list {
			if x == old {
				list = append(list[:i:i], list[i+1:]...)
				break
			}
		}
		if len(list) == 0 {
			delete(c.entries, old.key)
		} else {
			c.entries[old.key] = list
		}
	}
	return e.srcA
}

// convertSrcA is srcAOf without the cache.
func convertSrcA(b []float32, k, n int) []srcParts {
	kp := ceilTiles(k) * TileDim
	srcA := make([]srcParts, n*kp)
	zero := partsA(0)
	for j := 0; j < n; j++ {
		col := srcA[j*kp : (j+1)*kp]
		for p := 0; p < k; p++ {
			col[p] = partsA(srcWord(TruncTF32(b[p*n+j])))
		}
		for p := k; p < kp; p++ {
			col[p] = zero
		}
	}
	return srcA
}
