package main

import (
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/models/config"
	"github.com/tcc-dev/tcc/models/qwen27b"
)

func main() {
	o := qwen27b.DefaultOptions()
	if len(os.Args) > 2 && os.Args[2] != "" {
		c, err := config.Load(os.Args[2])
		if err != nil {
			panic(err)
		}
		o.Config = c
	}
	var cols int
	fmt.Sscan(os.Args[1], &cols)
	g, _, err := qwen27b.BuildGraph(o, ir.Mesh{Rows: 1, Cols: cols})
	if err != nil {
		panic(err)
	}
	seen := map[string]int{}
	for _, op := range g.Ops() {
		var parts []string
		for _, v := range op.Operands {
			parts = append(parts, v.Type.String())
		}
		keys := []string{}
		for k := range op.Attrs {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var as []string
		for _, k := range keys {
			as = append(as, fmt.Sprintf("%s=%v", k, op.Attrs[k]))
		}
		s := fmt.Sprintf("%-18s %s {%s} -> %s", op.Name(), strings.Join(parts, ", "), strings.Join(as, " "), op.Result().Type)
		seen[s]++
	}
	var ks []string
	for k := range seen {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	for _, k := range ks {
		fmt.Printf("%4d %s\n", seen[k], k)
	}
}
