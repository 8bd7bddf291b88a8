package external

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tcc-dev/tcc/ir/longtest"
)

// TestDriverEndToEnd builds a driver with the example rules (a go build
// of tcc, cached in a temporary directory), checks the cache, and runs
// tcc commands through it directly and through reexec.
func TestDriverEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a tcc binary with go build")
	}
	// A go build and link of tcc with the example rules (~10 CPU-s);
	// TestInspectExample, TestRunDriverOutcomes and
	// TestRegisteredExampleRuleFires run by default.
	longtest.Skip(t, "the rule driver built and run end to end (~10 CPU-s)")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	pkgs, err := Inspect(".", "./example")
	if err != nil {
		t.Fatal(err)
	}
	cache := t.TempDir()
	// The slot reexec uses, so its run below finds the driver fresh.
	out := filepath.Join(cache, setName(pkgs), "tcc")

	var log bytes.Buffer
	built, err := buildDriver(ctx, pkgs, out, &log)
	if err != nil {
		t.Fatal(err)
	}
	if !built || !strings.Contains(log.String(), "tcc: building rule driver for ./example ...") {
		t.Errorf("first build: built=%v, progress %q; want a build announced on the log", built, log.String())
	}
	// The second call must reuse the driver. Other processes may edit tcc's
	// sources meanwhile (a shared checkout), and then rebuilding is right:
	// so require reuse whenever the inputs' key was the stamp's before the
	// call and unchanged after it, retrying otherwise. A key that is not
	// deterministic never gets there and fails.
	for attempt := 1; ; attempt++ {
		stamp, err := os.ReadFile(out + ".key")
		if err != nil {
			t.Fatal(err)
		}
		before := keyOf(ctx, t, pkgs)
		log.Reset()
		start := time.Now()
		built, err := buildDriver(ctx, pkgs, out, &log)
		if err != nil {
			t.Fatal(err)
		}
		d := time.Since(start)
		if after := keyOf(ctx, t, pkgs); string(stamp) == before && before == after {
			if built || log.Len() != 0 {
				t.Errorf("second build: built=%v, progress %q; want the cached driver reused silently", built, log.String())
			}
			if d > 10*time.Second {
				t.Errorf("reusing the cached driver took %v", d)
			}
			break
		}
		if attempt == 3 {
			t.Fatalf("the driver's inputs changed during each of %d calls; the key is not deterministic or tcc's sources keep changing", attempt)
		}
	}

	passesOut, err := exec.CommandContext(ctx, out, "passes").CombinedOutput()
	if err != nil {
		t.Fatalf("driver passes: %v\n%s", err, passesOut)
	}
	for _, want := range []string{
		"  norm:\n", // built-in rules are still there
		"  scalar:\n    FoldMulScalar          mul_scalar(mul_scalar(x, a), b) => mul_scalar(x, a*b)\n",
	} {
		if !strings.Contains(string(passesOut), want) {
			t.Errorf("driver `tcc passes` output lacks %q:\n%s", want, passesOut)
		}
	}

	run := func(args ...string) (stdout, stderr string, err error) {
		var o, e bytes.Buffer
		flags, _, err := SplitFlags(args)
		if err != nil {
			t.Fatal(err)
		}
		err = reexec(ctx, flags, args, stdio{strings.NewReader(""), &o, &e}, cache)
		return o.String(), e.String(), err
	}
	stdout, stderr, err := run("passes", "--rules", "./example")
	if err != nil {
		t.Fatalf("reexec passes: %v\n%s", err, stderr)
	}
	if stdout != string(passesOut) || stderr != "" {
		t.Errorf("reexec `tcc passes --rules ./example`: stdout differs from the driver's or stderr %q not empty:\n%s", stderr, stdout)
	}
	// Rules from the package can be disabled like built-in ones.
	if _, stderr, err = run("--rules=./example", "report", "ops", "tiny-mlp", "--stage", "fused", "--disable", "FoldMulScalar"); err != nil {
		t.Errorf("reexec report ops --disable FoldMulScalar: %v\n%s", err, stderr)
	}
	// A failing command's status comes back as an ExitError.
	_, stderr, err = run("ir", "no-such-model", "--rules", "./example")
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Code != 1 {
		t.Errorf("reexec ir no-such-model: err = %v, want ExitError with code 1", err)
	}
	if !strings.Contains(stderr, "tcc: ") || !strings.Contains(stderr, "no-such-model") {
		t.Errorf("reexec ir no-such-model: stderr %q lacks the driver's error", stderr)
	}

	// A driver does not start another driver.
	t.Setenv(EnvDriver, "x")
	if _, _, err := run("passes", "--rules", "./example"); err == nil || !strings.Contains(err.Error(), "already a rule driver") {
		t.Errorf("reexec inside a driver: err = %v, want a refusal", err)
	}
}

// keyOf is the key of pkgs' driver now.
func keyOf(ctx context.Context, t *testing.T, pkgs []PkgInfo) string {
	t.Helper()
	p, err := prepare(ctx, pkgs)
	if err != nil {
		t.Fatal(err)
	}
	defer p.cleanup()
	return p.key
}

// TestDriverOutOfTreeModule builds a driver for a rule package in its own
// module (outside the tcc tree, with a replace directive), named by its
// absolute path from the tcc module's directory, and checks that
// editing the package rebuilds the driver.
func TestDriverOutOfTreeModule(t *testing.T) {
	longtest.Skip(t, "builds a tcc binary for an out-of-tree module with go build (~10 CPU-s)")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	root := abs(t, "../..")
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	mod := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(mod, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	goVer, err := goDirective(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	write("go.sum", string(sum))
	rulesGo := func(name string) string {
		return `package myrules

import (
	"github.com/tcc-dev/tcc/ir"
	rw "github.com/tcc-dev/tcc/passes/rewrite"
)

func Rules() []*rw.Rule {
	return []*rw.Rule{{
		Name:    "` + name + `",
		Rewrite: "square(square(x)) => never",
		Pattern: rw.Op(ir.OpSquare, rw.Op(ir.OpSquare, rw.Var("x"))),
		Where:   func(*rw.Match) bool { return false },
		Build:   func(b *rw.Builder, m *rw.Match) ([]*ir.Value, error) { return nil, nil },
	}}
}
`
	}
	write("rules.go", rulesGo("NeverFires"))

	// A go directive older than tcc's makes the go command ask for go mod
	// tidy; Inspect must pass that on rather than report no packages.
	goMod := func(goVer string) string {
		return "module example.com/myrules\n\ngo " + goVer + "\n\nrequire github.com/tcc-dev/tcc v0.0.0\n\nreplace github.com/tcc-dev/tcc => " + root + "\n"
	}
	write("go.mod", goMod("1.21"))
	if _, err := Inspect(".", mod); err == nil || !strings.Contains(err.Error(), "go mod tidy") {
		t.Errorf("Inspect of an untidy module: err = %v, want the go command's request for go mod tidy", err)
	}
	write("go.mod", goMod(goVer))
	pkgs, err := Inspect(".", mod)
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) != 1 || pkgs[0].Family != "myrules" || pkgs[0].TCCDir != root || pkgs[0].ModuleDir == root {
		t.Fatalf("Inspect = %+v; want family myrules in its own module, tcc at %s", pkgs, root)
	}
	out := filepath.Join(t.TempDir(), "tcc")
	passesOf := func() string {
		t.Helper()
		var log bytes.Buffer
		built, err := buildDriver(ctx, pkgs, out, &log)
		if err != nil {
			t.Fatal(err)
		}
		if !built {
			t.Errorf("driver not rebuilt for changed sources")
		}
		b, err := exec.CommandContext(ctx, out, "passes").CombinedOutput()
		if err != nil {
			t.Fatalf("driver passes: %v\n%s", err, b)
		}
		return string(b)
	}
	if got := passesOf(); !strings.Contains(got, "  myrules:\n    NeverFires ") {
		t.Errorf("driver `tcc passes` lacks family myrules with NeverFires:\n%s", got)
	}
	write("rules.go", rulesGo("StillNeverFires"))
	if got := passesOf(); !strings.Contains(got, "    StillNeverFires ") {
		t.Errorf("after editing the rules, driver `tcc passes` lacks StillNeverFires:\n%s", got)
	}
}
