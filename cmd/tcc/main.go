// Command tcc compiles models written in Go into Tenstorrent Blackhole
// programs, runs them on the built-in simulator, and reports what it did.
//
//	tcc build tiny-mlp -o out/tiny-mlp       # kernels, program configs, report
//	tcc run tiny-mlp --backend sim --check   # run on the simulator, check PCC
//	tcc report ops qwen27b --mesh 1x2        # device programs per layer
//	tcc ir tiny-mlp --stage fused            # print the graph IR
//	tcc passes                               # list passes and fusion rules
//
// The commands live in package cmd/tcc/cli.
package main

import (
	"os"

	"github.com/tcc-dev/tcc/cmd/tcc/cli"
)

func main() { os.Exit(cli.Main()) }
