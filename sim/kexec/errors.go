package kexec

import (
	"fmt"
	"strings"

	"github.com/tcc-dev/tcc/codegen/kir"
)

// Blocked describes one kernel that cannot make progress.
type Blocked struct {
	// Device is the index of the device in a Cluster run (0 for Device.Run).
	Device int
	Core   kir.Core
	Kernel string
	// Call is the blocking tt-metal call, e.g. "cb_wait_front".
	Call string
	// CB is the CB waited on, or kir.NoCB.
	CB int
	// Semaphore is the semaphore id waited on, or -1 (also -1 for a plain
	// L1 word that is not a program semaphore).
	Semaphore int
	// Reason says what the kernel waits for, e.g. "waits for 2 pages, 0 available".
	Reason string
}

func (b Blocked) String() string {
	var where string
	switch {
	case b.CB != kir.NoCB:
		where = fmt.Sprintf("%s(c_%d)", b.Call, b.CB)
	case b.Semaphore >= 0:
		where = fmt.Sprintf("%s(semaphore %d)", b.Call, b.Semaphore)
	default:
		where = b.Call
	}
	return fmt.Sprintf("core %s kernel %q: %s %s", b.Core, b.Kernel, where, b.Reason)
}

// DeadlockError reports that every unfinished kernel is blocked.
type DeadlockError struct {
	Program string
	// Devices is the number of devices of a Cluster run (0 for Device.Run);
	// then every Blocked names its device.
	Devices int
	Blocked []Blocked // by device, then row-major by core, then program order
	// Finished lists the kernels that ran to completion, as "kernel@(x,y)".
	Finished []string
}

func (e *DeadlockError) Error() string {
	lines := make([]string, len(e.Blocked))
	for i, b := range e.Blocked {
		lines[i] = b.String()
		if e.Devices > 0 {
			lines[i] = fmt.Sprintf("device %d %s", b.Device, lines[i])
		}
	}
	if e.Devices > 0 {
		return fmt.Sprintf("program %q on %d devices: deadlock: %d kernel(s) blocked forever:\n  %s", e.Program, e.Devices, len(e.Blocked), strings.Join(lines, "\n  "))
	}
	return fmt.Sprintf("program %q: deadlock: %d kernel(s) blocked forever:\n  %s", e.Program, len(e.Blocked), strings.Join(lines, "\n  "))
}

// StepLimitError reports that the program ran more instructions than allowed.
type StepLimitError struct {
	Program string
	Limit   int64
	// Running lists the unfinished kernels as "kernel@(x,y)" (on a Cluster
	// "kernel@(x,y)@device d").
	Running []string
}

func (e *StepLimitError) Error() string {
	return fmt.Sprintf("program %q: step limit of %d instructions reached (infinite loop?); still running: %s", e.Program, e.Limit, strings.Join(e.Running, ", "))
}
