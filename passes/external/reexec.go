package external

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
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

// SplitRulesFlag removes every --rules flag from args (a command line
// without the program name) and returns the package patterns they give, in
// order, and the remaining arguments. It accepts "--rules P" and
// "--rules=P", each P a comma-separated list, and stops at "--". A --rules
// without a value or with an empty pattern is an error.
func SplitRulesFlag(args []string) (rules, rest []string, err error) {
	rest = []string{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			rest = append(rest, args[i:]...)
			break
		}
		var val string
		switch {
		case a == "--rules":
			if i+1 >= len(args) {
				return nil, nil, fmt.Errorf("--rules needs a package pattern, e.g. --rules ./myrules")
			}
			i++
			val = args[i]
		case strings.HasPrefix(a, "--rules="):
			val = strings.TrimPrefix(a, "--rules=")
		default:
			rest = append(rest, a)
			continue
		}
		for _, p := range strings.Split(val, ",") {
			if p = strings.TrimSpace(p); p == "" {
				return nil, nil, fmt.Errorf("--rules %q: empty package pattern", val)
			}
			rules = append(rules, p)
		}
	}
	return rules, rest, nil
}

// Reexec runs the tcc command line args (os.Args[1:]) with the rule
// packages rulesFlag (the --rules values, as package patterns relative to
// the working directory) linked in: it inspects the packages (Inspect),
// builds or reuses the cached driver for them (BuildDriver; the cache is
// $TCC_CACHE_DIR/rule-drivers or the user cache directory's
// tcc/rule-drivers, one binary per set of packages), and runs it with args
// minus every --rules flag, with this process's stdin, stdout and stderr.
//
// It returns nil if the driver exits with status 0, an *ExitError with the
// status if it fails (it has printed its own error), and any other error
// for a failure before the driver runs (bad packages, failed build). While
// the driver runs, interrupts are left to the driver.
func Reexec(rulesFlag []string, args []string) error {
	return reexec(context.Background(), rulesFlag, args, stdio{os.Stdin, os.Stdout, os.Stderr}, "")
}

type stdio struct {
	in       io.Reader
	out, err io.Writer
}

// reexec is Reexec with explicit stdio and cache directory ("" = default).
func reexec(ctx context.Context, rulesFlag, args []string, std stdio, cacheDir string) error {
	if d := os.Getenv(EnvDriver); d != "" {
		return fmt.Errorf("--rules: this tcc is already a rule driver for %s; run the plain tcc binary with --rules", d)
	}
	if len(rulesFlag) == 0 {
		return fmt.Errorf("--rules: no rule packages given")
	}
	_, rest, err := SplitRulesFlag(args)
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
	cmd := exec.CommandContext(ctx, out, rest...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = std.in, std.out, std.err
	cmd.Env = append(os.Environ(), EnvDriver+"="+strings.Join(paths, ","))
	// The terminal delivers ^C to the driver too; let it decide, and keep
	// this process alive to report its status.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt)
	defer signal.Stop(sig)
	err = cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code := ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			code = 128 + int(ws.Signal())
		}
		if code <= 0 {
			code = 1
		}
		return &ExitError{Code: code}
	}
	if err != nil {
		return fmt.Errorf("--rules: running the rule driver %s: %w", out, err)
	}
	return nil
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
