package main

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/tcc-dev/tcc/cmd/tcc/cli"
	"github.com/tcc-dev/tcc/ir/longtest"
	"github.com/tcc-dev/tcc/models"
	"github.com/tcc-dev/tcc/models/checkpoint"
	"github.com/tcc-dev/tcc/models/qwen27b"
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
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"synth-checkpoint": synthCheckpoint,
		},
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

// synthCheckpoint is the scripts' command "synth-checkpoint CONFIG DIR":
// qwen27b's random weights for the model config CONFIG (seed 11) written
// as a bf16 checkpoint in DIR, with CONFIG as its config.json (what the
// cli tests' synth does).
func synthCheckpoint(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: synth-checkpoint CONFIG DIR")
	}
	cfgPath, dir := ts.MkAbs(args[0]), ts.MkAbs(args[1])
	m := qwen27b.Model{}
	margs, err := models.DefaultArgs(m, map[string]string{"config": cfgPath})
	ts.Check(err)
	hf, err := checkpoint.RandomHF(m, margs, 11)
	ts.Check(err)
	cfg, err := os.ReadFile(cfgPath)
	ts.Check(err)
	ts.Check(checkpoint.WriteSynthetic(dir, cfg, checkpoint.FormBF16, hf, 1))
}
