//go:build unix

package safetensors

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// mmapFile maps the whole file read-only.
func mmapFile(f *os.File, size int64) ([]byte, error) {
	if size <= 0 || int64(int(size)) != size {
		return nil, errors.New("cannot map this size")
	}
	return unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
}

func munmap(b []byte) { _ = unix.Munmap(b) }

func release(b []byte) { _ = unix.Madvise(b, unix.MADV_DONTNEED) }
