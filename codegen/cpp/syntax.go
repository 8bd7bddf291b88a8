package cpp

import (
	_ "embed"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sort"

	"github.com/tcc-dev/tcc/codegen/kir"
)

// apiHeader declares, without definitions, exactly the tt-metal API subset
// tcc prints, written from the real signatures (see doc.go).
//
//go:embed testdata/tt_api.h
var apiHeader []byte

// ErrNoCompiler is returned by SyntaxCheck when g++ is not installed.
var ErrNoCompiler = errors.New("g++ is not installed; the kernel syntax check needs it")

// BuildDefine is the define the tt-metal JIT build sets for a processor.
func BuildDefine(p kir.Processor) string {
	switch p {
	case kir.RISCV0:
		return "COMPILE_FOR_BRISC"
	case kir.RISCV1:
		return "COMPILE_FOR_NCRISC"
	}
	return "TRISC_MATH"
}

// SyntaxCheck runs `g++ -std=c++17 -fsyntax-only` on the kernel source
// files (path -> processor) against the declaration header, grouped by the
// processor's build define, using dir for scratch files. It returns g++'s
// output per define and whether each group passed.
func SyntaxCheck(dir string, sources map[string]kir.Processor) (outputs map[string]string, ok map[string]bool, err error) {
	gxx, err := exec.LookPath("g++")
	if err != nil {
		return nil, nil, ErrNoCompiler
	}
	header := filepath.Join(dir, "tt_api.h")
	if err := os.WriteFile(header, apiHeader, 0o644); err != nil {
		return nil, nil, err
	}
	inc := filepath.Join(dir, "inc")
	hs := map[string]bool{dataflowHeader: true, computeArgsHeader: true, ethHeader: true}
	for _, h := range computeHeaders {
		hs[h] = true
	}
	for h := range hs {
		f := filepath.Join(inc, filepath.FromSlash(h))
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			return nil, nil, err
		}
		if err := os.WriteFile(f, []byte("#pragma once\n// stub: declarations come from tt_api.h\n"), 0o644); err != nil {
			return nil, nil, err
		}
	}
	groups := map[string][]string{}
	for f, p := range sources {
		d := BuildDefine(p)
		groups[d] = append(groups[d], f)
	}
	outputs, ok = map[string]string{}, map[string]bool{}
	defs := make([]string, 0, len(groups))
	for d := range groups {
		defs = append(defs, d)
	}
	sort.Strings(defs)
	for _, d := range defs {
		files := groups[d]
		sort.Strings(files)
		args := append([]string{"-std=c++17", "-fsyntax-only", "-Wparentheses", "-Wsign-compare", "-I", inc,
			"-include", header, "-D" + d}, files...)
		out, err := exec.Command(gxx, args...).CombinedOutput()
		outputs[d] = string(out)
		ok[d] = err == nil
	}
	return outputs, ok, nil
}
