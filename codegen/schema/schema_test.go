package schema

import (
	"bytes"
	"flag"
	"os"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the committed schemas")

// TestSchemasFresh: every committed schema equals its regeneration from
// the Go types (-update rewrites them).
func TestSchemasFresh(t *testing.T) {
	gen, err := Generate()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range Names() {
		if *update {
			if err := os.WriteFile(name, gen[name], 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := Committed(name)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, gen[name]) {
			t.Errorf("%s is stale: go test ./codegen/schema -run TestSchemasFresh -update", name)
		}
	}
}
