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

// TestWriteDirKilledMidWrite: a build killed while writing its files
// (after its first file) leaves a temporary the next build removes.
func TestWriteDirKilledMidWrite(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	killed := errors.New("killed")
	writeDirHook = func(s string) error {
		if s == "file" {
			return killed
		}
		return nil
	}
	err := WriteDir(dir, newBuild)
	writeDirHook = nil
	if !errors.Is(err, killed) {
		t.Fatalf("the kill did not stop WriteDir: %v", err)
	}
	temps, _ := filepath.Glob(filepath.Join(filepath.Dir(dir), ".out.tmp-*"))
	if len(temps) != 1 {
		t.Fatalf("temporaries after the kill: %v, want one", temps)
	}
	// And one killed right after creating its temporary: an empty one.
	if err := os.Mkdir(filepath.Join(filepath.Dir(dir), ".out.tmp-42"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := WriteDir(dir, newBuild); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(filepath.Dir(dir))
	for _, e := range ents {
		if e.Name() != "out" {
			t.Errorf("%s left beside the build", e.Name())
		}
	}
}

// TestWriteDirConcurrent: while one build writes an output, a second to
// the same output fails at once saying so; a build to another output is
// not blocked.
func TestWriteDirConcurrent(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no advisory locks")
	}
	dir := filepath.Join(t.TempDir(), "out")
	var second, other error
	writeDirHook = func(s string) error {
		if s == "written" {
			writeDirHook = nil
			second = WriteDir(dir, oldBuild)
			other = WriteDir(dir+"2", oldBuild)
		}
		return nil
	}
	err := WriteDir(dir, newBuild)
	writeDirHook = nil
	if err != nil {
		t.Fatal(err)
	}
	if want := "another build is writing " + dir; second == nil || !strings.Contains(second.Error(), want) {
		t.Errorf("second build: %v, want %q", second, want)
	}
	if other != nil {
		t.Errorf("a build to another output: %v", other)
	}
	if got := readBuild(t, dir); !same(got, newBuild) {
		t.Errorf("the first build's output holds %v", got)
	}
	if err := WriteDir(dir, oldBuild); err != nil {
		t.Errorf("a build after the first finished: %v", err)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(dir), ".out.lock")); err == nil {
		t.Errorf("lock file left behind")
	}
}

// TestWriteDirProtected: "/", system directories and the home directory
// are refused by name before anything under them is read.
func TestWriteDirProtected(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("USERPROFILE", home)
	dirs := []string{home, filepath.Join(home, "x", "..")}
	if runtime.GOOS != "windows" {
		dirs = append(dirs, "/", "/usr", "/etc/", "/bin", "/usr/local", "//usr")
	}
	for _, d := range dirs {
		err := WriteDir(d, newBuild)
		if err == nil || !strings.Contains(err.Error(), "refusing to write a build there") {
			t.Errorf("WriteDir(%q): %v, want a refusal", d, err)
		}
	}
	// A foreign tree is refused from its top without a walk: an
	// unreadable subdirectory does not matter (this part checks nothing
	// when the tests run as root, who reads it anyway).
	foreign := t.TempDir()
	sub := filepath.Join(foreign, "sub")
	if err := os.Mkdir(sub, 0o000); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(sub, 0o755)
	if err := WriteDir(foreign, newBuild); err == nil || !strings.Contains(err.Error(), "did not write") {
		t.Errorf("foreign tree: %v", err)
	}
}
