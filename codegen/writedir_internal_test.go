package codegen

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func readBuild(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() == MarkerFile {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		out[filepath.ToSlash(rel)] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

var (
	oldBuild = map[string][]byte{"programs.json": []byte("old\n"), "kernels/a.cpp": []byte("a")}
	newBuild = map[string][]byte{"programs.json": []byte("new\n"), "kernels/b.cpp": []byte("b")}
)

func same(got map[string]string, want map[string][]byte) bool {
	if len(got) != len(want) {
		return false
	}
	for k, v := range want {
		if got[k] != string(v) {
			return false
		}
	}
	return true
}

// TestWriteDirKillPoints: a kill at any step of the swap leaves either the
// complete old build or the complete new one, and the next build cleans up
// the temporaries the kill left.
func TestWriteDirKillPoints(t *testing.T) {
	for _, step := range []string{"written", "old-moved", "swapped"} {
		t.Run(step, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "out")
			if err := WriteDir(dir, oldBuild); err != nil {
				t.Fatal(err)
			}
			killed := errors.New("killed")
			writeDirHook = func(s string) error {
				if s == step {
					return killed
				}
				return nil
			}
			err := WriteDir(dir, newBuild)
			writeDirHook = nil
			if step != "old-moved" && !errors.Is(err, killed) {
				t.Fatalf("the kill at %s did not stop WriteDir: %v", step, err)
			}
			got := readBuild(t, dir)
			if !same(got, oldBuild) && !same(got, newBuild) {
				t.Fatalf("after a kill at %s the output holds %v: neither build", step, got)
			}
			if err := WriteDir(dir, newBuild); err != nil {
				t.Fatalf("rebuild after the kill: %v", err)
			}
			if got := readBuild(t, dir); !same(got, newBuild) {
				t.Errorf("rebuild: %v", got)
			}
			ents, _ := os.ReadDir(filepath.Dir(dir))
			for _, e := range ents {
				if strings.Contains(e.Name(), ".tmp-") {
					t.Errorf("temporary %s left after the rebuild", e.Name())
				}
			}
		})
	}
}

// TestWriteDirKeepsUserFiles: a user's file in a previous build directory
// makes the rebuild refuse (naming the file) and the file survives; a
// symlinked output is written through to its target.
func TestWriteDirKeepsUserFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	if err := WriteDir(dir, oldBuild); err != nil {
		t.Fatal(err)
	}
	notes := filepath.Join(dir, "NOTES.txt")
	if err := os.WriteFile(notes, []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := WriteDir(dir, newBuild)
	if err == nil || !strings.Contains(err.Error(), "NOTES.txt") || !strings.Contains(err.Error(), "refusing") {
		t.Fatalf("rebuild over a user file: err = %v", err)
	}
	if b, err := os.ReadFile(notes); err != nil || string(b) != "mine" {
		t.Fatalf("the user's file did not survive: %q %v", b, err)
	}
	// A directory with a programs.json but no marker is not ours either.
	foreign := t.TempDir()
	if err := os.WriteFile(filepath.Join(foreign, "programs.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteDir(foreign, newBuild); err == nil || !strings.Contains(err.Error(), "did not write") {
		t.Errorf("replaced a directory with programs.json and no marker: %v", err)
	}
	// Symlinked -o: the link stays a link, its target gets the build.
	target := filepath.Join(t.TempDir(), "real")
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(target, link); err != nil {
		t.Skip(err)
	}
	if err := WriteDir(link, newBuild); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Lstat(link); err != nil || st.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the symlinked output is no longer a link: %v %v", st, err)
	}
	if got := readBuild(t, target); !same(got, newBuild) {
		t.Errorf("the link's target holds %v", got)
	}
}

// TestWriteFileAtomicMode: files written atomically (manifest, trace,
// dequant output) get 0644 like the files of a build, not the 0600 of
// the temporary they are written through.
func TestWriteFileAtomicMode(t *testing.T) {
	p := filepath.Join(t.TempDir(), "manifest.json")
	for i := 0; i < 2; i++ { // created, then replaced
		if err := WriteFileAtomic(p, []byte("{}\n")); err != nil {
			t.Fatal(err)
		}
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := st.Mode().Perm(); got != 0o644 && runtime.GOOS != "windows" {
			t.Errorf("write %d: mode %v, want -rw-r--r--", i, st.Mode())
		}
	}
}
