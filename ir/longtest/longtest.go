// Package longtest gates the test suite's long checks.
//
// `go test ./...`, as the README writes it, must fit a shared two-core
// machine: under 3 CPU-minutes in total and 60 CPU-seconds per package.
// Checks that cost more than that budget allows (the small-config
// end-to-end runs through the CLI, the full-width 27B matmuls on the
// simulator, the rule-equivalence sweep over every rule, the checkpoint
// conversion of every form) run only when the environment variable
// TCC_LONG is 1; `.ci/run` sets it after the README's command has passed,
// so CI still runs every check. A gated test says so when skipped, with
// the variable that runs it.
//
// The go command's test cache keys a package's result on the environment
// variables its tests read, so `TCC_LONG=1 go test ./...` right after
// `go test ./...` reruns only the packages with gated tests.
package longtest

import (
	"os"
	"testing"
)

// Env is the environment variable that enables the long checks.
const Env = "TCC_LONG"

// Enabled reports whether the long checks run (TCC_LONG=1).
func Enabled() bool { return os.Getenv(Env) == "1" }

// Skip skips t unless the long checks run; what names the check and its
// cost, e.g. "the small-config end-to-end run (~2 CPU-min)".
func Skip(t testing.TB, what string) {
	t.Helper()
	if !Enabled() {
		t.Skipf("long check, %s: set %s=1 to run it (.ci/run does)", what, Env)
	}
}
