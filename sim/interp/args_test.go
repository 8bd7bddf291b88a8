package interp

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/tcc-dev/tcc/codegen/kir"
)

// TestResolveArgs: argument values by row, a missing runtime value named.
func TestResolveArgs(t *testing.T) {
	k := &kir.Kernel{Name: "k"}
	k.CompileArg("n", 7)
	k.RuntimeArg("start")
	c := kir.Core{X: 1, Y: 1}
	k.SetRuntimeArgs(c, kir.U32(5))
	got, err := ResolveArgs(k, c, nil)
	if err != nil || !slices.Equal(got, []uint64{7, 5}) {
		t.Errorf("args %v, %v; want [7 5]", got, err)
	}
	_, err = ResolveArgs(k, kir.Core{X: 2, Y: 2}, nil)
	var ae *ArgError
	if !errors.As(err, &ae) || ae.Arg.Name != "start" || !strings.Contains(err.Error(), `no value for runtime arg "start" (index 0)`) {
		t.Errorf("error %v, want the missing runtime arg named", err)
	}
}
