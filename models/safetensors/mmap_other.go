//go:build !unix

package safetensors

import (
	"errors"
	"os"
)

// mmapFile is not available: Bytes reads with ReadAt.
func mmapFile(*os.File, int64) ([]byte, error) { return nil, errors.New("no mmap on this platform") }

func munmap([]byte) {}

func release([]byte) {}
