package qwen27b

import (
	"testing"

	"github.com/tcc-dev/tcc/ir"
)

func TestPrefill27B(t *testing.T) {
	o := DefaultOptions()
	o.Mode, o.Seq = Prefill, 128
	g, c, err := BuildGraph(o, mesh(2))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("27B prefill of 128 tokens at 1x2: %d ops per device; GDN layer %d (mixer %d), attention layer %d (mixer %d)",
		c.Total(), c.Layers[0].Total(), c.Layers[0].Mixer, c.Layers[3].Total(), c.Layers[3].Mixer)
	if c.Total() != 9366 {
		t.Errorf("%d ops, doc.go says 9,366", c.Total())
	}
	if tok := valueByName(g, "tokens").Type.Shape; !tok.Equal(ir.Shape{1, 128}) {
		t.Errorf("tokens %s", tok)
	}
	if !g.Outputs[0].Type.Shape.Equal(ir.Shape{1, 1, 124160}) { // each card's vocab shard
		t.Errorf("logits %s", g.Outputs[0].Type.Shape)
	}
}
