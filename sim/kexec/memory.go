package kexec

const chunkBits = 12
const chunkSize = 1 << chunkBits

// memory is a lazily allocated byte space of a fixed size; unwritten bytes
// read as the garbage pattern (newGarbageMemory).
type memory struct {
	size   uint64
	chunks []*[chunkSize]byte
}

// newGarbageMemory is a memory whose never-written bytes read as the
// garbage pattern, as L1 SRAM and DRAM hold whatever the last program (or
// the last model loaded) left: every
// 16-bit half is 0x7FFF and every 32-bit word 0x7FFF7FFF, a NaN in bf16 and
// fp32 and a huge count as an integer, so a kernel that uses L1 it never
// wrote gets visibly wrong results instead of convenient zeros.
func newGarbageMemory(size uint64) *memory { return &memory{size: size} }

// garbageChunk is one chunk of the garbage pattern.
var garbageChunk = func() *[chunkSize]byte {
	var c [chunkSize]byte
	for i := range c {
		if i%2 == 0 {
			c[i] = 0xFF
		} else {
			c[i] = 0x7F
		}
	}
	return &c
}()

func (m *memory) inBounds(addr, n uint64) bool { return addr <= m.size && n <= m.size-addr }

// read copies len(dst) bytes at addr into dst; the caller checks bounds.
func (m *memory) read(addr uint64, dst []byte) {
	for len(dst) > 0 {
		ci, off := addr>>chunkBits, addr&(chunkSize-1)
		n := min(uint64(len(dst)), chunkSize-off)
		switch {
		case ci < uint64(len(m.chunks)) && m.chunks[ci] != nil:
			copy(dst[:n], m.chunks[ci][off:off+n])
		default:
			copy(dst[:n], garbageChunk[off:off+n])
		}
		dst = dst[n:]
		addr += n
	}
}

// write copies src to addr; the caller checks bounds.
func (m *memory) write(addr uint64, src []byte) {
	for len(src) > 0 {
		ci, off := addr>>chunkBits, addr&(chunkSize-1)
		n := min(uint64(len(src)), chunkSize-off)
		for uint64(len(m.chunks)) <= ci {
			m.chunks = append(m.chunks, nil)
		}
		if m.chunks[ci] == nil {
			m.chunks[ci] = new([chunkSize]byte)
			*m.chunks[ci] = *garbageChunk
		}
		copy(m.chunks[ci][off:off+n], src[:n])
		src = src[n:]
		addr += n
	}
}

func (m *memory) read32(addr uint64) uint32 {
	var b [4]byte
	m.read(addr, b[:])
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}

func (m *memory) write32(addr uint64, v uint32) {
	m.write(addr, []byte{byte(v), byte(v >> 8), byte(v >> 16), byte(v >> 24)})
}
