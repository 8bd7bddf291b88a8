package codegen

import (
	"bufio"
	"crypto/sha256"
	"fmt"
	"hash"
	"strconv"

	"github.com/tcc-dev/tcc/codegen/cpp"
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/target"
)

// memo validates each distinct program of a build once and keeps every
// kernel's C++ for rendering. Programs of different layers usually differ
// only in the buffers they name (581 programs, 16 signatures, in the 27B
// decode step); signature identifies them up to that.
type memo struct {
	t       *target.Target
	valid   map[[32]byte]bool
	printed map[*kir.Kernel][]byte
	// sources interns the printed C++: kernels that print identically
	// (the same kernel of every layer) share one slice.
	sources map[string][]byte
	// h and w are signature's hash and its buffered writer, reused from
	// program to program.
	h hash.Hash
	w *bufio.Writer
}

func newMemo(t *target.Target) *memo {
	h := sha256.New()
	return &memo{t: t, valid: map[[32]byte]bool{}, printed: map[*kir.Kernel][]byte{}, sources: map[string][]byte{}, h: h, w: bufio.NewWriterSize(h, 16<<10)}
}

// validate is kir.Validate(p, m.t), skipped for a signature already
// validated.
func (m *memo) validate(p *kir.Program) error {
	sig, ok := m.signature(p)
	if ok && m.valid[sig] {
		return nil
	}
	if err := kir.Validate(p, m.t); err != nil {
		return err
	}
	if ok {
		m.valid[sig] = true
	}
	return nil
}

// signature hashes everything in p that Validate reads (what pointers
// point to, never their addresses), buffer names
// replaced by their position in p.Buffers and descriptive names (the
// program's, the CBs') left out; kernel bodies enter as their printed C++,
// which the printer derives from the body alone. ok is false when a
// kernel does not print (the program then goes to Validate).
func (m *memo) signature(p *kir.Program) (sig [32]byte, ok bool) {
	pos := make(map[string]int, len(p.Buffers))
	for i, b := range p.Buffers {
		pos[b.Name] = i
	}
	// The text is streamed into the hash (it runs to megabytes per
	// program for the wide collectives; only its digest is kept).
	h, sb := m.h, m.w
	h.Reset()
	sb.Reset(h)
	var num []byte
	itoa := func(n int) {
		num = strconv.AppendInt(num[:0], int64(n), 10)
		sb.Write(num)
		sb.WriteByte(',')
	}
	value := func(v kir.ArgValue) {
		itoa(int(v.Kind))
		itoa(int(v.Const))
		if i, ok := pos[v.Buffer]; ok {
			sb.WriteByte('#')
			itoa(i)
		} else if v.Buffer != "" {
			sb.WriteString(strconv.Quote(v.Buffer))
		}
		itoa(v.Core.X)
		itoa(v.Core.Y)
		sb.WriteByte(';')
	}
	for _, b := range p.Buffers {
		// The pointed-to shard spec and block layout enter by value (%+v
		// prints a nested pointer's address, which differs from layer to
		// layer while the contents do not).
		shard, blocks := b.Mem.Shard, b.Blocks
		b.Name, b.Mem.Shard, b.Blocks = "", nil, nil
		fmt.Fprintf(sb, "buffer %+v", b)
		if shard != nil {
			fmt.Fprintf(sb, " shard %+v", *shard)
		}
		if blocks != nil {
			fmt.Fprintf(sb, " blocks %+v", *blocks)
		}
		sb.WriteByte('\n')
	}
	for _, c := range p.CBs {
		c.Name = ""
		if i, ok := pos[c.Backing]; ok {
			c.Backing = "#" + strconv.Itoa(i)
		}
		fmt.Fprintf(sb, "cb %+v\n", c)
	}
	fmt.Fprintf(sb, "semaphores %+v\n", p.Semaphores)
	for _, k := range p.Kernels {
		src, err := cpp.PrintKernel(p, k)
		if err != nil {
			return sig, false
		}
		if same, ok := m.sources[string(src)]; ok {
			src = same
		} else {
			m.sources[string(src)] = src
		}
		m.printed[k] = src
		fmt.Fprintf(sb, "kernel %q %v %v %d %d %v %+v %v\n", k.Name, k.Role, k.Processor, k.NoC, k.TXQ, k.Cores, k.Compute, k.Defines)
		for _, a := range k.Args {
			sb.WriteString("arg ")
			sb.WriteString(strconv.Quote(a.Name))
			sb.WriteByte(' ')
			itoa(int(a.Kind))
			itoa(a.Index)
			value(a.Value)
		}
		for _, ca := range k.RuntimeValues {
			sb.WriteString("\ncore ")
			itoa(ca.Core.X)
			itoa(ca.Core.Y)
			for _, v := range ca.Values {
				value(v)
			}
		}
		sb.WriteString("\nsource\n")
		sb.Write(src)
	}
	if err := sb.Flush(); err != nil { // a hash's Write never fails
		return sig, false
	}
	h.Sum(sig[:0])
	return sig, true
}
