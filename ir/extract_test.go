package ir

import "testing"

func TestExtractRegion(t *testing.T) {
	b := NewBuilder("m")
	x := b.Input("x", T(BF16, 32, 64))
	w := b.Weight("w", T(BF16, 64, 64))
	s := b.State("s", T(BF16, 32, 64))
	b.Region("embed", -1)
	h := b.SiLU(x)
	b.Region("mlp", 0)
	y := b.Matmul(h, w)
	ns := b.Add(s, y)
	b.UpdateState(s, ns)
	z := b.Exp(y)
	b.Region("head", -1)
	b.Output(b.Sigmoid(z))
	g, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	sub, m, err := ExtractRegion(g, g.Regions[1])
	if err != nil {
		t.Fatal(err)
	}
	if err := Verify(sub); err != nil {
		t.Fatalf("extracted graph does not verify: %v\n%s", err, Print(sub))
	}
	if len(sub.Inputs) != 1 || sub.Inputs[0].Name != "layer 0 (mlp) in "+h.String() || len(sub.Weights) != 1 || len(sub.States) != 1 {
		t.Errorf("declarations: inputs %v weights %v states %v", sub.Inputs, sub.Weights, sub.States)
	}
	if len(sub.Outputs) != 1 || sub.Outputs[0] != m[z] {
		t.Errorf("outputs %v, want the exp result", sub.Outputs)
	}
	if sub.StateUpdates[m[s]] != m[ns] {
		t.Errorf("state update not carried over")
	}
	if err := Verify(g); err != nil || g.Regions[1].Ops[0].Results[0] != y {
		t.Errorf("source graph changed: %v", err)
	}
	if _, _, err := ExtractRegion(g, &Region{Kind: "x"}); err == nil {
		t.Error("foreign region accepted")
	}
}
