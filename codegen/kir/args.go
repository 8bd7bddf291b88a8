package kir

import (
	"fmt"
	"sort"
)

// ArgKind is how a kernel receives an argument.
type ArgKind uint8

const (
	// CompileTimeArg is baked into the binary: get_compile_time_arg_val(i).
	CompileTimeArg ArgKind = iota
	// RuntimeArg has a value per core: get_arg_val<uint32_t>(i).
	RuntimeArg
	// CommonRuntimeArg has one value for all cores of the kernel:
	// get_common_arg_val<uint32_t>(i).
	CommonRuntimeArg
)

func (k ArgKind) String() string {
	switch k {
	case CompileTimeArg:
		return "compile-time"
	case RuntimeArg:
		return "runtime"
	case CommonRuntimeArg:
		return "common-runtime"
	}
	return fmt.Sprintf("argkind(%d)", int(k))
}

// Arg is one row of a kernel's argument table. Index is the position among
// the args of the same Kind. Value is the value of a compile-time or common
// runtime arg (the same on every core); runtime arg values live in
// Kernel.RuntimeValues.
type Arg struct {
	Name  string
	Kind  ArgKind
	Index int
	Value ArgValue
}

// ValueKind says how an ArgValue is resolved at load time.
type ValueKind uint8

const (
	// ValConst is the constant Const.
	ValConst ValueKind = iota
	// ValBufferAddr is the address of buffer Buffer plus Const: the bank
	// base address of a DRAM buffer, or the per-core L1 address of an L1
	// buffer (the same on every core holding part of it).
	ValBufferAddr
	// ValNoCX and ValNoCY are the NoC x / y coordinate of logical core Core.
	ValNoCX
	ValNoCY
	// ValDeviceID is the index of the device the program is loaded on
	// (DeviceID; see eth.go).
	ValDeviceID
)

// ArgValue is an argument value, possibly symbolic until load time.
type ArgValue struct {
	Kind   ValueKind
	Const  uint32 // the value (ValConst) or the byte offset (ValBufferAddr)
	Buffer string // ValBufferAddr
	Core   Core   // ValNoCX, ValNoCY
}

// U32 is the constant argument value v.
func U32(v uint32) ArgValue { return ArgValue{Kind: ValConst, Const: v} }

// BufferAddr is the address of buffer name plus offset bytes.
func BufferAddr(name string, offset uint32) ArgValue {
	return ArgValue{Kind: ValBufferAddr, Buffer: name, Const: offset}
}

// NoCX is the NoC x coordinate of logical core c.
func NoCX(c Core) ArgValue { return ArgValue{Kind: ValNoCX, Core: c} }

// NoCY is the NoC y coordinate of logical core c.
func NoCY(c Core) ArgValue { return ArgValue{Kind: ValNoCY, Core: c} }

// McastCorners is the multicast rectangle with top-left logical core lo
// and bottom-right hi as get_noc_multicast_addr's four corner arguments
// (x_start, y_start, x_end, y_end) for a multicast issued on NoC noc.
// NoC 0 runs from the top-left corner (start <= end); NoC 1 runs the other
// way, so its start is the bottom-right corner (start >= end), in virtual
// coordinates too: tt-metal's Device::get_noc_multicast_encoding swaps the
// corners for NOC_1 and its watcher (hw/inc/internal/debug/sanitize.h,
// DebugSanitizeNocMulticastInvalidRange) refuses any other order. The
// kernel-side get_noc_multicast_addr swaps nothing: the order is the
// caller's. Postcondition: the result satisfies McastOrdered(noc, ...).
func McastCorners(noc int, lo, hi Core) [4]ArgValue {
	if noc == 1 {
		lo, hi = hi, lo
	}
	return [4]ArgValue{NoCX(lo), NoCY(lo), NoCX(hi), NoCY(hi)}
}

// McastOrder describes the corner order NoC noc requires, for errors.
func McastOrder(noc int) string {
	if noc == 1 {
		return "start >= end in x and y"
	}
	return "start <= end in x and y"
}

// McastOrdered reports whether NoC coordinates (x0, y0)..(x1, y1) are a
// multicast rectangle in the corner order NoC noc requires (McastCorners).
func McastOrdered(noc int, x0, y0, x1, y1 int) bool {
	if noc == 1 {
		return x0 >= x1 && y0 >= y1
	}
	return x0 <= x1 && y0 <= y1
}

func (v ArgValue) String() string {
	switch v.Kind {
	case ValConst:
		return fmt.Sprint(v.Const)
	case ValBufferAddr:
		if v.Const == 0 {
			return fmt.Sprintf("addr(%s)", v.Buffer)
		}
		return fmt.Sprintf("addr(%s)+%d", v.Buffer, v.Const)
	case ValNoCX:
		return fmt.Sprintf("noc_x%s", v.Core)
	case ValNoCY:
		return fmt.Sprintf("noc_y%s", v.Core)
	case ValDeviceID:
		return "device_id"
	}
	return fmt.Sprintf("argvalue(%d)", int(v.Kind))
}

// Resolver supplies load-time facts for ArgValue.Resolve.
type Resolver interface {
	// BufferAddress is the address of the named buffer.
	BufferAddress(name string) (uint32, error)
	// WorkerNoC is the NoC coordinate of a logical worker core (or, for
	// resolvers that know ethernet cores, of an ethernet core: Core.IsEth).
	WorkerNoC(c Core) (x, y int, err error)
}

// Resolve computes the concrete value of v.
func (v ArgValue) Resolve(r Resolver) (uint32, error) {
	switch v.Kind {
	case ValConst:
		return v.Const, nil
	case ValBufferAddr:
		a, err := r.BufferAddress(v.Buffer)
		if err != nil {
			return 0, err
		}
		return a + v.Const, nil
	case ValNoCX, ValNoCY:
		x, y, err := r.WorkerNoC(v.Core)
		if err != nil {
			return 0, err
		}
		if v.Kind == ValNoCX {
			return uint32(x), nil
		}
		return uint32(y), nil
	case ValDeviceID:
		return resolveDevice(r)
	}
	return 0, fmt.Errorf("unknown argument value kind %d", v.Kind)
}

func (k *Kernel) declare(name string, kind ArgKind, v ArgValue) ArgRef {
	n := 0
	for _, a := range k.Args {
		if a.Kind == kind {
			n++
		}
	}
	k.Args = append(k.Args, Arg{Name: name, Kind: kind, Index: n, Value: v})
	return ArgRef{Name: name}
}

// CompileArg declares a compile-time argument with value v at the next
// compile-time index and returns a reference to it.
func (k *Kernel) CompileArg(name string, v uint32) ArgRef {
	return k.declare(name, CompileTimeArg, U32(v))
}

// RuntimeArg declares a per-core runtime argument at the next runtime index;
// set its values with SetRuntimeArg / SetRuntimeArgs.
func (k *Kernel) RuntimeArg(name string) ArgRef { return k.declare(name, RuntimeArg, ArgValue{}) }

// CommonArg declares a common runtime argument with value v at the next
// common index.
func (k *Kernel) CommonArg(name string, v ArgValue) ArgRef {
	return k.declare(name, CommonRuntimeArg, v)
}

// LookupArg returns the table row called name, or nil.
func (k *Kernel) LookupArg(name string) *Arg {
	for i := range k.Args {
		if k.Args[i].Name == name {
			return &k.Args[i]
		}
	}
	return nil
}

// ArgsOfKind returns the args of one kind in index order.
func (k *Kernel) ArgsOfKind(kind ArgKind) []Arg {
	var out []Arg
	for _, a := range k.Args {
		if a.Kind == kind {
			out = append(out, a)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Index < out[j].Index })
	return out
}

// numArgs is len(k.ArgsOfKind(kind)).
func (k *Kernel) numArgs(kind ArgKind) int {
	n := 0
	for _, a := range k.Args {
		if a.Kind == kind {
			n++
		}
	}
	return n
}

func (k *Kernel) coreArgs(c Core) *CoreArgs {
	if k.RuntimeValues == nil {
		n := 0
		for _, r := range k.Cores {
			if r.X1 >= r.X0 && r.Y1 >= r.Y0 {
				n += (r.X1 - r.X0 + 1) * (r.Y1 - r.Y0 + 1)
			}
		}
		// Room for every core's values: they are set core by core.
		k.RuntimeValues = make([]CoreArgs, 0, max(n, 1))
	}
	i := sort.Search(len(k.RuntimeValues), func(i int) bool { return !k.RuntimeValues[i].Core.Less(c) })
	if i < len(k.RuntimeValues) && k.RuntimeValues[i].Core == c {
		return &k.RuntimeValues[i]
	}
	k.RuntimeValues = append(k.RuntimeValues, CoreArgs{})
	copy(k.RuntimeValues[i+1:], k.RuntimeValues[i:])
	k.RuntimeValues[i] = CoreArgs{Core: c}
	return &k.RuntimeValues[i]
}

// SetRuntimeArgs sets the runtime argument values of core c positionally
// (vals[i] is runtime arg index i), replacing earlier values for c.
func (k *Kernel) SetRuntimeArgs(c Core, vals ...ArgValue) {
	ca := k.coreArgs(c)
	ca.Values = append([]ArgValue(nil), vals...)
}

// SetRuntimeArg sets the value of the runtime arg called name on core c.
func (k *Kernel) SetRuntimeArg(c Core, name string, v ArgValue) error {
	a := k.LookupArg(name)
	if a == nil || a.Kind != RuntimeArg {
		return fmt.Errorf("kernel %q: no runtime arg %q", k.Name, name)
	}
	ca := k.coreArgs(c)
	for len(ca.Values) <= a.Index {
		ca.Values = append(ca.Values, U32(0))
	}
	ca.Values[a.Index] = v
	return nil
}

// SetRuntimeArgAll sets the runtime arg called name to v on every core of
// the kernel.
func (k *Kernel) SetRuntimeArgAll(name string, v ArgValue) error {
	for _, c := range CoresOf(k.Cores) {
		if err := k.SetRuntimeArg(c, name, v); err != nil {
			return err
		}
	}
	return nil
}

// RuntimeValuesOn returns the runtime argument values of core c (nil if none).
func (k *Kernel) RuntimeValuesOn(c Core) []ArgValue {
	i := sort.Search(len(k.RuntimeValues), func(i int) bool { return !k.RuntimeValues[i].Core.Less(c) })
	if i < len(k.RuntimeValues) && k.RuntimeValues[i].Core == c {
		return k.RuntimeValues[i].Values
	}
	return nil
}
