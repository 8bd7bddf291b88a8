package checktest

import (
	"bytes"
	"strings"
	"testing"

	"github.com/tcc-dev/tcc/cmd/tcc/cli"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/passes"
	rw "github.com/tcc-dev/tcc/passes/rewrite"
)

// TestCheckSeesAWrongFusion: a rule that rewrites rsqrt(x) to sigmoid(x)
// passes the references evaluated on the fused graph (they compute the
// same wrong thing) but not the reference on the unfused graph, so
// `tcc run --check` fails.
func TestCheckSeesAWrongFusion(t *testing.T) {
	wrong := &rw.Rule{
		Name:    "WrongRsqrtToSigmoid",
		Rewrite: "rsqrt(x) => sigmoid(x) (deliberately wrong)",
		Pattern: rw.Op(ir.OpRsqrt, rw.Var("x")),
		Build: func(b *rw.Builder, m *rw.Match) ([]*ir.Value, error) {
			v, err := b.Emit1(ir.OpSigmoid, []*ir.Value{m.Value("x")}, nil)
			return []*ir.Value{v}, err
		},
	}
	if err := passes.RegisterExternal("wrong", wrong); err != nil {
		t.Fatal(err)
	}
	root := cli.NewRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs([]string{"run", "tiny-mlp", "--backend", "sim", "--check", "--steps", "1"})
	err := root.Execute()
	if err == nil {
		t.Fatalf("--check passed with a wrong fusion rule:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "unfused same formats") || !strings.Contains(out.String(), "FAIL") {
		t.Errorf("the failing reference is not named:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "same formats PCC 1.000000") {
		t.Errorf("the fused-graph reference should agree with the (wrongly) fused device:\n%s", out.String())
	}
}
