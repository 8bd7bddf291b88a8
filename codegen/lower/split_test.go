package lower

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
)

// TestSplitProgram checks splitProgram's postconditions: finish and
// finishRows give core i its plan.Range(i) share on the reader and the
// writer (scaled by n for rows), and an error kept by planned is returned
// instead of the program (bind still declares the buffers).
func TestSplitProgram(t *testing.T) {
	tgt := target.Blackhole()
	_, op := graphOp(t, func(b *ir.Builder) *ir.Value { return b.SiLU(b.Input("x", ir.T(ir.BF16, 64, 96))) })
	x, out := op.Operands[0], op.Result()
	plan := Split{Items: 6, Cores: 3, PerCore: 2}
	for _, tc := range []struct {
		name string
		// arg and n: finishRows(arg, n); arg "" is finish.
		arg     string
		n       int
		extraCB int // CBs to plan beyond the output's
		// wantWriter are the writer's runtime arg names, wantErr a
		// substring of the error ("" for none).
		wantWriter []string
		wantErr    string
	}{
		{name: "finish", wantWriter: []string{"start_tile", "num_tiles"}},
		{name: "finishRows", arg: "wt", n: 3, wantWriter: []string{"start_row", "num_rows"}},
		{name: "planned keeps the CB error", extraCB: tgt.MaxCBs, wantErr: "rule cb-count"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sp, err := newSplitProgram(op, NewContext(tgt), plan)
			if err != nil {
				t.Fatal(err)
			}
			cbOut := sp.cbs.Output("out", ir.BF16, 2)
			for i := range tc.extraCB {
				sp.cbs.Scratch(fmt.Sprintf("extra%d", i), ir.BF16, 1)
			}
			sp.planned("test")
			rd := sp.reader()
			if acc := sp.bind(rd, "x_addr", x); acc == nil {
				t.Errorf("bind returned %v with err %v", acc, sp.err)
			}
			rd.RuntimeArg("start_tile")
			rd.RuntimeArg("num_tiles")
			p, err := sp.finishRows(out, cbOut, rd, nil, tc.arg, tc.n)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || p != nil {
					t.Fatalf("finish returned a program: %t, error %v; want none and an error with %q", p != nil, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			wr := p.Kernels[len(p.Kernels)-1]
			var names []string
			for _, a := range wr.ArgsOfKind(kir.RuntimeArg) {
				names = append(names, a.Name)
			}
			if !reflect.DeepEqual(names, tc.wantWriter) {
				t.Errorf("writer runtime args %v, want %v", names, tc.wantWriter)
			}
			if tc.arg != "" {
				if a := wr.LookupArg(tc.arg); a == nil || a.Value != kir.U32(uint32(tc.n)) {
					t.Errorf("writer compile arg %s = %+v, want %d", tc.arg, a, tc.n)
				}
			}
			for i, c := range sp.cores {
				st, n := plan.Range(i)
				want := []kir.ArgValue{kir.U32(uint32(st)), kir.U32(uint32(n))}
				for _, k := range []*kir.Kernel{rd, wr} {
					if got := k.RuntimeValuesOn(c); !reflect.DeepEqual(got, want) {
						t.Errorf("core %d: %s runtime args %v, want %v", i, k.Name, got, want)
					}
				}
			}
		})
	}
}
