// Command insngen writes codegen/kir/stmt_gen.go and codegen/cpp/insn_gen.go
// from the instruction table in codegen/internal/insnspec. Run it with
// `go generate ./codegen/kir`.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/tcc-dev/tcc/codegen/internal/insngen"
	"github.com/tcc-dev/tcc/codegen/internal/insnspec"
)

func main() {
	kirOut := flag.String("kir", "stmt_gen.go", "output file of package kir")
	cppOut := flag.String("cpp", "../cpp/insn_gen.go", "output file of package cpp")
	flag.Parse()
	for _, o := range []struct {
		path string
		gen  func([]insnspec.Insn) ([]byte, error)
	}{{*kirOut, insngen.GenerateKIR}, {*cppOut, insngen.GenerateCPP}} {
		src, err := o.gen(insnspec.All())
		if err == nil {
			err = writeFile(o.path, src)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "insngen:", err)
			os.Exit(1)
		}
	}
}

// writeFile replaces path with src atomically.
func writeFile(path string, src []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".insngen-*")
	if err != nil {
		return err
	}
	_, err = tmp.Write(src)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}
