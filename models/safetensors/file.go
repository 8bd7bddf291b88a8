package safetensors

import (
	"fmt"
	"os"
)

// File is one open safetensors file. Its header is read at Open; tensor
// data is read on demand by Bytes.
type File struct {
	Path   string
	Header *Header
	f      *os.File
	size   int64
	mapped []byte // the whole file when mapped, else nil
}

// Open reads and validates the header of the safetensors file at path
// (see ParseHeader) and maps the file for lazy reads where the platform
// allows. The caller must Close it.
func Open(path string) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %v", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("safetensors: %s: %v", path, err)
	}
	size := st.Size()
	var prefix [8]byte
	n, _ := f.ReadAt(prefix[:], 0)
	hlen, err := ParsePrefix(prefix[:n], size)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("safetensors: %s: %v", path, err)
	}
	js := make([]byte, hlen)
	if _, err := f.ReadAt(js, 8); err != nil {
		f.Close()
		return nil, fmt.Errorf("safetensors: %s: reading the %d-byte header: %v", path, hlen, err)
	}
	h, err := ParseHeader(js, size-8-hlen)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("safetensors: %s: %v", path, err)
	}
	h.DataStart = 8 + hlen
	sf := &File{Path: path, Header: h, f: f, size: size}
	if m, err := mmapFile(f, size); err == nil {
		sf.mapped = m
	}
	return sf, nil
}

// Mapped reports whether tensor data is read through a memory mapping.
func (f *File) Mapped() bool { return f.mapped != nil }

// Bytes returns the raw little-endian data of tensor name. With a mapped
// file the result is a read-only view of the mapping, valid until Close;
// otherwise it is a fresh copy.
func (f *File) Bytes(name string) ([]byte, error) {
	t, ok := f.Header.Lookup(name)
	if !ok {
		return nil, fmt.Errorf("safetensors: %s: no tensor %q", f.Path, name)
	}
	lo, hi := f.Header.DataStart+t.Begin, f.Header.DataStart+t.End
	if f.mapped != nil {
		return f.mapped[lo:hi:hi], nil
	}
	b := make([]byte, hi-lo)
	if _, err := f.f.ReadAt(b, lo); err != nil {
		return nil, fmt.Errorf("safetensors: %s: tensor %q: reading bytes [%d, %d): %v", f.Path, name, lo, hi, err)
	}
	return b, nil
}

// Release drops the mapped pages wholly inside bytes [lo, hi) of tensor
// name's data (see Checkpoint.Release).
func (f *File) Release(name string, lo, hi int64) {
	t, ok := f.Header.Lookup(name)
	if !ok || f.mapped == nil {
		return
	}
	a, b := f.Header.DataStart+t.Begin+max(lo, 0), f.Header.DataStart+min(t.Begin+hi, t.End)
	page := int64(os.Getpagesize())
	a = (a + page - 1) / page * page
	b = b / page * page
	if a < b {
		release(f.mapped[a:b])
	}
}

// Close unmaps and closes the file.
func (f *File) Close() error {
	if f.mapped != nil {
		munmap(f.mapped)
		f.mapped = nil
	}
	return f.f.Close()
}
