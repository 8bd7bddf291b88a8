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
// the symbolic kir.ArgValue.String form resolved at load time:
// "addr(buf)", "addr(buf)+64", "noc_x(1,0)", "noc_y(1,0)".
type ArgValue struct{ kir.ArgValue }

// MarshalJSON prints a constant as a number and anything else as its
// symbolic string.
func (v ArgValue) MarshalJSON() ([]byte, error) {
	if v.Kind == kir.ValConst {
		return []byte(strconv.FormatUint(uint64(v.Const), 10)), nil
	}
	switch v.Kind {
	case kir.ValBufferAddr, kir.ValNoCX, kir.ValNoCY:
		return json.Marshal(v.String())
	}
	return nil, fmt.Errorf("argument value of unknown kind %d", v.Kind)
}

var (
	addrRE = regexp.MustCompile(`^addr\(([^()]+)\)(?:\+(\d+))?$`)
	nocRE  = regexp.MustCompile(`^noc_([xy])\((\d+),(\d+)\)$`)
)

// ParseArgValue parses the symbolic form MarshalJSON writes for
// non-constant values, or a decimal constant.
func ParseArgValue(s string) (kir.ArgValue, error) {
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
	if m := nocRE.FindStringSubmatch(s); m != nil {
		x, err1 := strconv.Atoi(m[2])
		y, err2 := strconv.Atoi(m[3])
		if err1 != nil || err2 != nil {
			return kir.ArgValue{}, fmt.Errorf("argument value %q: core coordinate out of range", s)
		}
		if m[1] == "x" {
			return kir.NoCX(kir.Core{X: x, Y: y}), nil
		}
		return kir.NoCY(kir.Core{X: x, Y: y}), nil
	}
	if n, err := strconv.ParseUint(s, 10, 32); err == nil {
		return kir.U32(uint32(n)), nil
	}
	return kir.ArgValue{}, fmt.Errorf("argument value %q is not a uint32, addr(buffer)[+offset], noc_x(x,y) or noc_y(x,y)", s)
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

// Core is one logical worker core, in JSON "(x,y)".
type Core kir.Core

func (c Core) String() string { return kir.Core(c).String() }

// MarshalJSON writes "(x,y)".
func (c Core) MarshalJSON() ([]byte, error) { return json.Marshal(c.String()) }

var coreRE = regexp.MustCompile(`^\((\d+),(\d+)\)$`)

// UnmarshalJSON reads "(x,y)".
func (c *Core) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("core: %w", err)
	}
	m := coreRE.FindStringSubmatch(s)
	if m == nil {
		return fmt.Errorf("core %q is not of the form (x,y)", s)
	}
	x, err1 := strconv.Atoi(m[1])
	y, err2 := strconv.Atoi(m[2])
	if err1 != nil || err2 != nil {
		return fmt.Errorf("core %q: coordinate out of range", s)
	}
	c.X, c.Y = x, y
	return nil
}

// CoreRange is an inclusive rectangle of logical cores, in JSON
// "(x0,y0)-(x1,y1)" (ir.CoreRange.String).
type CoreRange ir.CoreRange

func (r CoreRange) String() string { return ir.CoreRange(r).String() }

// MarshalJSON writes "(x0,y0)-(x1,y1)".
func (r CoreRange) MarshalJSON() ([]byte, error) { return json.Marshal(r.String()) }

var rangeRE = regexp.MustCompile(`^\((\d+),(\d+)\)-\((\d+),(\d+)\)$`)

// UnmarshalJSON reads "(x0,y0)-(x1,y1)".
func (r *CoreRange) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("core range: %w", err)
	}
	m := rangeRE.FindStringSubmatch(s)
	if m == nil {
		return fmt.Errorf("core range %q is not of the form (x0,y0)-(x1,y1)", s)
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
