package external

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// EnvDriver is set in the environment of a rule driver started by Reexec
// (to the rule package paths), so that a driver never starts another one.
const EnvDriver = "TCC_RULES_DRIVER"

// EnvCache overrides the directory holding cached rule drivers (default:
// the user cache directory's tcc/rule-drivers).
const EnvCache = "TCC_CACHE_DIR"

// ExitError is returned by Reexec when the driver ran and exited with a
// non-zero status. The driver has already reported the failure on stderr,
// so the caller should exit with Code without printing anything.
type ExitError struct {
	Code int
}

func (e *ExitError) Error() string { return fmt.Sprintf("rule driver exited with status %d", e.Code) }

// DefaultTimeout is how long a rule driver may run before tcc kills it,
// when --rules-timeout is not given.
const DefaultTimeout = 10 * time.Minute

// Flags are the command-line flags that tcc handles before cobra does,
// because they decide whether a rule driver runs the command.
type Flags struct {
	Rules   []string      // --rules package patterns, in order
	Timeout time.Duration // --rules-timeout; 0 = no limit
}

// SplitFlags removes every --rules and --rules-timeout flag from args (a
// command line without the program name) and returns what they give and
// the remaining arguments. It accepts "--rules P" and "--rules=P", each P a
// comma-separated list, and "--rules-timeout D" / "--rules-timeout=D" with
// D a Go duration (default DefaultTimeout; 0 = no limit), and stops at
// "--". A flag without a value, an empty pattern or a negative or
// malformed duration is an error.
func SplitFlags(args []string) (f Flags, rest []string, err error) {
	f.Timeout = DefaultTimeout
	rest = []string{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			rest = append(rest, args[i:]...)
			break
		}
		name, val, hasVal := strings.Cut(a, "=")
		if name != "--rules" && name != "--rules-timeout" {
			rest = append(rest, a)
			continue
		}
		if !hasVal {
			if i+1 >= len(args) {
				if name == "--rules" {
					return Flags{}, nil, fmt.Errorf("--rules needs a package pattern, e.g. --rules ./myrules")
				}
				return Flags{}, nil, fmt.Errorf("--rules-timeout needs a duration, e.g. --rules-timeout 5m")
			}
			i++
			val = args[i]
		}
		if name == "--rules-timeout" {
			d, err := time.ParseDuration(val)
			if err != nil || d < 0 {
				return Flags{}, nil, fmt.Errorf("--rules-timeout %q: want a duration such as 90s or 10m (0 = no limit)", val)
			}
			f.Timeout = d
			continue
		}
		for _, p := range strings.Split(val, ",") {
			if p = strings.TrimSpace(p); p == "" {
				return Flags{}, nil, fmt.Errorf("--rules %q: empty package pattern", val)
			}
			f.Rules = append(f.Rules, p)
		}
	}
	return f, rest, nil
}

// Reexec runs the tcc command line args (os.Args[1:]) with the rule
// packages rulesFlag (the --rules values, as package patterns relative to
// the working directory) linked in: it inspects the packages (Inspect),
// builds or reuses the cached driver for them (BuildDriver; the cache is
// $TCC_CACHE_DIR/rule-drivers or the user cache directory's
// tcc/rule-drivers, one binary per set of packages), and runs it with args
// minus every --rules flag, with this process's stdin, stdout and stderr.
//
// The driver is supervised (runDriver): it is killed when it runs longer
// than f.Timeout, signals sent to tcc are passed on to it, it exits by
// itself when tcc dies, and a driver that exits without finishing the
// command (a rule package calling os.Exit) is an error.
//
// It returns nil if the driver finishes with status 0, an *ExitError with
// the status if it fails (it has printed its own error), and any other
// error for a failure before or around the run (bad packages, failed
// build, timeout, no result).
func Reexec(f Flags, args []string) error {
	return reexec(context.Background(), f, args, stdio{os.Stdin, os.Stdout, os.Stderr}, "")
}

type stdio struct {
	in       io.Reader
	out, err io.Writer
}

// reexec is Reexec with explicit stdio and cache directory ("" = default).
func reexec(ctx context.Context, f Flags, args []string, std stdio, cacheDir string) error {
	rulesFlag := f.Rules
	if d := os.Getenv(EnvDriver); d != "" {
		return fmt.Errorf("--rules: this tcc is already a rule driver for %s; run the plain tcc binary with --rules", d)
	}
	if len(rulesFlag) == 0 {
		return fmt.Errorf("--rules: no rule packages given")
	}
	_, rest, err := SplitFlags(args)
	if err != nil {
		return err
	}
	wd, err := os.Getwd()
	if err != nil {
		return fmt.Errorf("--rules: %w", err)
	}
	pkgs, err := Inspect(wd, rulesFlag...)
	if err != nil {
		return err
	}
	if cacheDir == "" {
		if cacheDir, err = defaultCacheDir(); err != nil {
			return err
		}
	}
	out := filepath.Join(cacheDir, setName(pkgs), "tcc")
	if runtime.GOOS == "windows" {
		out += ".exe"
	}
	if _, err := buildDriver(ctx, pkgs, out, std.err); err != nil {
		return err
	}

	var paths []string
	for _, p := range pkgs {
		paths = append(paths, p.Path)
	}
	env := append(os.Environ(), EnvDriver+"="+strings.Join(paths, ","))
	return runDriver(ctx, out, rest, env, std, f.Timeout)
}

// defaultCacheDir is $TCC_CACHE_DIR/rule-drivers, else the user cache
// directory's tcc/rule-drivers.
func defaultCacheDir() (string, error) {
	if d := os.Getenv(EnvCache); d != "" {
		return filepath.Join(d, "rule-drivers"), nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("--rules: no cache directory for the rule driver (set %s): %w", EnvCache, err)
	}
	return filepath.Join(d, "tcc", "rule-drivers"), nil
}

// setName names the cache slot of a set of rule packages: a hash of their
// import paths and directories and the tcc module directory. A slot holds
// one driver, rebuilt when its key changes.
func setName(pkgs []PkgInfo) string {
	h := sha256.New()
	for _, p := range pkgs {
		fmt.Fprintf(h, "%s\x00%s\x00%s\n", p.Path, p.Dir, p.TCCDir)
	}
	return hex.EncodeToString(h.Sum(nil))[:20]
}
