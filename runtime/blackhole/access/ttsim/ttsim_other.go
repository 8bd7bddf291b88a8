//go:build !linux || !cgo

package ttsim

import (
	"fmt"

	"github.com/tcc-dev/tcc/runtime/blackhole/access"
)

// Sim is unavailable in this build.
type Sim struct{ access.BAR }

// OpenAll fails: loading libttsim.so needs cgo on Linux.
func OpenAll(path string) ([]*Sim, error) {
	_, err := Open(path)
	return nil, err
}

// Open fails: loading libttsim.so needs cgo on Linux.
func Open(path string) (*Sim, error) {
	return nil, fmt.Errorf("ttsim: this tcc was built without cgo or not for Linux; rebuild with CGO_ENABLED=1 on Linux to load %q", path)
}
