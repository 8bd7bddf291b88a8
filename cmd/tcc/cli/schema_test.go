package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tcc-dev/tcc/codegen/schema"
)

// TestBuildOutputsMatchSchemas: tcc build tiny-mlp writes a programs.json,
// report.json and perf.json that each validate against its committed JSON
// Schema (codegen/schema), and a document with a field of the wrong type
// does not.
func TestBuildOutputsMatchSchemas(t *testing.T) {
	dir := t.TempDir()
	if _, err := runCLI(t, "build", "tiny-mlp", "-o", dir); err != nil {
		t.Fatal(err)
	}
	for file := range schema.Files {
		data, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		if err := schema.Validate(file, data); err != nil {
			t.Errorf("%v", err)
		}
	}

	// negative: each file with one field of the wrong type
	for file, field := range map[string]string{"programs.json": "devices", "report.json": "total_ops", "perf.json": "step_us"} {
		data, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		var doc map[string]any
		if err := json.Unmarshal(data, &doc); err != nil {
			t.Fatal(err)
		}
		if _, ok := doc[field]; !ok {
			t.Fatalf("%s has no %q", file, field)
		}
		doc[field] = "not a number"
		bad, err := json.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		if err := schema.Validate(file, bad); err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("%s with %s a string: err = %v, want a validation error naming %s", file, field, err, field)
		}
	}
}
