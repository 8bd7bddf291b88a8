//go:build unix

package codegen

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// errLocked says another process holds the lock.
var errLocked = errors.New("locked")

// tryLock takes an exclusive advisory lock on f without waiting
// (errLocked when another open file holds it). The kernel drops it when
// the process dies, so a killed build never leaves a stale lock.
func tryLock(f *os.File) error {
	err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	if errors.Is(err, unix.EWOULDBLOCK) {
		return errLocked
	}
	return err
}
