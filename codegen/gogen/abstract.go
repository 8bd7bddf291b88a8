package gogen

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/tcc-dev/tcc/codegen/hostcfg"
	"github.com/tcc-dev/tcc/codegen/kir"
)

// placeholder is the name standing for the i-th buffer of a signature.
func placeholder(i int) string { return "$" + strconv.Itoa(i) }

// rename applies f to every buffer name in c (buffers, argument values,
// CB backing buffers).
func rename(c *hostcfg.ProgramConfig, f func(string) (string, error)) error {
	var err error
	fix := func(v *hostcfg.ArgValue) {
		if err == nil && v.Kind == kir.ValBufferAddr {
			v.Buffer, err = f(v.Buffer)
		}
	}
	for i := range c.Buffers {
		if err == nil {
			c.Buffers[i].Name, err = f(c.Buffers[i].Name)
		}
	}
	for i := range c.CBs {
		if c.CBs[i].BackingBuffer != "" && err == nil {
			c.CBs[i].BackingBuffer, err = f(c.CBs[i].BackingBuffer)
		}
	}
	for i := range c.Kernels {
		k := &c.Kernels[i]
		for j := range k.CompileArgs {
			fix(&k.CompileArgs[j].Value)
		}
		for j := range k.CommonRuntimeArgs {
			fix(&k.CommonRuntimeArgs[j].Value)
		}
		for j := range k.RuntimeArgs {
			for l := range k.RuntimeArgs[j].Values {
				fix(&k.RuntimeArgs[j].Values[l])
			}
		}
	}
	return err
}

// Abstract returns c with its program name cleared and buffer names
// replaced by placeholders in declaration order, plus the names they stand
// for. c is not modified.
func Abstract(c *hostcfg.ProgramConfig) (*hostcfg.ProgramConfig, []string, error) {
	a := clone(c)
	index := map[string]int{}
	var names []string
	for _, b := range c.Buffers {
		index[b.Name] = len(names)
		names = append(names, b.Name)
	}
	a.Program = ""
	err := rename(a, func(n string) (string, error) {
		i, ok := index[n]
		if !ok {
			return "", fmt.Errorf("gogen: program %s: argument names buffer %q it does not declare", c.Program, n)
		}
		return placeholder(i), nil
	})
	return a, names, err
}

// Concretize is the inverse of Abstract: placeholders become names, and the
// program is called program.
func Concretize(a *hostcfg.ProgramConfig, program string, names []string) (*hostcfg.ProgramConfig, error) {
	c := clone(a)
	c.Program = program
	err := rename(c, func(n string) (string, error) {
		i, err := strconv.Atoi(strings.TrimPrefix(n, "$"))
		if !strings.HasPrefix(n, "$") || err != nil || i < 0 || i >= len(names) {
			return "", fmt.Errorf("gogen: program %s: placeholder %q has no buffer (%d given)", program, n, len(names))
		}
		return names[i], nil
	})
	return c, err
}

// signatureID is a short content hash of an abstract config.
func signatureID(a *hostcfg.ProgramConfig) (string, error) {
	b, err := json.Marshal(a)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8]), nil
}
