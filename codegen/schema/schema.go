// Package schema holds the JSON Schemas (draft 2020-12) of a build's
// programs.json (codegen.ProgramsFile), report.json (report.Report) and
// perf.json (timing.Report), generated from those Go types, and validates
// documents against them.
//
// The committed *.schema.json files are Generate's output; after changing
// one of the types, regenerate them with
//
//	go test ./codegen/schema -run TestSchemasFresh -update
package schema

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"sync"

	"github.com/invopop/jsonschema"
	validator "github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/tcc-dev/tcc/codegen"
	"github.com/tcc-dev/tcc/codegen/hostcfg"
	"github.com/tcc-dev/tcc/passes/report"
	"github.com/tcc-dev/tcc/sim/timing"
)

// Files maps each build file to the name of its committed schema.
var Files = map[string]string{
	"programs.json": "programs.schema.json",
	"report.json":   "report.schema.json",
	"perf.json":     "perf.schema.json",
}

var types = map[string]any{
	"programs.json": &codegen.ProgramsFile{},
	"report.json":   &report.Report{},
	"perf.json":     &timing.Report{},
}

//go:embed *.schema.json
var committed embed.FS

// Generate returns the schemas, keyed by schema file name, as indented JSON
// with a trailing newline.
func Generate() (map[string][]byte, error) {
	out := map[string][]byte{}
	for file, name := range Files {
		r := &jsonschema.Reflector{Mapper: mapper}
		s := r.Reflect(types[file])
		s.ID = jsonschema.ID("https://github.com/tcc-dev/tcc/codegen/schema/" + name)
		s.Title = file
		b, err := json.MarshalIndent(s, "", "  ")
		if err != nil {
			return nil, fmt.Errorf("schema: %s: %w", name, err)
		}
		out[name] = append(b, '\n')
	}
	return out, nil
}

// mapper gives the schemas of the types whose MarshalJSON writes something
// other than their fields.
func mapper(t reflect.Type) *jsonschema.Schema {
	switch t {
	case reflect.TypeFor[hostcfg.ArgValue]():
		// a constant as a number, a symbolic value as a string
		return &jsonschema.Schema{OneOf: []*jsonschema.Schema{
			{Type: "integer", Minimum: json.Number("0")},
			{Type: "string"},
		}}
	case reflect.TypeFor[hostcfg.Core]():
		return &jsonschema.Schema{Type: "string", Pattern: `^(\(\d+,\d+\)|eth\d+)$`}
	case reflect.TypeFor[hostcfg.CoreRange]():
		return &jsonschema.Schema{Type: "string"}
	}
	return nil
}

// Committed returns the committed schema file name (as embedded in the binary).
func Committed(name string) ([]byte, error) { return committed.ReadFile(name) }

// Names lists the committed schema files.
func Names() []string {
	var n []string
	for _, v := range Files {
		n = append(n, v)
	}
	sort.Strings(n)
	return n
}

var (
	compileOnce sync.Once
	compiled    map[string]*validator.Schema
	compileErr  error
)

// Validate checks data, the contents of the build file file
// ("programs.json", "report.json" or "perf.json"), against its committed
// schema.
func Validate(file string, data []byte) error {
	compileOnce.Do(func() {
		compiled = map[string]*validator.Schema{}
		c := validator.NewCompiler()
		for f, name := range Files {
			b, err := committed.ReadFile(name)
			if err != nil {
				compileErr = err
				return
			}
			doc, err := validator.UnmarshalJSON(bytes.NewReader(b))
			if err != nil {
				compileErr = fmt.Errorf("schema: %s: %w", name, err)
				return
			}
			if err := c.AddResource(name, doc); err != nil {
				compileErr = err
				return
			}
			if compiled[f], err = c.Compile(name); err != nil {
				compileErr = err
				return
			}
		}
	})
	if compileErr != nil {
		return compileErr
	}
	s, ok := compiled[file]
	if !ok {
		return fmt.Errorf("schema: no schema for %q", file)
	}
	inst, err := validator.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("schema: %s: %w", file, err)
	}
	if err := s.Validate(inst); err != nil {
		return fmt.Errorf("schema: %s: %w", file, err)
	}
	return nil
}
