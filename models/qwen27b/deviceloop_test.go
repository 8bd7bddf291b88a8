package qwen27b

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/models"
)

// TestDeviceLoopGraph: --device-loop's decode step takes no input; its
// tokens and positions are state the step updates (the argmax result, pos
// + 1) and its RoPE rows come from two [max_seq, rotary] tables; prefill
// and the default decode step are unchanged by the option.
func TestDeviceLoopGraph(t *testing.T) {
	args := func(set map[string]string) models.Args {
		t.Helper()
		set["config"] = "testdata/small.json"
		a, err := models.DefaultArgs(Model{}, set)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	for _, n := range []int{1, 2} {
		g, err := Model{}.Build(args(map[string]string{"batch": "2", "max-seq": "64", "device-loop": "true"}), mesh(n))
		if err != nil {
			t.Fatal(err)
		}
		if len(g.Inputs) != 0 {
			t.Errorf("mesh 1x%d: inputs %v, want none", n, g.Inputs)
		}
		states := map[string]*ir.Value{}
		for _, s := range g.States {
			states[s.Name] = s
		}
		tok, pos := states[LoopTokens], states[LoopPos]
		if tok == nil || pos == nil {
			t.Fatalf("mesh 1x%d: no %s or %s state", n, LoopTokens, LoopPos)
		}
		if got := g.StateUpdates[tok]; got != g.Outputs[1] {
			t.Errorf("mesh 1x%d: %s is updated to %v, want the next-token output %v", n, LoopTokens, got, g.Outputs[1])
		}
		if up := g.StateUpdates[pos]; up == nil || up.Def == nil || up.Def.Kind != ir.OpAddScalar || up.Def.Operands[0] != pos || up.Def.Attrs["value"] != 1.0 {
			t.Errorf("mesh 1x%d: %s is updated by %v, want add_scalar(pos, 1)", n, LoopPos, up)
		}
		tables := 0
		for _, w := range g.Weights {
			if w.Name == RopeCosTable || w.Name == RopeSinTable {
				tables++
				if diff := cmp.Diff(ir.Shape{64, 16}, w.Type.Shape); diff != "" {
					t.Errorf("%s shape (-want +got):\n%s", w.Name, diff)
				}
			}
		}
		if tables != 2 {
			t.Errorf("mesh 1x%d: %d RoPE tables, want 2", n, tables)
		}
	}
	for _, mode := range []string{"decode", "prefill"} {
		plain, err := Model{}.Build(args(map[string]string{"mode": mode}), mesh(1))
		if err != nil {
			t.Fatal(err)
		}
		loop, err := Model{}.Build(args(map[string]string{"mode": mode, "device-loop": "true"}), mesh(1))
		if err != nil {
			t.Fatal(err)
		}
		same := ir.Print(plain) == ir.Print(loop)
		if want := mode == "prefill"; same != want {
			t.Errorf("%s: the --device-loop graph equals the default one: %t, want %t", mode, same, want)
		}
	}
	if _, err := OptionsFrom(args(map[string]string{"device-loop": "yes"})); err == nil || !strings.Contains(err.Error(), "--device-loop") {
		t.Errorf("--device-loop yes: err = %v, want one naming the flag", err)
	}
}

// TestRopeTableRows: row p of the device loop's tables is, bit for bit,
// the table the host writes for a decode step at position p.
func TestRopeTableRows(t *testing.T) {
	const rot, maxSeq = 16, 40
	cos, sin := RopeTableRows(rot, 1e7, maxSeq)
	for _, p := range []int{0, 1, 17, maxSeq - 1} {
		c, s := RopeTables(rot, 1e7, p, 1)
		if diff := cmp.Diff(c, cos[p*rot:(p+1)*rot]); diff != "" {
			t.Errorf("cos row %d (-host +table):\n%s", p, diff)
		}
		if diff := cmp.Diff(s, sin[p*rot:(p+1)*rot]); diff != "" {
			t.Errorf("sin row %d (-host +table):\n%s", p, diff)
		}
	}
}

// TestDeviceLoopEnv: the tables are filled on every device, and every
// other weight and state gets the numbers it gets without the loop.
func TestDeviceLoopEnv(t *testing.T) {
	set := func(loop string) models.Args {
		a, err := models.DefaultArgs(Model{}, map[string]string{"config": "testdata/small.json", "max-seq": "32", "device-loop": loop})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	byName := func(a models.Args) map[string][]float32 {
		t.Helper()
		g, err := Model{}.Build(a, mesh(2))
		if err != nil {
			t.Fatal(err)
		}
		envs, err := Model{}.DeviceEnv(a, g, 1)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string][]float32{}
		for v, data := range envs[1] {
			out[v.Name] = data
		}
		return out
	}
	plain, loop := byName(set("false")), byName(set("true"))
	o, err := OptionsFrom(set("true"))
	if err != nil {
		t.Fatal(err)
	}
	cos, sin := RopeTableRows(o.Config.RotaryDim(), o.Config.RopeTheta, o.MaxSeq)
	want := map[string][]float32{RopeCosTable: cos, RopeSinTable: sin, LoopTokens: {0}, LoopPos: {0}}
	for name, data := range loop {
		w, ok := want[name]
		if !ok {
			w = plain[name]
		}
		if !slices.Equal(w, data) { // not cmp.Equal: reflection over every weight costs seconds
			t.Errorf("%s differs from %s", name, map[bool]string{true: "its computed contents", false: "the default build's"}[ok])
		}
	}
	if len(loop) != len(plain)+4 { // + the tables and the tokens and pos states
		t.Errorf("%d values with the loop, %d without; want 4 more", len(loop), len(plain))
	}
}
