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
			"mkckpt":           mkckpt,
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

// mkckpt DIR FORM writes the small qwen27b config's random weights
// (models/qwen27b/testdata/small.json, seed 11) as a two-shard checkpoint
// of FORM (bf16, fp8 or nvfp4) with its config.json into DIR.
func mkckpt(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: mkckpt DIR bf16|fp8|nvfp4")
	}
	writeCheckpoint(ts, filepath.Join(ts.Getenv("ROOT"), "models/qwen27b/testdata/small.json"), ts.MkAbs(args[0]), checkpoint.Form(args[1]), 2)
}

// synthCheckpoint is the scripts' command "synth-checkpoint CONFIG DIR":
// qwen27b's random weights for the model config CONFIG (seed 11) written
// as a one-shard bf16 checkpoint in DIR, with CONFIG as its config.json
// (what the cli tests' synth does).
func synthCheckpoint(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: synth-checkpoint CONFIG DIR")
	}
	writeCheckpoint(ts, ts.MkAbs(args[0]), ts.MkAbs(args[1]), checkpoint.FormBF16, 1)
}

// writeCheckpoint writes qwen27b's random weights (seed 11) for the config
// at cfgPath as a checkpoint of form in dir, in shards files, with the
// config as its config.json.
func writeCheckpoint(ts *testscript.TestScript, cfgPath, dir string, form checkpoint.Form, shards int) {
	m := qwen27b.Model{}
	a, err := models.DefaultArgs(m, map[string]string{"config": cfgPath})
	ts.Check(err)
	hf, err := checkpoint.RandomHF(m, a, 11)
	ts.Check(err)
	cfg, err := os.ReadFile(cfgPath)
	ts.Check(err)
	ts.Check(checkpoint.WriteSynthetic(dir, cfg, form, hf, shards))
}
