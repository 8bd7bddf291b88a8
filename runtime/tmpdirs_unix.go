//go:build unix

package runtime

import "syscall"

// processAlive reports whether process pid runs (or exists but belongs to
// another user): signal 0 checks without sending.
func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || err == syscall.EPERM
}
