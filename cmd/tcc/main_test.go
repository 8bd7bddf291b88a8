package main

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/tcc-dev/tcc/cmd/tcc/cli"
	"github.com/tcc-dev/tcc/ir/longtest"
)

// TestMain lets the test binary act as the tcc command inside scripts: a
// script's "exec tcc ..." runs this package's main (cli.Main) in a child
// process, so exit codes, stdout and stderr are the real binary's.
func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"tcc": func() { os.Exit(cli.Main()) },
	})
}

// TestScript runs the CLI scripts in testdata/script (txtar: commands,
// expected exit status and output; see the testscript package). $ROOT is the
// repository root, for the small model configs under models/.
func TestScript(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	testscript.Run(t, testscript.Params{
		Dir: "testdata/script",
		Setup: func(env *testscript.Env) error {
			env.Setenv("ROOT", root)
			return nil
		},
		RequireExplicitExec: true,
		// [long] holds when the long checks run (TCC_LONG=1, ir/longtest):
		// a script that runs the small model end to end starts with
		// [!long] skip.
		Condition: func(cond string) (bool, error) {
			if cond == "long" {
				return longtest.Enabled(), nil
			}
			return false, fmt.Errorf("unknown condition %q", cond)
		},
	})
}
