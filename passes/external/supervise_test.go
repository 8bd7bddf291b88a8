package external

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// envFakeDriver makes the test binary act as a rule driver (fakeDriver)
// instead of running tests.
const envFakeDriver = "TCC_TEST_FAKE_DRIVER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(envFakeDriver); mode != "" {
		os.Exit(fakeDriver(mode))
	}
	os.Exit(m.Run())
}

// fakeDriver plays a rule driver whose rule package behaves as mode says.
// The modes that spin write their pid to $TCC_TEST_PIDFILE first.
func fakeDriver(mode string) int {
	writePid := func() {
		if f := os.Getenv("TCC_TEST_PIDFILE"); f != "" {
			os.WriteFile(f, []byte(strconv.Itoa(os.Getpid())), 0o644)
		}
	}
	switch mode {
	case "ok":
		return Supervise(func() int { fmt.Println("command output"); return 0 })
	case "fail":
		return Supervise(func() int { fmt.Fprintln(os.Stderr, "tcc: some error"); return 3 })
	case "exit0": // a rule package that calls os.Exit(0) mid-command
		return Supervise(func() int { os.Exit(0); return 0 })
	case "panic":
		return Supervise(func() int { panic("Rules: boom") })
	case "spin": // a side condition that never returns
		return Supervise(func() int {
			writePid()
			for {
				runtime.Gosched()
			}
		})
	case "parent": // a tcc running a spinning driver
		self, _ := os.Executable()
		env := append(os.Environ(), envFakeDriver+"=spin")
		err := runDriver(context.Background(), self, nil, env, stdio{os.Stdin, os.Stdout, os.Stderr}, 0)
		fmt.Fprintln(os.Stderr, "parent:", err)
		return 1
	}
	return 99
}

// runFake runs the test binary as a driver in mode under runDriver.
func runFake(t *testing.T, mode string, timeout time.Duration) (stdout, stderr string, err error) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var o, e bytes.Buffer
	env := append(os.Environ(), envFakeDriver+"="+mode)
	err = runDriver(context.Background(), self, nil, env, stdio{strings.NewReader(""), &o, &e}, timeout)
	return o.String(), e.String(), err
}

func TestRunDriverOutcomes(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("descriptor passing is not supported on Windows")
	}
	tests := []struct {
		mode       string
		timeout    time.Duration
		wantCode   int    // an *ExitError with this code; 0 = none
		wantErr    string // another error containing this; "" = none
		wantStdout string
		wantStderr string
	}{
		{mode: "ok", wantStdout: "command output\n"},
		{mode: "fail", wantCode: 3, wantStderr: "tcc: some error\n"},
		{mode: "exit0", wantErr: "exited with status 0 without finishing the command"},
		{mode: "panic", wantCode: 2, wantStderr: "tcc: rule driver: panic: Rules: boom\n"},
		{mode: "spin", timeout: 300 * time.Millisecond, wantErr: "ran longer than --rules-timeout 300ms and was killed"},
	}
	for _, tc := range tests {
		t.Run(tc.mode, func(t *testing.T) {
			stdout, stderr, err := runFake(t, tc.mode, tc.timeout)
			var ee *ExitError
			switch {
			case tc.wantCode != 0:
				if !errors.As(err, &ee) || ee.Code != tc.wantCode {
					t.Errorf("err = %v, want ExitError with code %d", err, tc.wantCode)
				}
			case tc.wantErr != "":
				if err == nil || errors.As(err, &ee) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("err = %v, want an error containing %q", err, tc.wantErr)
				}
			case err != nil:
				t.Errorf("err = %v, want nil", err)
			}
			if stdout != tc.wantStdout || stderr != tc.wantStderr {
				t.Errorf("stdout %q, stderr %q; want %q, %q", stdout, stderr, tc.wantStdout, tc.wantStderr)
			}
		})
	}
}

// TestDriverStopsWithTcc kills (or signals) a tcc running a spinning rule
// driver and checks that the driver does not outlive it.
func TestDriverStopsWithTcc(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	for _, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			self, err := os.Executable()
			if err != nil {
				t.Fatal(err)
			}
			pidFile := filepath.Join(t.TempDir(), "pid")
			parent := exec.Command(self)
			parent.Env = append(os.Environ(), envFakeDriver+"=parent", "TCC_TEST_PIDFILE="+pidFile)
			// A file, not a pipe: the driver inherits it, and Wait would
			// wait for a pipe to close.
			errFile := filepath.Join(t.TempDir(), "stderr")
			perr, err := os.Create(errFile)
			if err != nil {
				t.Fatal(err)
			}
			defer perr.Close()
			parent.Stderr = perr
			if err := parent.Start(); err != nil {
				t.Fatal(err)
			}
			var child int
			for deadline := time.Now().Add(20 * time.Second); child == 0; time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					parent.Process.Kill()
					t.Fatal("the driver never started")
				}
				b, _ := os.ReadFile(pidFile)
				child, _ = strconv.Atoi(string(b))
			}
			parent.Process.Signal(sig)
			parent.Wait()
			for deadline := time.Now().Add(10 * time.Second); alive(child); time.Sleep(20 * time.Millisecond) {
				if time.Now().After(deadline) {
					syscall.Kill(child, syscall.SIGKILL)
					t.Fatalf("driver %d still running 10s after its tcc got %v", child, sig)
				}
			}
			if b, _ := os.ReadFile(errFile); sig == syscall.SIGTERM && !strings.Contains(string(b), "parent: rule driver exited with status 143") {
				t.Errorf("tcc after SIGTERM reported %q, want the driver's status 143 (128+SIGTERM)", b)
			}
		})
	}
}

// alive reports whether process pid exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) STATE ...
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] != 'Z'
}
