// Command opgen writes ir/ops_gen.go from the op table in ir/opspec.
// Run it with `go generate ./ir`.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/tcc-dev/tcc/ir/internal/opgen"
	"github.com/tcc-dev/tcc/ir/opspec"
)

func main() {
	out := flag.String("o", "ops_gen.go", "output file")
	flag.Parse()
	src, err := opgen.Generate(opspec.All())
	if err != nil {
		fmt.Fprintln(os.Stderr, "opgen:", err)
		os.Exit(1)
	}
	tmp, err := os.CreateTemp(filepath.Dir(*out), ".opgen-*")
	if err == nil {
		_, err = tmp.Write(src)
		if cerr := tmp.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Rename(tmp.Name(), *out)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "opgen:", err)
		os.Exit(1)
	}
}
