package external

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The driver's side of supervision: file descriptors tcc passes to the
// driver, named by these environment variables.
const (
	// envResultFD names the descriptor the driver writes its exit status
	// to when the command has finished ("<code>\n"). A driver that exits
	// without writing it did not finish the command.
	envResultFD = "TCC_RULES_RESULT_FD"
	// envLifelineFD names the read end of a pipe whose write end only tcc
	// holds: end of file means tcc is gone, and the driver exits.
	envLifelineFD = "TCC_RULES_LIFELINE_FD"
)

// killGrace is how long a driver has to exit after tcc passes on a signal
// before it is killed.
const killGrace = 5 * time.Second

// Supervise runs main, the whole of a rule driver (registering the rule
// packages, then the tcc command line), and returns the exit code for
// os.Exit. Under a tcc that started the driver (Reexec) it also
//   - exits with status 1 as soon as that tcc is gone (its lifeline pipe
//     reaches end of file), so a killed tcc never leaves a driver spinning;
//   - reports the code back to tcc once main has returned, so tcc can tell
//     a finished command from a rule package that called os.Exit.
//
// A panic escaping main (a rule package's Rules function, say; panics in a
// rule's side condition or builder are already errors of the rewrite
// engine) is printed as one line "tcc: rule driver: panic: ..." and gives
// status 2.
func Supervise(main func() int) (code int) {
	if fd, ok := inheritedFD(envLifelineFD); ok {
		go func() {
			f := os.NewFile(fd, "tcc lifeline")
			io.Copy(io.Discard, f)
			fmt.Fprintln(os.Stderr, "tcc: rule driver: the tcc that started it has exited; stopping")
			os.Exit(1)
		}()
	}
	defer func() {
		if v := recover(); v != nil {
			fmt.Fprintf(os.Stderr, "tcc: rule driver: panic: %v\n", v)
			code = 2
		}
		if fd, ok := inheritedFD(envResultFD); ok {
			f := os.NewFile(fd, "tcc result")
			fmt.Fprintf(f, "%d\n", code)
			f.Close()
		}
	}()
	return main()
}

// inheritedFD returns the descriptor named by the environment variable
// env, if it is set to a number above the standard three.
func inheritedFD(env string) (uintptr, bool) {
	n, err := strconv.Atoi(os.Getenv(env))
	if err != nil || n < 3 {
		return 0, false
	}
	return uintptr(n), true
}

// runDriver runs the driver binary bin with args and env on std, and
// supervises it:
//   - after timeout (0: never) it is killed and the error says so;
//   - SIGINT, SIGTERM and SIGHUP sent to this process are passed on to it
//     and, if it has not exited killGrace later, it is killed;
//   - it holds the read end of a pipe only this process writes to, so it
//     stops when this process dies however it dies (Supervise);
//   - it must report its status through a second pipe (Supervise): a
//     driver that exits without doing so is an error, whatever its status.
//
// It returns nil when the driver finished with status 0, an *ExitError
// with its status (128+signal when a signal ended it) when it failed and
// printed its own error, and another error otherwise.
func runDriver(ctx context.Context, bin string, args, env []string, std stdio, timeout time.Duration) error {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = std.in, std.out, std.err
	cmd.Env = env

	// Descriptor passing: the driver gets the result pipe's write end as
	// fd 3 and the lifeline's read end as fd 4. (Windows cannot pass them;
	// there the driver runs unsupervised apart from the timeout.)
	var result chan string
	var lifeline *os.File
	if runtime.GOOS != "windows" {
		resR, resW, err := os.Pipe()
		if err != nil {
			return fmt.Errorf("--rules: %w", err)
		}
		lifeR, lifeW, err := os.Pipe()
		if err != nil {
			resR.Close()
			resW.Close()
			return fmt.Errorf("--rules: %w", err)
		}
		lifeline = lifeW
		defer lifeline.Close()
		cmd.ExtraFiles = []*os.File{resW, lifeR}
		cmd.Env = append(cmd.Env, envResultFD+"=3", envLifelineFD+"=4")
		defer func() { resW.Close(); lifeR.Close() }()
		result = make(chan string, 1)
		go func() {
			b, _ := io.ReadAll(resR)
			resR.Close()
			result <- strings.TrimSpace(string(b))
		}()
		if err := cmd.Start(); err != nil {
			resW.Close()
			return fmt.Errorf("--rules: starting the rule driver %s: %w", bin, err)
		}
		// Only the driver may hold these ends now, so the result read
		// ends when the driver exits.
		resW.Close()
		lifeR.Close()
	} else if err := cmd.Start(); err != nil {
		return fmt.Errorf("--rules: starting the rule driver %s: %w", bin, err)
	}

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sig)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var werr error
	var signalled os.Signal
wait:
	for {
		select {
		case werr = <-done:
			break wait
		case s := <-sig:
			if signalled == nil {
				signalled = s
				cmd.Process.Signal(s)
				time.AfterFunc(killGrace, func() { cmd.Process.Kill() })
			}
		}
	}

	if ctx.Err() == context.DeadlineExceeded {
		return fmt.Errorf("--rules: the rule driver ran longer than --rules-timeout %v and was killed (does a rule's side condition or builder loop forever? raise the limit with --rules-timeout, 0 = none)", timeout)
	}
	var ee *exec.ExitError
	if errors.As(werr, &ee) {
		code := ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			code = 128 + int(ws.Signal())
		}
		if code <= 0 {
			code = 1
		}
		return &ExitError{Code: code}
	}
	if werr != nil {
		return fmt.Errorf("--rules: running the rule driver %s: %w", bin, werr)
	}
	if result != nil {
		if got := <-result; got != "0" {
			return fmt.Errorf("--rules: the rule driver exited with status 0 without finishing the command (reported %q; does a rule package call os.Exit?)", got)
		}
	}
	return nil
}
