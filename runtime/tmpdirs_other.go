//go:build !unix

package runtime

// processAlive cannot tell here: every process counts as running, so no
// directory is removed as stale.
func processAlive(int) bool { return true }
