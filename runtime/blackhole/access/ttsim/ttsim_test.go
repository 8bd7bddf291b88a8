//go:build linux && cgo

package ttsim

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	notLib := filepath.Join(dir, "notalib.so")
	os.WriteFile(notLib, []byte("not an ELF"), 0o644)
	t.Setenv(EnvLibrary, "")
	for _, c := range []struct{ name, path, want string }{
		{"no path", "", "no simulator library named"},
		{"missing", filepath.Join(dir, "nope.so"), "no such file"},
		{"not a library", notLib, "cannot load"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Open(c.path)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Open(%q) = %v, want an error containing %q", c.path, err, c.want)
			}
		})
	}
}

// A real shared library without the ttsim API (libc) is refused by name.
func TestOpenNotTTSim(t *testing.T) {
	libc := ""
	for _, p := range []string{"/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib/x86_64-linux-gnu/libc.so.6", "/lib/aarch64-linux-gnu/libc.so.6"} {
		if _, err := os.Stat(p); err == nil {
			libc = p
		}
	}
	if libc == "" {
		t.Skip("no libc.so.6 at a known path")
	}
	_, err := Open(libc)
	if err == nil || !strings.Contains(err.Error(), "is not a ttsim library: it has no libttsim_init") {
		t.Errorf("Open(libc) = %v", err)
	}
}
