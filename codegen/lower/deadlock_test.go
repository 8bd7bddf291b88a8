package lower

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/sim/kexec"
)

// breakFirstWait rewrites the first cb_wait_front of body to wait for one
// page more than is ever pushed per step, reporting the CB it broke.
func breakFirstWait(body []kir.Stmt) (int, bool) {
	for i, s := range body {
		switch st := s.(type) {
		case kir.CBWaitFront:
			st.N = kir.Add(st.N, kir.C(1))
			body[i] = st
			return st.CB, true
		case kir.For:
			if cb, ok := breakFirstWait(st.Body); ok {
				body[i] = st
				return cb, true
			}
		case kir.If:
			if cb, ok := breakFirstWait(st.Then); ok {
				return cb, true
			}
		}
	}
	return 0, false
}

// TestBrokenLoweringDeadlocks breaks a real lowering — the compute kernel of
// silu waits for a page its reader never pushes — and requires the
// simulator to report a deadlock naming the core, the kernel and the CB,
// instead of hanging.
func TestBrokenLoweringDeadlocks(t *testing.T) {
	_, op := graphOp(t, func(b *ir.Builder) *ir.Value {
		return b.SiLU(b.Input("x", ir.T(ir.BF16, 32, 64)))
	})
	tgt := target.Blackhole()
	ctx := NewContext(tgt)
	p, err := Lower(op, ctx)
	if err != nil {
		t.Fatal(err)
	}
	compute := p.Kernel("compute")
	if compute == nil {
		t.Fatal("silu has no compute kernel")
	}
	cb, ok := breakFirstWait(compute.Body)
	if !ok {
		t.Fatal("compute kernel has no cb_wait_front")
	}
	d := kexec.NewDevice(tgt)
	for _, b := range p.Buffers {
		if _, err := d.Alloc(b); err != nil {
			t.Fatal(err)
		}
	}
	_, err = d.Run(p, kexec.RunOptions{})
	var dl *kexec.DeadlockError
	if !errors.As(err, &dl) {
		t.Fatalf("want a DeadlockError, got %v", err)
	}
	msg := err.Error()
	t.Logf("deadlock report:\n%s", msg)
	for _, want := range []string{"deadlock", "compute", "(0,0)", "c_" + strconv.Itoa(cb)} {
		if !strings.Contains(msg, want) {
			t.Errorf("deadlock report lacks %q:\n%s", want, msg)
		}
	}
}
