package persist_test

import (
	"strings"
	"testing"

	"github.com/tcc-dev/tcc/codegen"
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/persist"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
)

// oneTile compiles a step whose state y (one 32x32 tile) is updated in
// place: y2 = y+1.
func oneTile(t *testing.T) (*codegen.Build, *ir.Value) {
	t.Helper()
	b := ir.NewBuilder("onetile")
	y := b.State("y", ir.T(ir.BF16, 32, 32))
	y2 := b.AddScalar(y, 1)
	b.Output(y2)
	b.UpdateState(y, y2)
	g, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	build, err := codegen.Compile(g, target.Blackhole())
	if err != nil {
		t.Fatal(err)
	}
	return build, y2
}

// TestBuildLoop: BuildLoop loops every merged kernel over the steps and
// declares a history of one page per step; bad input is an error naming
// what is wrong.
func TestBuildLoop(t *testing.T) {
	tile, y2 := oneTile(t)
	dia := diamond(t)
	cases := []struct {
		name   string
		b      *codegen.Build
		steps  int
		tokens *ir.Value
		err    string
	}{
		{"ok", tile, 3, y2, ""},
		{"no steps", tile, 0, y2, "want at least 1"},
		{"no tokens", tile, 3, nil, "needs a build and its tokens value"},
		{"tokens of many pages", dia, 3, dia.Graph.Outputs[0], "want a one-page interleaved DRAM buffer"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, _, err := persist.BuildLoop(tc.b, tc.steps, tc.tokens)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("BuildLoop: error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p.Persist.Steps != tc.steps {
				t.Errorf("Persist.Steps = %d, want %d", p.Persist.Steps, tc.steps)
			}
			if h := p.Buffer(persist.HistoryBuffer); h == nil || h.Pages != tc.steps || !h.Mem.Kind.IsDRAM() {
				t.Errorf("history buffer %+v, want %d DRAM pages", h, tc.steps)
			}
			for _, k := range p.Kernels {
				f, ok := k.Body[0].(kir.For)
				if len(k.Body) != 1 || !ok || f.Var.Name != persist.StepVar.Name {
					t.Errorf("kernel %s: body is not one step loop", k.Name)
				}
			}
		})
	}
}
