package codegen

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// MarkerFile is the file every build directory holds: tcc's version and
// the list of files tcc wrote there. WriteDir replaces only directories
// with a marker, and only when every file in them is one the marker lists.
const MarkerFile = ".tcc-build"

// writeDirHook, when set (tests), is called before each step of WriteDir's
// swap with the step's name; an error it returns stops WriteDir there, as
// a kill would.
var writeDirHook func(step string) error

func hook(step string) error {
	if writeDirHook != nil {
		return writeDirHook(step)
	}
	return nil
}

// WriteDir writes files into dir so that dir holds either its previous
// contents or the complete new build at every moment, and never loses a
// file tcc did not write:
//
//   - a symlinked dir is resolved and its target is written;
//   - an existing dir is replaced only when it is empty or a tcc build
//     (MarkerFile) whose files are all ones tcc wrote; otherwise WriteDir
//     refuses, naming the foreign files;
//   - the new build is written to a temporary sibling, every file and
//     directory fsynced, then swapped with dir in one atomic exchange
//     (renameat2 RENAME_EXCHANGE where the OS has it), and the old build
//     removed;
//   - temporaries left by earlier killed builds of dir are removed first;
//   - one build at a time writes dir: it holds a lock (".DIR.lock" beside
//     dir, released by the kernel if the build is killed), and a second
//     build fails with "another build is writing DIR";
//   - "/", the top-level system directories (/usr, /etc, ...) and the
//     home directory itself are refused before anything is read.
func WriteDir(dir string, files map[string][]byte) error {
	dir, err := outputDir(dir)
	if err != nil {
		return err
	}
	parent, base := filepath.Dir(dir), filepath.Base(dir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return err
	}
	unlock, err := lockOutput(dir)
	if err != nil {
		return err
	}
	defer unlock()
	if err := removeStaleTemps(parent, base); err != nil {
		return err
	}
	exists := false
	if st, err := os.Lstat(dir); err == nil {
		if !st.IsDir() {
			return fmt.Errorf("output %s exists and is not a directory", dir)
		}
		if err := replaceable(dir); err != nil {
			return err
		}
		exists = true
	}
	tmp, err := os.MkdirTemp(parent, "."+base+".tmp-")
	if err != nil {
		return err
	}
	cleanup := true
	defer func() {
		if cleanup {
			os.RemoveAll(tmp)
		}
	}()
	if err := writeTree(tmp, files); err != nil {
		if errors.As(err, new(hookError)) {
			cleanup = false // a kill mid-write leaves the temporary
		}
		return err
	}
	if err := hook("written"); err != nil {
		cleanup = false // a kill leaves the temporary; the next build removes it
		return err
	}
	if !exists {
		if err := os.Rename(tmp, dir); err != nil {
			return err
		}
		return syncDir(parent)
	}
	if err := exchange(tmp, dir); err != nil {
		if !errors.Is(err, errNoExchange) {
			return err
		}
		// No atomic exchange: move the old build aside, then the new in.
		old := tmp + ".old"
		if err := os.Rename(dir, old); err != nil {
			return err
		}
		if err := hook("old-moved"); err != nil {
			cleanup = false
			return err
		}
		if err := os.Rename(tmp, dir); err != nil {
			_ = os.Rename(old, dir)
			return err
		}
		tmp = old
	}
	if err := hook("swapped"); err != nil {
		cleanup = false
		return err
	}
	return syncDir(parent) // the deferred RemoveAll deletes the old build
}

// systemDirs are directories no build may replace (besides "/" and the
// home directory).
var systemDirs = map[string]bool{}

func init() {
	for _, d := range strings.Fields(`/bin /boot /dev /etc /home /lib /lib32 /lib64 /libx32 /media /mnt /opt /proc /root /run
		/sbin /snap /srv /sys /tmp /usr /var /usr/bin /usr/include /usr/lib /usr/lib64 /usr/libexec /usr/local /usr/sbin /usr/share /usr/src
		/var/lib /var/log /var/tmp /System /Applications /Library /Users /Volumes /private`) {
		systemDirs[filepath.FromSlash(d)] = true
	}
}

// CheckOutputDir is WriteDir's check of dir before anything is built:
// "/", a system directory or the home directory (after following
// symbolic links) is refused.
func CheckOutputDir(dir string) error {
	_, err := outputDir(dir)
	return err
}

// outputDir resolves dir's links, makes it absolute and refuses it when
// it is protected.
func outputDir(dir string) (string, error) {
	dir, err := resolveLinks(filepath.Clean(dir))
	if err != nil {
		return "", err
	}
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	if err := protected(dir); err != nil {
		return "", err
	}
	return dir, nil
}

// protected refuses an output that is a filesystem root, a system
// directory or the home directory itself (dir is absolute and clean).
func protected(dir string) error {
	home, _ := os.UserHomeDir()
	switch {
	case filepath.Dir(dir) == dir:
		return fmt.Errorf("output %s is the root of a filesystem; refusing to write a build there: choose a directory of its own with -o", dir)
	case systemDirs[dir]:
		return fmt.Errorf("output %s is a system directory; refusing to write a build there: choose a directory of its own with -o", dir)
	case home != "" && filepath.Clean(home) == dir:
		return fmt.Errorf("output %s is the home directory; refusing to write a build there: choose a directory of its own with -o", dir)
	}
	return nil
}

// lockOutput takes the lock of output dir (the file ".BASE.lock" beside
// it) or says another build is writing dir. unlock removes the lock file
// and releases it.
func lockOutput(dir string) (unlock func(), err error) {
	path := filepath.Join(filepath.Dir(dir), "."+filepath.Base(dir)+".lock")
	for tries := 0; ; tries++ {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return nil, fmt.Errorf("output %s: cannot create its lock: %v", dir, err)
		}
		if err := tryLock(f); err != nil {
			f.Close()
			if errors.Is(err, errLocked) {
				return nil, fmt.Errorf("another build is writing %s (it holds %s); wait for it to finish or choose another -o", dir, path)
			}
			return nil, fmt.Errorf("output %s: lock %s: %v", dir, path, err)
		}
		// The previous holder removes the file before releasing it: a
		// lock on a file no longer at path locks nothing; take it again.
		st, err1 := f.Stat()
		cur, err2 := os.Stat(path)
		if err1 == nil && err2 == nil && os.SameFile(st, cur) {
			return func() { os.Remove(path); f.Close() }, nil
		}
		f.Close()
		if tries == 10 {
			return nil, fmt.Errorf("output %s: lock %s keeps being replaced", dir, path)
		}
	}
}

// hookError is an error a test's hook returned (a simulated kill).
type hookError struct{ error }

func (e hookError) Unwrap() error { return e.error }

// ExchangeDirs swaps the directories a and b: in one atomic step where
// the OS can (renameat2 RENAME_EXCHANGE), else by three renames.
func ExchangeDirs(a, b string) error {
	err := exchange(a, b)
	if !errors.Is(err, errNoExchange) {
		return err
	}
	tmp := a + ".swap"
	if err := os.Rename(b, tmp); err != nil {
		return err
	}
	if err := os.Rename(a, b); err != nil {
		_ = os.Rename(tmp, b)
		return err
	}
	return os.Rename(tmp, a)
}

// resolveLinks follows dir while it is a symbolic link (to a target that
// may not exist yet), so the build is written into the link's target and
// the link stays.
func resolveLinks(dir string) (string, error) {
	for hops := 0; ; hops++ {
		st, err := os.Lstat(dir)
		if err != nil || st.Mode()&os.ModeSymlink == 0 {
			return dir, nil
		}
		if hops == 40 {
			return "", fmt.Errorf("output %s: too many levels of symbolic links", dir)
		}
		target, err := os.Readlink(dir)
		if err != nil {
			return "", fmt.Errorf("output %s: %v", dir, err)
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(filepath.Dir(dir), target)
		}
		dir = filepath.Clean(target)
	}
}

// replaceable reports why dir may not be replaced: a non-empty directory
// without a marker, or one holding files its marker does not list.
func replaceable(dir string) error {
	// The marker first: a directory tcc did not write is refused without
	// walking it (an -o naming a large tree answers at once).
	listed, err := readMarker(filepath.Join(dir, MarkerFile))
	if err != nil {
		f, oerr := os.Open(dir)
		if oerr != nil {
			return fmt.Errorf("output %s: %v", dir, oerr)
		}
		ents, _ := f.ReadDir(1)
		f.Close()
		if len(ents) == 0 {
			return nil // empty
		}
		return fmt.Errorf("output %s is a non-empty directory that tcc did not write (no %s); refusing to replace it: remove it or choose another -o", dir, MarkerFile)
	}
	var all []string
	err = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			all = append(all, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("output %s: %v", dir, err)
	}
	if len(all) == 0 {
		return nil
	}
	var foreign []string
	for _, f := range all {
		if f != MarkerFile && !listed[f] {
			foreign = append(foreign, f)
		}
	}
	if len(foreign) > 0 {
		sort.Strings(foreign)
		if len(foreign) > 5 {
			foreign = append(foreign[:5], fmt.Sprintf("and %d more", len(foreign)-5))
		}
		return fmt.Errorf("output %s holds files tcc did not write (%s); refusing to replace it: move them or choose another -o", dir, strings.Join(foreign, ", "))
	}
	return nil
}

// readMarker returns the files a marker lists.
func readMarker(path string) (map[string]bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if !sc.Scan() || !strings.HasPrefix(sc.Text(), "tcc ") {
		return nil, fmt.Errorf("%s is not a tcc marker", path)
	}
	out := map[string]bool{}
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			out[l] = true
		}
	}
	return out, sc.Err()
}

// writeTree writes files and the marker under root, fsyncing every file
// and directory.
func writeTree(root string, files map[string][]byte) error {
	names := make([]string, 0, len(files))
	for n := range files {
		if n == MarkerFile {
			return fmt.Errorf("a build may not contain a file named %s", MarkerFile)
		}
		names = append(names, n)
	}
	sort.Strings(names)
	marker := "tcc " + Version + "\n" + strings.Join(names, "\n") + "\n"
	dirs := map[string]bool{root: true}
	// The marker first: a temporary a kill leaves mid-write is then
	// recognisably tcc's and the next build removes it.
	for i, n := range append([]string{MarkerFile}, names...) {
		if i == 2 {
			if err := hook("file"); err != nil {
				return hookError{err}
			}
		}
		data := files[n]
		if n == MarkerFile {
			data = []byte(marker)
		}
		p := filepath.Join(root, filepath.FromSlash(n))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		for d := filepath.Dir(p); strings.HasPrefix(d, root); d = filepath.Dir(d) {
			dirs[d] = true
		}
		if err := writeSynced(p, data); err != nil {
			return err
		}
	}
	if err := os.Chmod(root, 0o755); err != nil {
		return err
	}
	for d := range dirs {
		if err := syncDir(d); err != nil {
			return err
		}
	}
	return nil
}

// WriteFileAtomic writes data to a temporary file beside path, fsyncs it
// and renames it over path, so path holds the old or the new contents at
// every moment. The file gets mode 0644, as every file tcc writes (the
// temporary is created 0600).
func WriteFileAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-")
	if err != nil {
		return fmt.Errorf("cannot write %s: %v", path, err)
	}
	tmp := f.Name()
	err = f.Chmod(0o644)
	f.Close()
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing %s: %v", path, err)
	}
	if err := writeSynced(tmp, data); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing %s: %v", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing %s: %v", path, err)
	}
	return nil
}

func writeSynced(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil && !errors.Is(err, os.ErrInvalid) {
		return fmt.Errorf("sync %s: %v", dir, err)
	}
	return nil
}

// removeStaleTemps deletes the temporaries earlier killed builds of
// parent/base left (".base.tmp-*", each holding a tcc marker, or empty).
// The caller holds the output's lock, so none is a live build's.
func removeStaleTemps(parent, base string) error {
	ents, err := os.ReadDir(parent)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), "."+base+".tmp-") {
			continue
		}
		p := filepath.Join(parent, e.Name())
		if _, err := os.Stat(filepath.Join(p, MarkerFile)); err != nil {
			// Not one of ours, unless empty (killed before its marker).
			os.Remove(p)
			continue
		}
		if err := os.RemoveAll(p); err != nil {
			return err
		}
	}
	return nil
}
