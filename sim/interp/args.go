package interp

import (
	"fmt"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/target"
)

// ArgError is an argument of a kernel that has no value on a core.
type ArgError struct {
	Arg kir.Arg
	// Value is the value that could not be resolved (for a runtime
	// argument, the core's), Err the resolver's error; when Err is nil the
	// runtime argument's index is beyond the core's Values values.
	Value  kir.ArgValue
	Values int
	Err    error
}

func (e *ArgError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("no value for runtime arg %q (index %d); the core has %d values", e.Arg.Name, e.Arg.Index, e.Values)
	}
	return fmt.Sprintf("arg %q = %s: %v", e.Arg.Name, e.Value, e.Err)
}

func (e *ArgError) Unwrap() error { return e.Err }

// ResolveArgs returns the values of k's arguments on core c by row of
// k.Args: a compile-time or common argument's value, or a runtime
// argument's value for c, resolved by r. A missing runtime value or a
// value r cannot resolve is an *ArgError.
func ResolveArgs(k *kir.Kernel, c kir.Core, r kir.Resolver) ([]uint64, error) {
	out := make([]uint64, len(k.Args))
	rt := k.RuntimeValuesOn(c)
	for i, a := range k.Args {
		v := a.Value
		if a.Kind == kir.RuntimeArg {
			if a.Index >= len(rt) {
				return nil, &ArgError{Arg: a, Values: len(rt)}
			}
			v = rt[a.Index]
		}
		x, err := v.Resolve(r)
		if err != nil {
			return nil, &ArgError{Arg: a, Value: v, Err: err}
		}
		out[i] = uint64(x)
	}
	return out, nil
}

// CoreNoC is the NoC coordinates of worker or ethernet core c of t: what
// a machine's kir.Resolver answers for WorkerNoC.
func CoreNoC(t *target.Target, c kir.Core) (x, y int, err error) {
	if c.IsEth() {
		return t.EthNoC(c.X)
	}
	return t.WorkerNoC(c.X, c.Y)
}
