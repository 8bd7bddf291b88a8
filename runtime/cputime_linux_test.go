package runtime

import (
	"syscall"
	"time"
)

// threadCPU is the CPU time of the calling OS thread (RUSAGE_THREAD), or
// ok false where it cannot be read.
func threadCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(1, &ru); err != nil { // RUSAGE_THREAD
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
