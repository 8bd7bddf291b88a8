package hostcfg

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/ir"
)

// ArgValue is an argument value in JSON: a number for a constant, otherwise
// a symbolic string resolved at load time: "addr(buf)", "addr(buf)+64",
// "noc_x(1,0)", "noc_y(1,0)" (the kir.ArgValue.String forms),
// "noc_x(eth3)" / "noc_y(eth3)" for the NoC coordinate of ethernet core 3,
// and "device_id" for the index of the device the program is loaded on
// (kir.DeviceID: a program every card of a mesh row runs).
type ArgValue struct{ kir.ArgValue }

// MarshalJSON prints a constant as a number and anything else as its
// symbolic string.
func (v ArgValue) MarshalJSON() ([]byte, error) { return v.appendJSON(nil) }

// appendJSON appends MarshalJSON's bytes to b.
func (v ArgValue) appendJSON(b []byte) ([]byte, error) {
	switch v.Kind {
	case kir.ValConst:
		return strconv.AppendUint(b, uint64(v.Const), 10), nil
	case kir.ValBufferAddr, kir.ValDeviceID:
		return appendString(b, v.String()), nil
	case kir.ValNoCX, kir.ValNoCY:
		axis := "x"
		if v.Kind == kir.ValNoCY {
			axis = "y"
		}
		// Core.String of an ethernet core is "eth3"; parenthesise it so
		// both kinds read as noc_x(<core>).
		c := v.Core.String()
		if v.Core.IsEth() {
			c = "(" + c + ")"
		}
		return appendString(b, "noc_"+axis+c), nil
	}
	return nil, fmt.Errorf("argument value of unknown kind %d", v.Kind)
}

var (
	addrRE   = regexp.MustCompile(`^addr\(([^()]+)\)(?:\+(\d+))?$`)
	nocRE    = regexp.MustCompile(`^noc_([xy])\((\d+),(\d+)\)$`)
	nocEthRE = regexp.MustCompile(`^noc_([xy])(?:\(eth(\d+)\)|eth(\d+))$`)
)

// deviceIDValue is the symbolic form of kir.DeviceID.
const deviceIDValue = "device_id"

// ParseArgValue parses the symbolic forms MarshalJSON writes for
// non-constant values, or a decimal constant. It also accepts
// kir.ArgValue.String's "noc_xeth3" spelling of an ethernet core's
// coordinate.
func ParseArgValue(s string) (kir.ArgValue, error) {
	if s == deviceIDValue {
		return kir.DeviceID(), nil
	}
	if m := addrRE.FindStringSubmatch(s); m != nil {
		var off uint64
		if m[2] != "" {
			var err error
			if off, err = strconv.ParseUint(m[2], 10, 32); err != nil {
				return kir.ArgValue{}, fmt.Errorf("argument value %q: offset: %w", s, err)
			}
		}
		return kir.BufferAddr(m[1], uint32(off)), nil
	}
	noc := func(axis string, c kir.Core) kir.ArgValue {
		if axis == "x" {
			return kir.NoCX(c)
		}
		return kir.NoCY(c)
	}
	if m := nocRE.FindStringSubmatch(s); m != nil {
		x, err1 := strconv.Atoi(m[2])
		y, err2 := strconv.Atoi(m[3])
		if err1 != nil || err2 != nil {
			return kir.ArgValue{}, fmt.Errorf("argument value %q: core coordinate out of range", s)
		}
		return noc(m[1], kir.Core{X: x, Y: y}), nil
	}
	if m := nocEthRE.FindStringSubmatch(s); m != nil {
		ch, err := strconv.Atoi(m[2] + m[3])
		if err != nil {
			return kir.ArgValue{}, fmt.Errorf("argument value %q: ethernet channel out of range", s)
		}
		return noc(m[1], kir.EthCore(ch)), nil
	}
	if n, err := strconv.ParseUint(s, 10, 32); err == nil {
		return kir.U32(uint32(n)), nil
	}
	return kir.ArgValue{}, fmt.Errorf("argument value %q is not a uint32, addr(buffer)[+offset], noc_x(x,y), noc_y(x,y), noc_x(ethN), noc_y(ethN) or device_id", s)
}

// UnmarshalJSON reads a number or a symbolic string.
func (v *ArgValue) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		av, err := ParseArgValue(s)
		if err != nil {
			return err
		}
		v.ArgValue = av
		return nil
	}
	var n uint32
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("argument value %s is neither a uint32 nor a symbolic string", b)
	}
	v.ArgValue = kir.U32(n)
	return nil
}

// Core is one logical core, in JSON "(x,y)" for a worker core and "eth3"
// for ethernet core (channel) 3 (kir.Core.String).
type Core kir.Core

func (c Core) String() string { return kir.Core(c).String() }

// MarshalJSON writes "(x,y)" or "ethN".
func (c Core) MarshalJSON() ([]byte, error) { return json.Marshal(c.String()) }

// MarshalJSON writes the JSON encoding/json gives the struct's fields,
// {"core":...,"values":[...]}, without reflecting on every value: a
// prefill build's configs hold millions of them.
func (ca CoreArgs) MarshalJSON() ([]byte, error) {
	return ca.appendJSON(make([]byte, 0, 32+12*len(ca.Values)))
}

// appendJSON appends MarshalJSON's bytes to b.
func (ca CoreArgs) appendJSON(b []byte) ([]byte, error) {
	b = append(b, `{"core":"`...)
	// kir.Core.String: digits, "(", ",", ")" and "eth", nothing to escape.
	if c := kir.Core(ca.Core); c.IsEth() {
		b = append(b, "eth"...)
		b = strconv.AppendInt(b, int64(c.X), 10)
	} else {
		b = append(b, '(')
		b = strconv.AppendInt(b, int64(c.X), 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, int64(c.Y), 10)
		b = append(b, ')')
	}
	b = append(b, `","values":`...)
	if ca.Values == nil {
		return append(b, `null}`...), nil
	}
	b = append(b, '[')
	for i, v := range ca.Values {
		if i > 0 {
			b = append(b, ',')
		}
		if v.Kind == kir.ValConst {
			b = strconv.AppendUint(b, uint64(v.Const), 10)
			continue
		}
		var err error
		if b, err = v.appendJSON(b); err != nil {
			return nil, err
		}
	}
	return append(b, `]}`...), nil
}

var (
	coreRE    = regexp.MustCompile(`^\((\d+),(\d+)\)$`)
	ethCoreRE = regexp.MustCompile(`^eth(\d+)$`)
)

// parseCore reads "(x,y)" or "ethN".
func parseCore(s string) (kir.Core, error) {
	if m := ethCoreRE.FindStringSubmatch(s); m != nil {
		ch, err := strconv.Atoi(m[1])
		if err != nil {
			return kir.Core{}, fmt.Errorf("core %q: ethernet channel out of range", s)
		}
		return kir.EthCore(ch), nil
	}
	m := coreRE.FindStringSubmatch(s)
	if m == nil {
		return kir.Core{}, fmt.Errorf("core %q is not of the form (x,y) or ethN", s)
	}
	x, err1 := strconv.Atoi(m[1])
	y, err2 := strconv.Atoi(m[2])
	if err1 != nil || err2 != nil {
		return kir.Core{}, fmt.Errorf("core %q: coordinate out of range", s)
	}
	return kir.Core{X: x, Y: y}, nil
}

// UnmarshalJSON reads "(x,y)" or "ethN".
func (c *Core) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("core: %w", err)
	}
	k, err := parseCore(s)
	if err != nil {
		return err
	}
	*c = Core(k)
	return nil
}

// CoreRange is an inclusive rectangle of logical cores, in JSON
// "(x0,y0)-(x1,y1)" (ir.CoreRange.String) for worker cores; a range of
// ethernet channels (kir.EthRange) is "eth3" for one channel and
// "eth0-eth3" for several.
type CoreRange ir.CoreRange

func (r CoreRange) String() string {
	if kir.IsEthRange(ir.CoreRange(r)) {
		if r.X0 == r.X1 {
			return fmt.Sprintf("eth%d", r.X0)
		}
		return fmt.Sprintf("eth%d-eth%d", r.X0, r.X1)
	}
	return ir.CoreRange(r).String()
}

// MarshalJSON writes "(x0,y0)-(x1,y1)", "ethN" or "ethA-ethB".
func (r CoreRange) MarshalJSON() ([]byte, error) { return json.Marshal(r.String()) }

var (
	rangeRE    = regexp.MustCompile(`^\((\d+),(\d+)\)-\((\d+),(\d+)\)$`)
	ethRangeRE = regexp.MustCompile(`^eth(\d+)(?:-eth(\d+))?$`)
)

// UnmarshalJSON reads "(x0,y0)-(x1,y1)", "ethN" or "ethA-ethB" (A <= B).
func (r *CoreRange) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("core range: %w", err)
	}
	if m := ethRangeRE.FindStringSubmatch(s); m != nil {
		a, err1 := strconv.Atoi(m[1])
		z, err2 := a, error(nil)
		if m[2] != "" {
			z, err2 = strconv.Atoi(m[2])
		}
		if err1 != nil || err2 != nil || z < a {
			return fmt.Errorf("core range %q: ethernet channels out of range or not ascending", s)
		}
		*r = CoreRange(kir.EthRange(a, z))
		return nil
	}
	m := rangeRE.FindStringSubmatch(s)
	if m == nil {
		return fmt.Errorf("core range %q is not of the form (x0,y0)-(x1,y1), ethN or ethA-ethB", s)
	}
	n := [4]int{}
	for i := range n {
		v, err := strconv.Atoi(m[i+1])
		if err != nil {
			return fmt.Errorf("core range %q: coordinate out of range", s)
		}
		n[i] = v
	}
	*r = CoreRange{X0: n[0], Y0: n[1], X1: n[2], Y1: n[3]}
	return nil
}
