//go:build !linux

package kmd

import (
	"fmt"

	"github.com/tcc-dev/tcc/runtime/blackhole/access"
)

// Card is unavailable off Linux.
type Card struct{ access.Device }

// Open fails: the tt-kmd driver exists for Linux only.
func Open(path string) (*Card, error) {
	return nil, fmt.Errorf("no %s device exists: the tt-kmd driver runs on Linux only; %s", path, Install)
}
