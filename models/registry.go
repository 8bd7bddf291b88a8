package models

import (
	"fmt"
	"math/rand"
	"sort"
	"strconv"
	"strings"

	"github.com/tcc-dev/tcc/ir"
)

// Param is one model parameter settable from the command line.
type Param struct {
	Name    string // flag name, e.g. "hidden"
	Default string
	Doc     string
}

// Args holds parameter values by name (defaults filled in).
type Args map[string]string

// Int returns the named parameter as an int or an error naming it.
func (a Args) Int(name string) (int, error) {
	s, ok := a[name]
	if !ok {
		return 0, fmt.Errorf("missing parameter --%s", name)
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("parameter --%s: %q is not an integer", name, s)
	}
	return n, nil
}

// Model is a buildable model.
type Model interface {
	Name() string
	Doc() string
	Params() []Param
	// Build returns the model's decode-step graph for a mesh, verified. The
	// graph is unfused: one op per device program of the composed path.
	Build(args Args, mesh ir.Mesh) (*ir.Graph, error)
	// InitWeight returns deterministic random contents (row-major) for a
	// weight or state value, scaled so activations stay well conditioned.
	InitWeight(v *ir.Value, rng *rand.Rand) []float32
}

var registry = map[string]Model{}

// Register adds a model; it panics on a duplicate name (a programming error).
func Register(m Model) {
	if _, dup := registry[m.Name()]; dup {
		panic("models: duplicate model " + m.Name())
	}
	registry[m.Name()] = m
}

// Names lists registered model names, sorted.
func Names() []string {
	var ns []string
	for n := range registry {
		ns = append(ns, n)
	}
	sort.Strings(ns)
	return ns
}

// Lookup finds a model by name, or returns an error listing the known ones.
func Lookup(name string) (Model, error) {
	if m, ok := registry[name]; ok {
		return m, nil
	}
	return nil, fmt.Errorf("unknown model %q (known: %s)", name, strings.Join(Names(), ", "))
}

// DefaultArgs returns m's parameters at their defaults, overridden by set.
// Unknown names in set are an error.
func DefaultArgs(m Model, set map[string]string) (Args, error) {
	a := Args{}
	for _, p := range m.Params() {
		a[p.Name] = p.Default
	}
	for k, v := range set {
		if _, ok := a[k]; !ok {
			return nil, fmt.Errorf("model %s has no parameter --%s", m.Name(), k)
		}
		a[k] = v
	}
	return a, nil
}
