package qwen27b_test

import (
	"os"
	"testing"

	"github.com/tcc-dev/tcc/codegen"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/ir/longtest"
	"github.com/tcc-dev/tcc/models/config"
	"github.com/tcc-dev/tcc/models/qwen27b"
	"github.com/tcc-dev/tcc/passes"
)

// FuzzConfigBuild feeds config bytes through everything `tcc build
// qwen27b --config FILE` does: parse and validate the config, build the
// graph at mesh 1x1 and 1x2, run the pass pipeline, lower and print the
// programs. Any input may be rejected with an error; none may panic, and a
// config that is accepted must build. `go test` runs the seeds (the
// committed configs and a few broken ones; the full 27B config, ~5 CPU-s,
// only as a long check); `go test -fuzz FuzzConfigBuild ./models/qwen27b`
// explores.
func FuzzConfigBuild(f *testing.F) {
	small, err := os.ReadFile("testdata/small.json")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(small)
	if longtest.Enabled() {
		f.Add(config.Default27BJSON())
	}
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"text_config": {"hidden_size": -1}}`))
	f.Add(small[:len(small)/2])
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := config.Parse(data)
		if err != nil {
			return
		}
		o := qwen27b.DefaultOptions()
		o.Config = c
		if o.MaxSeq > c.MaxPositionEmbeddings {
			o.MaxSeq = ir.TileSize
		}
		if err := o.Check(); err != nil {
			return
		}
		for _, mesh := range []ir.Mesh{{Rows: 1, Cols: 1}, {Rows: 1, Cols: 2}} {
			g, _, err := qwen27b.BuildGraph(o, mesh)
			if err != nil {
				continue // e.g. heads not divisible by the devices
			}
			if _, err := passes.Run(g, passes.Options{}); err != nil {
				t.Fatalf("mesh %v: a built graph fails the pass pipeline: %v", mesh, err)
			}
			// Lowering may refuse (L1 or DRAM capacity, a shape no program
			// kind supports) with an error; it must not panic.
			codegen.Compile(g, target.Blackhole())
		}
	})
}
