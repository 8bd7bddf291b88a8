package runtime

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Temporary directories of a chip mesh: the builds' sources the JIT reads
// (buildDir: tcc-build-PID-*, persistentBuilder: tcc-persist-PID-*, PID
// the process's id). Mesh.Close removes its own; a process that ends
// without closing its mesh (ttsim ends the process on a fatal error, or
// the run is killed) leaves them, and the next OpenChip removes those
// whose process no longer runs (removeStale).

// tmpDirPrefixes are the temporary directories' name prefixes.
var tmpDirPrefixes = []string{"tcc-build-", "tcc-persist-"}

// makeTmpDir creates a temporary directory named prefix + this process's
// id, for m to remove at Close.
func (m *Mesh) makeTmpDir(prefix string) (string, error) {
	dir, err := os.MkdirTemp("", fmt.Sprintf("%s%d-", prefix, os.Getpid()))
	if err != nil {
		return "", err
	}
	m.tmpDirs = append(m.tmpDirs, dir)
	return dir, nil
}

// removeStale removes the temporary directories in dir (os.TempDir() when
// empty) that processes no longer running left (alive reports whether a
// process id runs), and returns the ones it removed. Directories without
// a process id in their name (or of a live process, or of this one) are
// kept.
func removeStale(dir string, alive func(pid int) bool) []string {
	if dir == "" {
		dir = os.TempDir()
	}
	var removed []string
	for _, prefix := range tmpDirPrefixes {
		matches, _ := filepath.Glob(filepath.Join(dir, prefix+"*"))
		for _, d := range matches {
			rest := strings.TrimPrefix(filepath.Base(d), prefix)
			i := strings.IndexByte(rest, '-')
			if i <= 0 {
				continue
			}
			pid, err := strconv.Atoi(rest[:i])
			if err != nil || pid <= 0 || pid == os.Getpid() || alive(pid) {
				continue
			}
			if os.RemoveAll(d) == nil {
				removed = append(removed, d)
			}
		}
	}
	return removed
}
