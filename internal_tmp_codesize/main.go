package main

import (
	"fmt"
	"os"

	"github.com/tcc-dev/tcc/codegen"
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/persist"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/models"
	"github.com/tcc-dev/tcc/models/qwen27b"
	"github.com/tcc-dev/tcc/passes"
)

func main() {
	flags := map[string]string{}
	if len(os.Args) > 1 {
		flags["config"] = os.Args[1]
	}
	args, _ := models.DefaultArgs(qwen27b.Model{}, flags)
	g, _ := qwen27b.Model{}.Build(args, ir.Mesh{Rows: 1, Cols: 2})
	passes.Run(g, passes.Options{})
	b, err := codegen.Compile(g, target.Blackhole())
	if err != nil {
		panic(err)
	}
	p, plan, err := persist.Build(b)
	if err != nil {
		panic(err)
	}
	n, name := persist.CodeBytes(p)
	maxArgs := 0
	for _, k := range p.Kernels {
		maxArgs = max(maxArgs, len(k.ArgsOfKind(kir.RuntimeArg)))
	}
	fmt.Printf("phases %d kernels %d deps %d ctl bytes %d largest merged kernel code %d B (%s), max runtime args of a merged kernel %d\n", len(plan.Phases), len(p.Kernels), plan.Deps(), p.Persist.CtlBytes, n, name, maxArgs)
}
