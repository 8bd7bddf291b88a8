//go:build !linux

package runtime

import "time"

func threadCPU() (time.Duration, bool) { return 0, false }
